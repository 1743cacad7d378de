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
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager

__all__ = ["Closing", "close_async"]


class Closing:
    """One memory's close (thread-safe): which steps ran, who runs them, how it ended."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._owner: int | None = None  # the thread running the steps
        self._next = 0  # the first step not yet done
        self._error: Exception | None = None  # the first error a step raised
        self._finished = False

    def run(
        self,
        steps: Sequence[Callable[[], None]],
        excused: Callable[[], AbstractContextManager[object]],
    ) -> None:
        """Run ``steps`` once (the first caller), or wait until they ran; raise what they raised.

        ``excused``: entered while this thread waits for another's close (the memory's async
        runner then does not wait for this thread: it may be one of its workers).
        """
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

    def _run(self, steps: Sequence[Callable[[], None]]) -> None:
        while self._next < len(steps):
            try:
                steps[self._next]()
            except Exception as exc:  # noqa: BLE001 - the other steps still run; raised at the end
                if self._error is None:
                    self._error = exc
            self._next += 1


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
