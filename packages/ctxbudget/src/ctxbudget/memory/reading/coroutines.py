"""The one event loop async rerankers run on (`ctxbudget.memory.reading.rerank`).

An async reranker (``async def rerank(query, texts)``, or one returning an awaitable) is awaited
on a single event loop per process, on a daemon thread of its own (``ctxbudget-rerank-loop``),
started on first use; the reranker's thread waits for the result there. One loop, not a new
one per call: the clients an async reranker keeps (an ``httpx.AsyncClient``, so Cohere's,
OpenAI's and most API clients) hold connections bound to the loop they were opened on, and
with a new loop per call (``asyncio.run``) every other call failed with ``RuntimeError: Event
loop is closed`` once the first loop had closed under them. The coroutine runs in the
caller's context (`contextvars`: spans and callbacks). A forked child starts its own loop.

An async reranker that blocks its loop (a ``time.sleep`` in an ``async def``) holds back the
other async rerankers of the process while it does; each call is still waited for at most
`MemoryConfig.reranker_timeout`.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Awaitable
from typing import Any

__all__ = ["awaited"]

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_pid: int | None = None


def awaited(out: Awaitable[Any]) -> Any:
    """What ``out`` gives, awaited on the shared loop; blocks the calling thread until then.

    Called from a reranker's own thread (never from the loop): its context (`contextvars`)
    is the one the coroutine runs in.
    """
    return asyncio.run_coroutine_threadsafe(_awaited(out), _shared_loop()).result()


async def _awaited(out: Awaitable[Any]) -> Any:
    return await out


def _shared_loop() -> asyncio.AbstractEventLoop:
    """The process's rerank loop, running; started on first use (again in a forked child)."""
    global _loop, _pid  # noqa: PLW0603 - one loop per process, made on first use
    with _lock:
        if _loop is None or _pid != os.getpid() or _loop.is_closed():
            loop = asyncio.new_event_loop()
            running = threading.Event()

            def run() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(running.set)
                loop.run_forever()

            thread = threading.Thread(target=run, name="ctxbudget-rerank-loop", daemon=True)
            thread.start()
            running.wait()
            _loop, _pid = loop, os.getpid()
        return _loop
