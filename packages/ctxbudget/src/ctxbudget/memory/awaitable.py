"""`ContextMemory`'s async methods: the sync ones, run on the memory's own worker threads.

`ContextMemory` defines ``aassemble``, ``acandidates``, ``asearch``, ``ahistory``,
``aadd_message``, ``aadd_messages``, ``apin``, ``aunpin``, ``aclear``, ``adelete_session``,
``adelete_user``, ``aflush`` and ``aclose`` with `awaitable`: each takes the arguments of its
sync method and returns what it returns, without blocking the event loop.

Why threads: the work of a call is CPU (the embedding model's forward pass, scoring, packing)
and store I/O. Embedded Chroma has no async API, and its server's async client would move only
the I/O; the CPU part would still block the loop. So every call runs on a small pool of worker
threads that belongs to the memory (`AsyncRunner`, `ASYNC_WORKERS` threads), with the caller's
context (`contextvars`: tracing spans and LangChain callbacks nest as they would in a sync call).
A few threads keep the event loop's own turns short: Python runs one thread at a time, and a
loop waiting behind many busy threads lags (docs/benchmarks.md, "Async").

Adapters run their whole sync path for a call the same way (`ContextMemory.arun`), so the
LangChain middleware's and LlamaIndex memory's async methods do not use the loop's default
executor, which other libraries share.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Concatenate, ParamSpec, TypeVar

__all__ = ["ASYNC_WORKERS", "AsyncRunner", "awaitable"]

ASYNC_WORKERS = 2
"""Worker threads of one memory's async calls (more only queue behind the interpreter lock)."""

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")


class AsyncRunner:
    """A memory's worker threads for its async methods, created on first use.

    A forked child gets new threads (the parent's do not exist there); after `close`, the next
    call starts them again, so an async call after ``close`` fails as the sync one does.
    """

    def __init__(self, workers: int | None = None) -> None:
        self._workers = ASYNC_WORKERS if workers is None else workers
        self._pool: ThreadPoolExecutor | None = None
        self._pid = os.getpid()
        self._lock = threading.Lock()

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None or self._pid != os.getpid():
                self._pool = ThreadPoolExecutor(self._workers, thread_name_prefix="ctxbudget")
                self._pid = os.getpid()
            return self._pool

    async def run(self, func: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
        """``func(*args, **kwargs)`` on a worker thread, in a copy of the caller's context."""
        loop = asyncio.get_running_loop()
        context = contextvars.copy_context()
        call = functools.partial(context.run, func, *args, **kwargs)
        return await loop.run_in_executor(self._executor(), call)

    def close(self) -> None:
        """Let the threads end once their calls return (a call in flight is not cut)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False)


def awaitable(
    method: Callable[Concatenate[S, P], R],
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, R]]:
    """The async twin of a `ContextMemory` method: the same arguments, the same result.

    The result runs ``method`` on the memory's worker threads (``self.arun``).
    """

    @functools.wraps(method)
    async def twin(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        run: Callable[..., Coroutine[Any, Any, R]] = self.arun  # type: ignore[attr-defined]
        return await run(method, self, *args, **kwargs)

    twin.__name__ = f"a{method.__name__}"
    twin.__qualname__ = f"{method.__qualname__.rpartition('.')[0]}.a{method.__name__}".lstrip(".")
    twin.__doc__ = f"Async `{method.__name__}`: the same arguments and result, off the event loop."
    return twin
