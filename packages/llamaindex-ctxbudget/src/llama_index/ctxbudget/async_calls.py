"""The async twins of `CtxBudgetMemory`'s reads and writes, on the memory's own threads.

Each runs the sync call on its `ContextMemory`'s worker threads (`ContextMemory.arun`, with the
caller's context), so an event loop never waits for Chroma or the embedder, in the order the
calls were made on the loop (`ctxbudget.memory.ordering.CallOrder`): of ``aput`` calls gathered,
each stores after those called before it, and a read follows the writes called before it (until
2026-12-02 the worker threads stored gathered puts in any order). ``aget`` awaits the memory
blocks in the caller's task first, then assembles on a worker thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llama_index.core.base.llms.types import ChatMessage
    from llama_index.core.memory.memory import BaseMemoryBlock

    from ctxbudget import AssembledContext, ContextItem
    from ctxbudget.memory.context import ContextMemory
    from ctxbudget.memory.ordering import CallOrder
    from llama_index.ctxbudget.current import CurrentMessage

__all__ = ["AsyncCalls"]


class AsyncCalls:
    """``aget``, ``aget_all``, ``aput``, ``aput_messages``, ``aset``, ``areset`` (their sync twins).

    First among `CtxBudgetMemory`'s bases, before LlamaIndex's ``BaseMemory``, whose own async
    methods call the sync ones on the event loop's thread.
    """

    if TYPE_CHECKING:  # CtxBudgetMemory's attribute and methods (pydantic must not see them here)
        _memory: ContextMemory
        _order: CallOrder

        def get_all(self) -> list[ChatMessage]: ...  # noqa: D102
        def put(self, message: ChatMessage) -> None: ...  # noqa: D102
        def put_messages(self, messages: list[ChatMessage]) -> None: ...  # noqa: D102
        def set(self, messages: list[ChatMessage]) -> None: ...  # noqa: D102
        def reset(self) -> None: ...  # noqa: D102

        memory_blocks: list[BaseMemoryBlock]  # type: ignore[type-arg]

        async def _blocks(  # noqa: D102
            self, input: str | ChatMessage | None, block_kwargs: dict[str, Any]
        ) -> list[ContextItem]: ...
        def _get(  # noqa: D102
            self, input: str | ChatMessage | None, initial: object, extra: list[ContextItem]
        ) -> tuple[AssembledContext, CurrentMessage | None]: ...
        def _report(  # noqa: D102
            self, context: AssembledContext, own: CurrentMessage | None = None
        ) -> list[ChatMessage]: ...

    async def aget(  # noqa: A002 - the name LlamaIndex uses
        self, input: str | ChatMessage | None = None, **kwargs: Any
    ) -> list[ChatMessage]:
        """Async `get`: memory blocks are awaited, store reads run in a worker thread."""
        initial = kwargs.pop("initial_token_count", 0)

        async def read() -> tuple[AssembledContext, CurrentMessage | None]:
            extra = await self._blocks(input, kwargs) if self.memory_blocks else []
            return await self._memory.arun(self._get, input, initial, extra)

        # After the writes called before it; assembled in a worker thread, reported here.
        return self._report(*await self._order.run(read, writes=False))

    async def aget_all(self) -> list[ChatMessage]:
        """Async `get_all`."""
        return await self._order.run(lambda: self._memory.arun(self.get_all), writes=False)

    async def aput(self, message: ChatMessage) -> None:
        """Async `put`."""
        await self._order.run(lambda: self._memory.arun(self.put, message), writes=True)

    async def aput_messages(self, messages: list[ChatMessage]) -> None:
        """Async `put_messages`."""
        await self._order.run(lambda: self._memory.arun(self.put_messages, messages), writes=True)

    async def aset(self, messages: list[ChatMessage]) -> None:
        """Async `set`."""
        await self._order.run(lambda: self._memory.arun(self.set, messages), writes=True)

    async def areset(self) -> None:
        """Async `reset`."""
        await self._order.run(lambda: self._memory.arun(self.reset), writes=True)
