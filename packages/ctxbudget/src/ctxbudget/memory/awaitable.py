"""`ContextMemory`'s async methods: the sync ones, run on the memory's own worker threads.

`ContextMemory` defines ``aassemble``, ``acandidates``, ``asearch``, ``ahistory``,
``aadd_message``, ``aadd_messages``, ``apin``, ``aunpin``, ``aclear``, ``adelete_session``,
``adelete_user``, ``adelete_messages``, ``areplace_message``, ``aflush`` and ``aclose`` with
`awaitable`, and its keyed values' methods (`ctxbudget.memory.values.api`) ``aput_value``,
``aput_values``, ``aget_value``, ``aget_values``, ``adelete_value``, ``asearch_values``,
``alist_value_namespaces`` and ``asweep_values``: each takes the arguments of its sync method
and returns what it returns, without blocking the loop.

Why threads: the work of a call is CPU (the embedding model's forward pass, scoring, packing)
and store I/O. Embedded Chroma has no async API, and its server's async client would move only
the I/O; the CPU part would still block the loop. So every call runs on a small pool of worker
threads that belongs to the memory (`AsyncRunner`, `ASYNC_WORKERS` threads), with the caller's
context (`contextvars`: tracing spans and LangChain callbacks nest as they would in a sync call),
marked as an async caller's: an async reranker is awaited on the caller's own event loop, where a
client bound to it works (`ctxbudget.memory.reading.coroutines`).
A few threads keep the event loop's own turns short: Python runs one thread at a time, and a
loop waiting behind many busy threads lags (docs/benchmarks.md, "Async").

Adapters run their whole sync path for a call the same way (`ContextMemory.arun`), so the
LangChain middleware's and LlamaIndex memory's async methods do not use the loop's default
executor, which other libraries share.

In call order: the methods of one session (``awaitable(..., writes=...)``) run in the order
they were called on their event loop (`ctxbudget.memory.ordering.SessionOrders`); calls on
other sessions run beside them (docs/memory.md, "Async").

Cancelled calls (the rule for every ``a``-method and `ContextMemory.arun`): **a cancelled call
either has no effect or finishes before the same caller's next call starts.** A call still
queued for a worker is dropped (it never runs); a call already running on a worker cannot be
cut, so the cancelled coroutine waits for it to end (its result or error is dropped) before the
cancellation reaches the caller. Cancelling ``adelete_session`` and then adding a message to the
same session can therefore never lose that message. The price: a cancel (a timeout too) takes
effect only when the running call ends, as a sync call would. (``task.cancel()`` only asks: a
caller awaits the task before its next call, as ``asyncio.timeout``, ``wait_for`` and task
groups do.)

A call that raises `StopIteration` (an embedder's ``next()`` on an empty iterator) raises it in
the coroutine, so the caller gets Python's `RuntimeError` from it (PEP 479), as from any
coroutine. asyncio cannot hold it in a future: the call hung for ever, timeouts too.

Closed: after ``close()``/``aclose()`` every ``a``-method raises `MemoryClosedError` when it is
awaited, as its sync twin does (`ctxbudget.store.client.Closable`); ``aclose`` again does nothing.
Closing while calls run on the workers waits for them before the store is released
(`AsyncRunner.close`): a running call is not cut under its feet (on a Chroma server, it failed
with the HTTP client's "client has been closed" ``RuntimeError``); it ends with its result, or
with `MemoryClosedError` where it reaches a part of the memory that close has already shut. A
call still queued for a worker when the memory closes is refused (`MemoryClosedError`), never
run. When ``close`` or ``aclose`` returns, the memory's worker threads have ended too (until
2026-11-30 only ``aclose`` waited for them, and a thread could outlive ``close``). How several
closes at once share one (`ctxbudget.memory.closing`).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Concatenate, ParamSpec, TypeVar

from ctxbudget.memory.ordering import SessionOrders
from ctxbudget.memory.reading.coroutines import mark_caller_loop

__all__ = ["ASYNC_WORKERS", "CLOSE_WAIT", "AsyncRunner", "awaitable"]

logger = logging.getLogger(__name__)

CLOSE_WAIT = 30.0
"""Seconds `AsyncRunner.close` waits for running calls (past it, the memory closes under them),
and then for its threads to end."""

ASYNC_WORKERS = 2
"""Worker threads of one memory's async calls (more only queue behind the interpreter lock)."""

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")


class AsyncRunner:
    """A memory's worker threads for its async methods, created on first use.

    A forked child gets new threads (the parent's do not exist there). `close` waits for the
    calls running on the workers, so the memory releases its store only after them, refuses
    the calls still queued (``refuse`` raises the memory's closed error on the worker; without
    it they run), and returns once the workers ended. A call that raced the close (it passed
    its open check just before) still runs, on a thread of its own that ends with it: a closed
    runner keeps no thread.
    """

    def __init__(self, workers: int | None = None, *, refuse: Callable[[], None] | None = None):
        self._workers = ASYNC_WORKERS if workers is None else workers
        self._refuse = refuse
        self._pool: ThreadPoolExecutor | None = None
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._running: Counter[int] = Counter()  # calls running, by worker thread
        self._threads: set[threading.Thread] = set()  # the threads started for calls
        self._excused: set[int] = set()  # workers waiting for another's close: not waited for
        self._closed = False
        self.orders = SessionOrders()  # each session's async calls in call order (`awaitable`)

    def _submit(self, call: Callable[[], R]) -> Future[R | _Stopped]:
        """``call`` queued for a worker (after `close`: a thread of its own, ending with it)."""
        with self._lock:
            only_this = self._closed
            if only_this:
                pool = ThreadPoolExecutor(1, thread_name_prefix="ctxbudget")
            else:
                if self._pool is None or self._pid != os.getpid():
                    self._pool = ThreadPoolExecutor(self._workers, thread_name_prefix="ctxbudget")
                    self._pid = os.getpid()
                    self._running.clear()  # a forked child runs none of its parent's calls
                    self._threads.clear()
                pool = self._pool
            started = pool.submit(self._call, call, pooled=not only_this)
            # The threads the pool started for it, known at once: `close` joins every one.
            self._threads = {t for t in self._threads if t.is_alive()}
            self._threads.update(getattr(pool, "_threads", ()))
        if only_this:
            pool.shutdown(wait=False)  # its one thread ends with the call
        return started

    def _call(self, call: Callable[[], R], *, pooled: bool) -> R | _Stopped:
        me = threading.get_ident()
        refuse = self._refuse if pooled and self._closed else None
        if refuse is not None:
            refuse()  # queued when the memory closed: refused (it raises), never run
        with self._lock:
            self._running[me] += 1
        try:
            return call()
        except StopIteration as exc:
            # asyncio cannot put StopIteration in a future: it refused it, and the call never
            # ended for its caller (a timeout neither). It is raised again in `run`.
            return _Stopped(exc)
        finally:
            with self._lock:
                self._running[me] -= 1
                if not self._running[me]:
                    del self._running[me]
                self._idle.notify_all()

    async def run(self, func: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
        """``func(*args, **kwargs)`` on a worker thread, in a copy of the caller's context.

        Cancelled, it has no effect (not started yet) or returns once ``func`` ended. An async
        reranker it calls is awaited on the caller's loop (`mark_caller_loop`), and cancelled
        with it (`CallCancel`).
        """
        context = contextvars.copy_context()
        cancel = mark_caller_loop(context)
        call = functools.partial(context.run, func, *args, **kwargs)
        started = self._submit(call)
        running = asyncio.wrap_future(started)
        try:
            result = await asyncio.shield(running)
        except asyncio.CancelledError:
            if not started.cancel():  # running already: it cannot be cut, so let it end first
                cancel.cancel()  # but what it awaits on this loop can (an async reranker)
                await _until_done(running)
            raise
        if isinstance(result, _Stopped):
            raise result.error  # in a coroutine: RuntimeError from it (PEP 479)
        return result

    def own_threads(self) -> set[int]:
        """The threads this runner started for calls, and those excused: `close` sees to them."""
        with self._lock:
            return {t.ident for t in self._threads if t.ident is not None} | self._excused

    @contextlib.contextmanager
    def excused(self) -> Iterator[None]:
        """While in it, `close` does not wait for this thread (it waits for another's close)."""
        me = threading.get_ident()
        with self._lock:
            self._excused.add(me)
            self._idle.notify_all()
        try:
            yield
        finally:
            with self._lock:
                self._excused.discard(me)

    def close(self) -> None:
        """Wait for the running calls, refuse the queued ones, return once the workers ended.

        Each wait is `CLOSE_WAIT` at most. Called from a worker (a call that closes its memory)
        it does not wait for itself, nor for a worker `excused` (waiting for another close).
        """
        me = threading.get_ident()

        def ours(thread: int) -> bool:  # not waited for
            return thread == me or thread in self._excused

        with self._lock:
            self._closed = True
            pool = self._pool  # kept until shut: a close cut by Ctrl-C shuts it when run again
            if self._pid == os.getpid():
                if not self._idle.wait_for(lambda: all(map(ours, self._running)), CLOSE_WAIT):
                    logger.warning(
                        "closing the memory while %d async call(s) still run after %.0f s: "
                        "they end with MemoryClosedError or a store error",
                        sum(n for t, n in self._running.items() if not ours(t)),
                        CLOSE_WAIT,
                    )
        if pool is not None:
            pool.shutdown(wait=False)
            self._pool = None
        self._join(me)

    async def stopped(self) -> None:
        """After `close`: return once the threads started for calls ended (but this one).

        For a close that ran on a worker (a function given to ``arun`` closed the memory): that
        worker ends only after its close returned. Waits without blocking the loop, for
        `CLOSE_WAIT` at most.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CLOSE_WAIT
        me = threading.current_thread()
        while any(t.is_alive() and t is not me for t in list(self._threads)):
            if loop.time() > deadline:
                return
            await asyncio.sleep(0.001)

    def _join(self, me: int) -> None:
        """Wait until the threads started for calls ended, but this one and those excused."""
        deadline = time.monotonic() + CLOSE_WAIT
        while True:
            with self._lock:
                if self._pid != os.getpid():
                    return  # a forked child: its parent's threads do not exist here
                alive = [
                    t
                    for t in self._threads
                    if t.is_alive() and t.ident != me and t.ident not in self._excused
                ]
            left = deadline - time.monotonic()
            if not alive:
                return
            if left <= 0:
                logger.warning("closing the memory: %d worker thread(s) still run", len(alive))
                return
            alive[0].join(left)


class _Stopped:
    """A call's `StopIteration`, carried out of its thread as a result (not as an error)."""

    def __init__(self, error: StopIteration) -> None:
        self.error = error


async def _until_done(running: asyncio.Future[Any]) -> None:
    # Cancelled again while waiting: wait on (the first cancellation is raised afterwards).
    while not running.done():
        try:
            await asyncio.wait([running])
        except asyncio.CancelledError:
            continue
    if not running.cancelled():
        running.exception()  # retrieved, so asyncio does not log it as never retrieved


def awaitable(
    method: Callable[Concatenate[S, P], R], *, writes: bool | None = None
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, R]]:
    """The async twin of a `ContextMemory` method: the same arguments, the same result.

    The result runs the memory's own ``method`` (as the instance has it: checked open) on the
    memory's worker threads (``self.arun``), under the cancellation rule above. ``writes``: a
    method of one session (its first argument) whose calls run in call order on their loop
    (`ctxbudget.memory.ordering.SessionOrders`): a write after every call before it, a read
    after the writes before it; None: not ordered.
    """
    name = method.__name__

    @functools.wraps(method)
    async def twin(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        run: Callable[..., Coroutine[Any, Any, R]] = self.arun  # type: ignore[attr-defined]
        call = functools.partial(run, getattr(self, name), *args, **kwargs)
        session = args[0] if args else kwargs.get("session_id")
        if writes is None or not isinstance(session, str):
            return await call()
        orders: SessionOrders = self._async.orders  # type: ignore[attr-defined]
        return await orders.of(session).run(call, writes=writes)

    twin.__name__ = f"a{method.__name__}"
    twin.__qualname__ = f"{method.__qualname__.rpartition('.')[0]}.a{method.__name__}".lstrip(".")
    twin.__doc__ = f"Async `{method.__name__}`: the same arguments and result, off the event loop."
    return twin
