"""Where async rerankers run (`ctxbudget.memory.reading.rerank`): the caller's loop, or one of ours.

An async reranker (``async def rerank(query, texts)``, or one returning an awaitable) is awaited
on one of two event loops; the reranker's thread waits for the result there:

* **An async caller's own loop.** A call from a coroutine (``ContextMemory.aassemble``,
  ``acandidates``, ``arun``, and so every adapter's async entry point that gathers through
  them: the LangChain middleware's ``awrap_model_call``, the LlamaIndex memory's ``aget``...)
  runs on the memory's worker threads (`ctxbudget.memory.awaitable`), and marks its context
  with the loop it was awaited on (`mark_caller_loop`); the reranker's coroutine is scheduled
  on that loop. A client bound to the app's loop (an ``asyncio.Lock``, ``Queue`` or
  connection pool made there) then works: on another loop it failed every call with
  ``RuntimeError: ... is bound to a different event loop``. The loop stays free meanwhile
  (the call itself waits on a worker thread). If that loop closes before the coroutine ends
  (the app ended while a late reranker ran), the wait ends too, as failed.
* **A sync caller: one loop per process**, on a daemon thread of its own
  (``ctxbudget-rerank-loop``), started on first use. One loop, not a new one per call: the
  clients an async reranker keeps (an ``httpx.AsyncClient``, so Cohere's, OpenAI's and most API
  clients) hold connections bound to the loop they were opened on, and with a new loop per
  call (``asyncio.run``) every other call failed with ``RuntimeError: Event loop is closed``
  once the first loop had closed under them. A sync call made inside a coroutine (the loop
  blocked by it) runs there too. A forked child starts its own loop.

An adapter whose framework reranker has both a sync and an async method (a LangChain
compressor's ``acompress_documents``, a LlamaIndex postprocessor's ``apostprocess_nodes``) asks
`called_async` on the reranker's thread, and returns the async call's coroutine for an async
caller: it is awaited on that caller's loop like any async reranker.

So a client an async reranker keeps belongs to one side: the app's loop when the memory is
called async, ours when it is called sync (a memory called both ways needs a client that is not
bound to a loop, or one per loop). The coroutine runs in the caller's context
(`contextvars`: spans and callbacks). An async reranker that blocks its loop (a ``time.sleep``
in an ``async def``) holds back that loop's other work while it does; each call is still
waited for at most `MemoryConfig.reranker_timeout`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import os
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

__all__ = [
    "CallCancel",
    "awaited",
    "call_cancelled",
    "called_async",
    "closing_here",
    "give_up_here",
    "mark_caller_loop",
    "sync_or_async",
]

T = TypeVar("T")

_POLL = 0.25  # seconds between looks at whether the caller's loop closed under a call

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_pid: int | None = None
_caller: contextvars.ContextVar[asyncio.AbstractEventLoop | None] = contextvars.ContextVar(
    "ctxbudget_caller_loop", default=None
)
_given_up: dict[threading.Thread, asyncio.AbstractEventLoop] = {}  # waits a close ends (above)


class CallCancel:
    """An async call's cancellation, as its worker thread sees it; thread-safe.

    `cancel` (the caller's coroutine was cancelled while the call ran) cancels the reranker
    coroutines the call awaits on the caller's loop (`awaited`), so the call ends at once
    instead of after ``reranker_timeout``, and no coroutine is left running there. A sync
    reranker cannot be cut: it is still waited for, as before.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancelled = False
        self._hooks: list[Callable[[], object]] = []

    @property
    def cancelled(self) -> bool:
        """True once `cancel` was called."""
        return self._cancelled

    def cancel(self) -> None:
        """Cancel what the call awaits (each hook `on_cancel` gave, once)."""
        with self._lock:
            self._cancelled = True
            hooks, self._hooks = self._hooks, []
        for hook in hooks:
            hook()

    def on_cancel(self, hook: Callable[[], object]) -> Callable[[], None]:
        """Run ``hook`` on `cancel` (at once when already cancelled); returns its removal."""
        with self._lock:
            if not self._cancelled:
                self._hooks.append(hook)
                return lambda: self._forget(hook)
        hook()
        return lambda: None

    def _forget(self, hook: Callable[[], object]) -> None:
        with self._lock:
            if hook in self._hooks:
                self._hooks.remove(hook)


_cancel: contextvars.ContextVar[CallCancel | None] = contextvars.ContextVar(
    "ctxbudget_call_cancel", default=None
)


def mark_caller_loop(context: contextvars.Context) -> CallCancel:
    """Mark ``context`` as an async caller's: its rerankers are awaited on the running loop.

    Called from a coroutine, on the copy of its context a worker thread runs the call in
    (`ctxbudget.memory.awaitable.AsyncRunner.run`); the caller's own context is not changed.
    Returns the call's `CallCancel`: cancel it when the caller is cancelled.
    """
    cancel = CallCancel()
    context.run(_caller.set, asyncio.get_running_loop())
    context.run(_cancel.set, cancel)
    return cancel


def call_cancelled() -> bool:
    """True on a call's threads once its async caller was cancelled (`CallCancel.cancel`)."""
    cancel = _cancel.get()
    return cancel is not None and cancel.cancelled


def called_async() -> bool:
    """True on a reranker's thread of an async caller whose loop still runs.

    For an adapter whose framework reranker has a sync and an async method: the async one is
    awaited on the caller's loop then (where a client bound to it works), the sync one else.
    """
    loop = _caller.get()
    return loop is not None and _usable(loop)


def sync_or_async(
    call: Callable[[], T], acall: Callable[[], Awaitable[T]] | None
) -> T | Awaitable[T]:
    """A framework model's answer, by its sync ``call`` or its own async ``acall`` (None: none).

    The policy of both adapters' rerankers: the async one when the memory was called async
    (`called_async`: awaited on the app's loop, where its client works), else the sync one,
    or the async one when the sync one raises `NotImplementedError` (an async-only model).
    """
    if acall is not None and called_async():
        return acall()
    try:
        return call()
    except NotImplementedError:
        if acall is None:
            raise
        return acall()


def awaited(out: Awaitable[Any]) -> Any:
    """What ``out`` gives, awaited on the caller's loop or the shared one; blocks until then.

    Called from a reranker's own thread (never from a loop): its context (`contextvars`) is
    the one the coroutine runs in, and says whether an async caller's loop awaits it.
    """
    loop = _caller.get()
    if loop is not None and _usable(loop):
        wrapper = _awaited(out)
        try:
            future = asyncio.run_coroutine_threadsafe(wrapper, loop)
        except RuntimeError:  # it closed just now: the shared loop instead
            wrapper.close()
        else:
            cancel = _cancel.get()
            if cancel is None:
                return _result(future, loop)
            forget = cancel.on_cancel(future.cancel)  # its coroutine is cancelled on the loop
            try:
                return _result(future, loop)
            finally:
                forget()
    return asyncio.run_coroutine_threadsafe(_awaited(out), _shared_loop()).result()


def _usable(loop: asyncio.AbstractEventLoop) -> bool:
    """True when ``loop`` runs (it is not blocked by this thread, nor closed)."""
    try:
        here = asyncio.get_running_loop()
    except RuntimeError:  # no loop runs in this thread (a reranker's thread)
        here = None
    return here is not loop and loop.is_running() and not loop.is_closed()


@contextlib.contextmanager
def closing_here(threads: list[threading.Thread]) -> Iterator[None]:
    """While a close on an event loop's thread waits for ``threads``: end their waits there.

    A sync ``close()`` made inside a coroutine blocks its loop, so a reranker's coroutine
    scheduled there cannot end, and the close would wait for it until `MODEL_WAIT`. While this
    lasts, those of ``threads`` that wait on this thread's running loop stop waiting (the
    coroutine is cancelled once the loop runs again; the call counts the reranker as failed).
    Nothing changes when no loop runs in this thread.
    """
    here = give_up_here(threads)
    if here is None:
        yield
        return
    try:
        yield
    finally:
        with _lock:
            for thread in threads:
                if _given_up.get(thread) is here:
                    del _given_up[thread]


def give_up_here(threads: list[threading.Thread]) -> asyncio.AbstractEventLoop | None:
    """Those of ``threads`` waiting on this thread's running loop stop waiting (`closing_here`).

    For the start of a close on a loop's thread: it first waits for the memory's running calls,
    which wait for their reranker (until 2026-12-01 such a close took the whole
    ``reranker_timeout``). The loop, or None when none runs here (nothing changes).
    """
    try:
        here = asyncio.get_running_loop()
    except RuntimeError:
        return None
    with _lock:
        for ended in [t for t in _given_up if not t.is_alive()]:
            del _given_up[ended]
        _given_up.update(dict.fromkeys(threads, here))
    return here


def _result(future: concurrent.futures.Future[Any], loop: asyncio.AbstractEventLoop) -> Any:
    """``future``'s result, or its cancellation once ``loop`` closed (or was blocked: above)."""
    me = threading.current_thread()
    while not future.done():
        concurrent.futures.wait([future], timeout=_POLL)
        if future.done():
            break
        if loop.is_closed():
            msg = "the event loop of the async call that awaited the reranker closed first"
            raise concurrent.futures.CancelledError(msg)
        if _given_up.get(me) is loop:
            future.cancel()  # its coroutine is cancelled when the loop runs again
            msg = "the memory closed on the thread of the event loop the reranker needed"
            raise concurrent.futures.CancelledError(msg)
    return future.result()


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
