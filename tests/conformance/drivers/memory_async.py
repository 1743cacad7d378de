"""The door `ContextMemory`, async: the ``a``-methods, awaited on one event loop.

The same calls as `memory_sync` (``aassemble``, ``aadd_messages``, ``apin``...), each awaited
on the driver's own loop (`asyncio.Runner`), as an async program awaits them. ``cancel_delete``
cancels an ``adelete_session`` right after it started.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from .base import Place, Received, Refusal, Turn
from .common import (
    SPANS,
    Registry,
    assembly_tokens,
    attempt,
    cancelled,
    gathered,
    overtaken_on_loop,
    raised_each,
)
from .memory_sync import MemorySync, bad_call, closed_calls, received_of

__all__ = ["MemoryAsync", "make"]

SYNC_ONLY = frozenset({"add_documents", "stats"})
"""Calls of `CLOSED_CALLS` with no async twin (``aadd_documents``, ``astats``)."""


class MemoryAsync:
    """`ContextMemory`'s async methods."""

    name = "memory_async"
    can = frozenset(
        {
            "add",
            "send",
            "report",
            "span",
            "removal",
            "bad",
            "close",
            "pin",
            "kinds",
            "close_each",
            "cancel",
            "edit",
            "gather",
        }
    )
    takes = MemorySync.takes

    def __init__(self, place: Place) -> None:
        self.memory = place.open_memory(write_behind=True)
        self.registry = Registry()
        self._loop = asyncio.Runner()
        self._closed = False

    def _run(self, call: Coroutine[Any, Any, Any]) -> Any:
        return self._loop.run(call)

    def add(self, session: str, user: str, turns: Sequence[Turn]) -> None:
        messages = [{"role": t.role, "text": t.text, "id": t.id} for t in turns]
        self._run(self.memory.aadd_messages(session, messages, user_id=user))
        for turn in turns:
            self.registry.note(turn.id, turn.text)

    def add_gathered(self, session: str, user: str, turns: Sequence[Turn]) -> None:
        """One ``aadd_message`` per turn, made at once on the driver's loop."""
        gathered(
            [
                lambda t=t: self.memory.aadd_message(session, t.role, t.text, id=t.id, user_id=user)
                for t in turns
            ],
            run=self._run,
        )
        for turn in turns:
            self.registry.note(turn.id, turn.text)

    def pin(self, text: str, id: str, session: str | None = None, user: str | None = None) -> None:
        self._run(self.memory.apin(session, text, user_id=user, id=id))
        self.registry.note(id, text)

    def edit(self, session: str, user: str, id: str, text: str) -> None:  # noqa: A002
        self._run(self.memory.areplace_message(session, id, text, user_id=user))
        self.registry.note(id, text)

    def send(self, session: str, user: str, query: str, budget: int) -> Received:
        SPANS.clear()
        ctx = self._run(self.memory.aassemble(session, query, budget=budget, user_id=user))
        return received_of(ctx, self.registry.texts, assembly_tokens())

    def bad(self, argument: str, value: object) -> Refusal | None:
        method, args, kwargs = bad_call(argument, value)

        async def call() -> None:
            await getattr(self.memory, f"a{method}")(*args, **kwargs)

        return attempt(lambda: self._run(call()))

    def cancel_delete(self, session: str) -> None:
        cancelled(lambda: self.memory.adelete_session(session), run=self._run)

    def overtaken(
        self, session: str, user: str, query: str, budget: int, delay: float
    ) -> BaseException | None:
        """An ``aassemble`` with ``aclose`` awaited by another task ``delay`` s after it began."""
        self._closed = True
        try:
            return overtaken_on_loop(
                lambda: self.memory.aassemble(session, query, budget=budget, user_id=user),
                self.memory.aclose,
                delay,
                run=self._loop.run,
            )
        finally:
            self._loop.close()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            try:
                self._run(self.memory.aclose())
            finally:
                self._loop.close()

    def after_close(self) -> BaseException | None:
        return self.after_close_each()["aassemble"]

    def after_close_each(self) -> dict[str, BaseException | None]:
        def ran(start: Callable[[], Coroutine[Any, Any, object]]) -> Callable[[], object]:
            return lambda: asyncio.run(start())

        calls = closed_calls(self.memory, "a", without=SYNC_ONLY)
        return raised_each({name: ran(start) for name, start in calls.items()})


def make(place: Place) -> MemoryAsync:
    """The driver of `ContextMemory`'s async methods on ``place``."""
    return MemoryAsync(place)
