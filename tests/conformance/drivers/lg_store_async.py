"""The LangGraph door, async: `CtxBudgetStore`'s ``aput``, ``asearch`` (`lg_store`'s calls).

Each put and search awaited on a loop of its own (``asyncio.run``), as an async LangGraph
graph awaits its store: the async operations run, not their sync twins.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from .base import Place, Received, Refusal, Turn
from .common import attempt, raised
from .lg_store import LIMIT, NS, StoreDriver, namespace

__all__ = ["AsyncStoreDriver", "make"]


class AsyncStoreDriver(StoreDriver):
    """`CtxBudgetStore` over the place's Chroma, awaited (``aput``, ``asearch``, ``aget``)."""

    name = "lg_store_async"

    def add(self, session: str, user: str, turns: Sequence[Turn]) -> None:
        """One awaited put per turn: key the turn's id, value its text and role."""
        user_keys = self._keys.setdefault(session, (user, []))[1]

        async def run() -> None:
            for turn in turns:
                value = {"text": turn.text, "role": turn.role}
                await self.store.aput(namespace(session, user), turn.id, value)

        asyncio.run(run())
        user_keys.extend(turn.id for turn in turns)

    def send(self, session: str, user: str, query: str, budget: int) -> Received:
        """One awaited search of the session's namespace for ``query``."""
        space = namespace(session, user)
        return self.received(
            lambda: asyncio.run(self.store.asearch(space, query=query, limit=LIMIT)), budget
        )

    def bad(self, argument: str, value: object) -> Refusal | None:
        """One awaited search with ``argument=value``."""
        options: dict[str, Any] = {"query": value} if argument == "query" else {argument: value}
        options.setdefault("query", "Where?")
        return attempt(lambda: asyncio.run(self.store.asearch(NS, **options)))

    def after_close(self) -> BaseException | None:
        """One awaited get after `close`."""
        return raised(lambda: asyncio.run(self.store.aget(NS, "fact")))


def make(place: Place) -> AsyncStoreDriver:
    """The driver."""
    return AsyncStoreDriver(place)
