"""How a `ContextMemory` closes: once, to its end, however many callers ask and from where.

``close`` is a list of steps (refuse new calls, end the async calls and their threads, store
what was acknowledged, release the store and its folder). `Closing` runs them for the first
caller; every other ``close`` or ``aclose`` that comes meanwhile (another thread, another task,
an app's shutdown hook beside an ``async with``) waits until they ended, and gets the same
outcome: it returns once the memory is closed, or raises the error that closing raised. A
close that comes later does the same at once (it returns, or raises that error again).

- A step that raises an ordinary error does not stop the others: the store is still released
  and its folder let go, and the first error is raised at the end.
- A close cut short (Ctrl-C, ``SystemExit``) is not finished: the next ``close`` (or one that
  was waiting for it) goes on from the step it was cut in (each step can be run again).
- A close called from inside the close (a store's ``on_close`` callback) returns at once, and
  one called from a worker thread the close waits for is not waited for while it waits
  (``excused``): neither deadlocks.

``aclose`` (`close_async`) runs ``close`` on a thread of its own, ``ctxbudget-close``, and
returns once that thread ended: the event loop turns meanwhile (the calls running on the
memory's workers may await an async reranker on it).

The user's models running on threads of the memory (a custom entity extractor's batch,
``ctxbudget-entities``; a reranker's call, ``ctxbudget-rerank``, one past its
``reranker_timeout`` too) are waited for by `join_model_threads`: a model call cannot be cut,
so ``close`` waits `MODEL_WAIT` seconds at most for each kind, then returns without it and one
warning names the thread and the model (a daemon thread: it does not keep the process from
exiting, and what it answers is dropped).

**A forked child** (``os.fork``, ``multiprocessing``'s "fork", a preloading server) gets a copy
of a memory without its parent's threads. Its `Closing` is made sane as the child starts
(``os.register_at_fork``): a close that was running in the parent is the parent's (it stores
and releases what the parent acknowledged), and is not waited for. The child's ``close`` runs
only the steps given for a child (``in_child``: for a memory, refusing calls) and returns: the
store, its folder lock, journal and threads are the parent's (the journal and lock already let
go of the child's copies at the fork; closing an embedded Chroma's client in a child hung in
its native code). Before 2026-11-30 a child forked during its parent's close waited for it for
ever, and one forked before any close hung in Chroma's ``stop``.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager

__all__ = ["MODEL_WAIT", "Closing", "close_async", "join_model_threads"]

logger = logging.getLogger(__name__)

MODEL_WAIT = 30.0
"""Seconds ``close`` waits for the threads of one kind of user model (`join_model_threads`)."""


class Closing:
    """One memory's close (thread-safe): which steps ran, who runs them, how it ended."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._owner: int | None = None  # the thread running the steps
        self._next = 0  # the first step not yet done
        self._error: Exception | None = None  # the first error a step raised
        self._finished = False
        self._pid = os.getpid()  # the process whose close this is (not a forked child's copy)
        _CLOSINGS.add(self)

    def run(
        self,
        steps: Sequence[Callable[[], None]],
        excused: Callable[[], AbstractContextManager[object]],
        *,
        in_child: Sequence[Callable[[], None]] = (),
    ) -> None:
        """Run ``steps`` once (the first caller), or wait until they ran; raise what they raised.

        ``excused``: entered while this thread waits for another's close (the memory's async
        runner then does not wait for this thread: it may be one of its workers).
        ``in_child``: what a forked child's copy runs instead (none by default): the other
        steps end threads and release a store, journal and lock that are the parent's.
        """
        if os.getpid() != self._pid:
            steps = in_child
        me = threading.get_ident()
        with self._cond:
            while True:
                if self._finished:
                    if self._error is not None:
                        raise self._error
                    return
                if self._owner is None:  # the first, or the one after a close that was cut
                    self._owner = me
                    break
                if self._owner == me:  # closed again from inside the close: it goes on
                    return
                with excused():
                    self._cond.wait()
        try:
            self._run(steps)
        except BaseException:
            with self._cond:  # cut (Ctrl-C): the next close goes on from the step it was in
                self._owner = None
                self._cond.notify_all()
            raise
        with self._cond:
            self._finished, self._owner = True, None
            self._cond.notify_all()
            if self._error is not None:
                raise self._error

    def _forked(self) -> None:
        """In a forked child: no thread of the parent runs here, nor holds the condition."""
        self._cond = threading.Condition()
        self._owner = None  # a close running in the parent is the parent's: not waited for
        if not self._finished:  # the child's close runs its own steps (``in_child``)
            self._next, self._error = 0, None

    def _run(self, steps: Sequence[Callable[[], None]]) -> None:
        while self._next < len(steps):
            try:
                steps[self._next]()
            except Exception as exc:  # noqa: BLE001 - the other steps still run; raised at the end
                if self._error is None:
                    self._error = exc
            self._next += 1


_CLOSINGS: weakref.WeakSet[Closing] = weakref.WeakSet()  # for a forked child to make sane


def _forked_child() -> None:
    for closing in list(_CLOSINGS):
        closing._forked()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked_child)


def join_model_threads(threads: Sequence[threading.Thread], *, model: str) -> bool:
    """Wait until ``threads`` (running ``model``, the user's) ended, `MODEL_WAIT` s at most.

    The calling thread is not waited for (a model that closed its memory). Past the bound, one
    warning names the threads still running and ``model``, and False is returned.
    """
    me = threading.current_thread()
    others = [t for t in threads if t is not me]
    deadline = time.monotonic() + MODEL_WAIT
    for thread in others:
        thread.join(max(0.0, deadline - time.monotonic()))
    alive = [t for t in others if t.is_alive()]
    if alive:
        names = ", ".join(sorted({t.name for t in alive}))
        logger.warning(
            "closing the memory: %s still runs on %d thread(s) (%s) after %g s; close returns "
            "without it (a daemon thread, it does not keep the process from exiting; what it "
            "answers is dropped)",
            model,
            len(alive),
            names,
            MODEL_WAIT,
        )
    return not alive


async def close_async(close: Callable[[], None]) -> None:
    """``close()`` on a thread of its own, awaited without blocking the loop.

    Returns once ``close`` returned and its thread ended; raises what ``close`` raised.
    Cancelled, it still waits for ``close`` to end (a close cannot be cut) before raising.
    """
    loop = asyncio.get_running_loop()
    ended: asyncio.Future[BaseException | None] = loop.create_future()
    context = contextvars.copy_context()

    def settle(outcome: BaseException | None) -> None:
        if not ended.done():
            ended.set_result(outcome)

    def work() -> None:
        outcome: BaseException | None = None
        try:
            context.run(close)
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
            outcome = exc
        try:
            loop.call_soon_threadsafe(settle, outcome)
        except RuntimeError:  # the loop was closed meanwhile: nobody awaits it any more
            pass

    thread = threading.Thread(target=work, name="ctxbudget-close", daemon=True)
    thread.start()
    cancelled = False
    while not ended.done() or thread.is_alive():  # the thread only returns once ended is set
        try:
            await (asyncio.shield(ended) if not ended.done() else asyncio.sleep(0.001))
        except asyncio.CancelledError:
            cancelled = True  # the close goes on: wait for it, then raise the cancellation
    if cancelled:
        raise asyncio.CancelledError
    outcome = ended.result()
    if outcome is not None:
        raise outcome
