"""The LlamaIndex door, async: `CtxBudgetMemory` in a ``SimpleChatEngine`` awaited (``achat``).

`li_memory`'s driver, each chat awaited on a loop of its own (``asyncio.run``), as an async
app awaits its engine: the memory's ``aget`` and ``aput`` run, not their sync twins. The
report is the memory's ``last_context`` read in the task that awaited the chat (it is kept
per thread and task).
"""

from __future__ import annotations

import asyncio
from typing import Any

from ._llama import openai_form
from .base import Place, Received, Refusal
from .common import (
    SPANS,
    assembly_tokens,
    attempt,
    heard,
    new_turns,
    raised,
)
from .li_memory import MemoryDriver, bad_parts

__all__ = ["AsyncMemoryDriver", "make"]


class AsyncMemoryDriver(MemoryDriver):
    """`CtxBudgetMemory` per session in a ``SimpleChatEngine``, awaited with ``achat``."""

    name = "li_memory_async"

    def send(self, session: str, user: str, query: str, budget: int) -> Received:
        """One awaited ``achat`` of the session's engine within ``budget``."""
        engine, chat = self._engine(session, user, budget)
        before = {r.id for r in self.memory.history(session)}
        SPANS.clear()

        async def run() -> Any:
            await engine.achat(query)
            return chat.last_context  # kept per task: read in the one awaiting

        context = asyncio.run(run())
        span = assembly_tokens()
        stored = new_turns(self.memory, session, before)
        sent = openai_form(self.llm.prompts[-1])
        return heard(sent, context, self.registry.texts, budget, span_tokens=span, stored=stored)

    def bad(self, argument: str, value: object) -> Refusal | None:
        """One awaited chat with ``argument=value``."""
        settings, query, options = bad_parts(argument, value)

        async def run() -> object:
            return await self._engine(**settings, **options)[0].achat(query)  # type: ignore[arg-type]

        return attempt(lambda: asyncio.run(run()))

    def after_close(self) -> BaseException | None:
        """One awaited chat after `close`."""

        async def run() -> object:
            return await self._engine("closed", "closed-user", 300)[0].achat("Still there?")

        return raised(lambda: asyncio.run(run()))


def make(place: Place) -> AsyncMemoryDriver:
    """The driver."""
    return AsyncMemoryDriver(place)
