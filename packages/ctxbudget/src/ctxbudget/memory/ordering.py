"""Async calls applied in the order they were called on their event loop: `CallOrder`.

A door that runs each async call's work on worker threads (the LangGraph store's ``aput`` and
``aget`` on the memory's threads, the MCP server's tools on the SDK's) lets a call made later
run first. LangGraph's ``InMemoryStore`` runs an async call's work in the task's first step,
so of ``create_task(store.aput(ns, k, v))`` then ``create_task(store.aget(ns, k))`` the get
reads ``v``; an MCP client that sends ``remember`` calls without waiting for each reply
expects them stored in the order sent. `CallOrder` keeps every call's place on its loop, taken
when the call starts (before its first ``await``): a write waits for every call before it; a
read waits for the writes before it only, so reads called side by side still run side by
side. A call cancelled while it waits has no effect; the calls after it still wait for those
before it. (Until 2026-12-01 the LangGraph store's get could read the store from before a put
called first, and the MCP server stored pipelined ``remember`` calls in thread order.)

A sync call (``store.put`` on the loop's own thread, or another thread) waits for the async
writes already on a worker thread (`InFlight`): of an ``aput`` that started and a ``put``
made after it, the ``put`` wins, as in LangGraph's stores. An async write still waiting for
its turn on the loop cannot be waited for by a sync call on that loop (the loop is the one
that would start it): it comes after the sync call.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["WAIT_AT_MOST", "CallOrder", "InFlight", "SessionOrders"]

T = TypeVar("T")

WAIT_AT_MOST = 60.0
"""Seconds a sync call waits for one async write running on a worker thread, at most."""


class _Turns:
    """One loop's calls: the newest write's end, and the ends of the reads called since."""

    def __init__(self) -> None:
        self.write: asyncio.Future[None] | None = None
        self.reads: set[asyncio.Future[None]] = set()


class CallOrder:
    """Async calls of one store in call order, per event loop (see the module docstring)."""

    def __init__(self) -> None:
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Turns] = (
            weakref.WeakKeyDictionary()
        )

    async def run(self, call: Callable[[], Awaitable[T]], *, writes: bool) -> T:
        """``await call()`` once every call before it that it must follow has ended."""
        loop = asyncio.get_running_loop()
        turns = self._loops.get(loop)
        if turns is None:
            turns = self._loops[loop] = _Turns()
        end: asyncio.Future[None] = loop.create_future()
        before = [turns.write] if turns.write is not None else []
        if writes:
            before += turns.reads
            turns.write, turns.reads = end, set()
        else:
            turns.reads.add(end)
        waiting = [f for f in before if not f.done()]
        try:
            if waiting:
                await asyncio.wait(waiting)
        except BaseException:  # cancelled while waiting: not run; the next still follows these
            _end_after(end, waiting, turns)
            raise
        try:
            return await call()
        finally:
            end.set_result(None)
            turns.reads.discard(end)


def _end_after(
    end: asyncio.Future[None], before: list[asyncio.Future[None]], turns: _Turns
) -> None:
    """End ``end`` once every call in ``before`` has ended (it stands in for them).

    A call cancelled while waiting for its turn runs nothing, but the call after it waits for
    its ``end`` only: ended at once, that call would run beside a write still running before
    it (until 2026-12-01: of a slow ``abatch``, a cancelled ``aput`` and an ``aput`` after it,
    the slow batch's value won; a get after it read the store from before the batch).
    """
    left = [f for f in before if not f.done()]

    def one_ended(_: asyncio.Future[None]) -> None:
        if not end.done() and all(f.done() for f in left):
            end.set_result(None)
            turns.reads.discard(end)

    if not left:
        one_ended(end)
    for future in left:
        future.add_done_callback(one_ended)


class SessionOrders:
    """A `CallOrder` per session: ``ContextMemory``'s async calls on one session in call order.

    Calls on different sessions keep running side by side. An order lives while a call of its
    session holds it (weakly kept here): once none runs or waits, there is nothing to order a
    new call after, and the next call of the session starts a new one.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._orders: weakref.WeakValueDictionary[str, CallOrder] = weakref.WeakValueDictionary()

    def of(self, session_id: str) -> CallOrder:
        """The order of ``session_id``'s calls (the caller holds it while its call runs)."""
        with self._lock:
            order = self._orders.get(session_id)
            if order is None:
                order = self._orders[session_id] = CallOrder()
            return order


class InFlight:
    """The async writes running on worker threads, for a sync call to wait for."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: set[threading.Event] = set()

    def started(self) -> threading.Event:
        """A write about to be handed to a worker thread: set its event once it ended."""
        ended = threading.Event()
        with self._lock:
            self._running.add(ended)
        return ended

    def ended(self, event: threading.Event) -> None:
        """The write of ``event`` ended (stored or refused)."""
        with self._lock:
            self._running.discard(event)
        event.set()

    def wait(self) -> None:
        """Wait until the writes running now have ended (not those started after this).

        Each for `WAIT_AT_MOST` seconds at most: a write handed over as its memory closes may
        never run, and a sync call on the loop's thread must not wait for the loop.
        """
        with self._lock:
            running = list(self._running)
        for event in running:
            event.wait(WAIT_AT_MOST)
