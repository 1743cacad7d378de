"""`CtxBudgetStore`'s closing: once, to its end, however many callers ask and from where.

Closing stops the TTL sweeper (a sweep running is waited for) and closes the memory the store
opened (a memory passed in stays open). It runs once, through the core's
`ctxbudget.memory.closing.Closing`: a ``close`` or ``aclose`` that comes while another is still
closing (an app's shutdown hook beside an ``async with``, two tasks, a thread and a task)
returns only once that close ended, and raises what it raised (until 2026-11-30 it returned
at once, while the sweep and the memory's close still ran).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from ctxbudget.errors import MemoryClosedError
from ctxbudget.memory.closing import Closing, close_async
from langchain_ctxbudget.store_ttl import TTLSweeping

if TYPE_CHECKING:
    from typing import Self

__all__ = ["ClosingStore"]


class ClosingStore(TTLSweeping):
    """``close``, ``aclose`` and the ``with`` forms of `CtxBudgetStore` (a part of it).

    Attributes:
        _owns: whether the store opened its memory (then closing closes it).
        _closing: the one close of this store.
    """

    _owns: bool
    _closed: bool
    _closing: Closing

    def close(self) -> None:
        """Stop the sweeper and, if this store opened its memory, close it; again: nothing.

        A sweep running is waited for. After it, every operation raises `MemoryClosedError`.
        A memory passed in stays open. A close that comes while another runs waits for it.
        """
        self._closed = True
        self._closing.run([self._stop_all, self._close_own], contextlib.nullcontext)

    async def aclose(self) -> None:
        """Async `close`: waits for a running sweep without blocking the event loop.

        `close`'s work runs on the memory's worker threads (`ContextMemory.arun`), so the loop
        keeps turning while a sweep ends (the sweeper thread holds the store until then).
        Cancelled, it has no effect (not started yet) or ends before the cancellation reaches
        the caller, as every async call of the memory. Over a memory passed in and closed
        already, the sweeper is told to stop and not waited for (its sweep can only fail).
        Called while another close runs, it returns once that one ended.
        """
        if self._closed:  # closing or closed: that close's end, and its outcome
            await close_async(self.close)
            return
        self._closed = True
        started = False

        def shut() -> None:
            nonlocal started
            started = True
            self.close()

        try:
            await self.memory.arun(shut)
        except MemoryClosedError:
            if started:
                raise
            self._stop_sweeper(0)
        except asyncio.CancelledError:
            if not started:  # dropped before it ran: the store is as it was, open
                self._closed = False
            raise

    def _stop_all(self) -> None:
        self._stop_sweeper(None)

    def _close_own(self) -> None:
        if self._owns:
            self.memory.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        """``async with CtxBudgetStore(...) as store:``, as LangGraph's async stores are used."""
        return self

    async def __aexit__(self, *exc: object) -> None:
        """`aclose` (an exception raised inside the block is raised on)."""
        await self.aclose()
