"""The door `ContextMemory`, sync: its own methods, called as a Python program calls them.

The memory is opened with the product's defaults (write-behind on). What the caller receives
is the context's chat messages (``to_messages()``); the report is the `AssembledContext`.
This door is also the suite's reference for bad values (`bad_call`): every other door must
refuse a value as the core does here.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Sequence
from functools import partial
from typing import Any

from .base import Place, Received, Refusal, Turn
from .common import (
    SPANS,
    Registry,
    assembly_tokens,
    attempt,
    chosen_refs,
    count_sent,
    identify,
    raised_each,
    texts_of,
)

__all__ = [
    "BAD_SESSION",
    "CLOSED_CALLS",
    "MemorySync",
    "bad_call",
    "closed_calls",
    "make",
    "received_of",
]

BAD_SESSION = "bad-values"
_IDS = itertools.count()


def bad_call(argument: str, value: object) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
    """The `ContextMemory` call (method, args, kwargs) that takes ``argument=value``.

    ``budget`` and ``query`` go to ``assemble``, ``k`` to ``search``, ``text``,
    ``timestamp``, ``session_id`` and ``user_id`` to ``add_message``; any other name is an
    unknown argument of ``assemble``.
    """
    new_id = f"bad-{next(_IDS)}"  # an accepted value must not collide with the next case
    if argument == "budget":
        return "assemble", (BAD_SESSION, "hello"), {"budget": value}
    if argument == "query":
        return "assemble", (BAD_SESSION, value), {"budget": 500}
    if argument == "k":
        return "search", ("hello",), {"k": value, "session_id": BAD_SESSION}
    if argument == "text":
        return "add_message", (BAD_SESSION, "user", value), {"id": new_id}
    if argument == "timestamp":
        return "add_message", (BAD_SESSION, "user", "hello"), {"id": new_id, "timestamp": value}
    if argument == "session_id":
        return "add_message", (value, "user", "hello"), {"id": new_id}
    if argument == "user_id":
        return "add_message", (BAD_SESSION, "user", "hello"), {"id": new_id, "user_id": value}
    return "assemble", (BAD_SESSION, "hello"), {"budget": 500, argument: value}


def received_of(ctx: Any, known: dict[str, str], span: int | None) -> Received:
    """What a caller of `ContextMemory.assemble` receives, and what the report says."""
    messages = ctx.to_messages()
    texts = texts_of(messages)
    return Received(
        got=identify(texts, known),
        chosen=chosen_refs(ctx),
        available=ctx.tokens_available,
        sent_tokens=count_sent(messages),
        report_tokens=ctx.tokens_used,
        span_tokens=span,
        report=ctx,
        texts=texts,
        messages=list(messages),
    )


CLOSED_CALLS: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {
    "assemble": (("s", "hello"), {"budget": 500}),
    "candidates": (("s", "hello"), {"budget": 500}),
    "search": (("hello",), {"session_id": "s"}),
    "history": (("s",), {}),
    "add_message": (("s", "user", "hello"), {}),
    "add_messages": (("s", [("user", "hello")]), {}),
    "pin": (("s", "a fact"), {}),
    "unpin": (("x",), {"session_id": "s"}),
    "add_documents": (([("d", "some text")],), {}),
    "clear": (("s",), {}),
    "delete_session": (("s",), {}),
    "delete_user": (("u",), {}),
    "flush": ((), {}),
    "stats": ((), {}),
}
"""Every public call of a memory (sync name), with harmless arguments (for after close)."""


def closed_calls(
    memory: Any, prefix: str = "", without: Collection[str] = ()
) -> dict[str, Callable[[], Any]]:
    """`CLOSED_CALLS` (less ``without``) of ``memory``, by name (``prefix``: ``"a"``: async)."""
    return {
        prefix + name: partial(getattr(memory, prefix + name), *args, **kwargs)
        for name, (args, kwargs) in CLOSED_CALLS.items()
        if name not in without
    }


class MemorySync:
    """`ContextMemory`'s sync methods."""

    name = "memory_sync"
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
            "edit",
        }
    )
    takes = frozenset({"budget", "k", "query", "text", "timestamp", "session_id", "user_id"})

    def __init__(self, place: Place) -> None:
        self.memory = place.open_memory(write_behind=True)
        self.registry = Registry()
        self._closed = False

    def add(self, session: str, user: str, turns: Sequence[Turn]) -> None:
        messages = [{"role": t.role, "text": t.text, "id": t.id} for t in turns]
        self.memory.add_messages(session, messages, user_id=user)
        for turn in turns:
            self.registry.note(turn.id, turn.text)

    def pin(self, text: str, id: str, session: str | None = None, user: str | None = None) -> None:
        self.memory.pin(session, text, user_id=user, id=id)
        self.registry.note(id, text)

    def edit(self, session: str, user: str, id: str, text: str) -> None:  # noqa: A002
        self.memory.replace_message(session, id, text, user_id=user)
        self.registry.note(id, text)

    def send(self, session: str, user: str, query: str, budget: int) -> Received:
        SPANS.clear()
        ctx = self.memory.assemble(session, query, budget=budget, user_id=user)
        return received_of(ctx, self.registry.texts, assembly_tokens())

    def bad(self, argument: str, value: object) -> Refusal | None:
        method, args, kwargs = bad_call(argument, value)
        return attempt(lambda: getattr(self.memory, method)(*args, **kwargs))

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.memory.close()

    def after_close(self) -> BaseException | None:
        return self.after_close_each()["assemble"]

    def after_close_each(self) -> dict[str, BaseException | None]:
        return raised_each(closed_calls(self.memory))


def make(place: Place) -> MemorySync:
    """The driver of `ContextMemory` (sync) on ``place``."""
    return MemorySync(place)
