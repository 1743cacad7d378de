"""`Candidates`: what `ContextMemory` offers for one query, scored, before anything is packed.

`ContextMemory.candidates` gathers them; `ContextMemory.assemble` is candidates + the core
assembler; the LangChain middleware, both retrievers and LlamaIndex's `CtxBudgetMemory` use the
same gathering (`ContextMemory.candidates` and `ContextMemory.search`), so every adapter ranks
records the way `ContextMemory` does. The gathering is bounded by the budget: the search pool is
a few times what the budget can hold, never the whole session.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ctxbudget.core.items import ContextItem
from ctxbudget.core.render import Layout
from ctxbudget.memory.record_items import (
    history_item,
)
from ctxbudget.store.records import Hit, Record
from ctxbudget.tokens.counter import TokenCounter

__all__ = ["Candidates", "ScoredHit", "SearchScope", "fit_history"]


@dataclass(frozen=True, slots=True)
class Candidates:
    """The scored candidates for one query in one session.

    Attributes:
        pinned: pinned facts (session and user-wide) and the task stack.
        history: the session's newest stored turns (tier RECENT), oldest first, as many as
            their share of the budget holds.
        summaries: the session's stored summaries.
        retrieved: older turns of the session, the user's other sessions and documents that
            match the query, best first (tier RETRIEVED; `ContextItem.score` is relevance x
            recency x salience, see `ctxbudget.memory.scoring`).
        user_id: the user the search used (given, or the one stored with the session).
    """

    pinned: tuple[ContextItem, ...]
    history: tuple[ContextItem, ...]
    summaries: tuple[ContextItem, ...]
    retrieved: tuple[ContextItem, ...]
    user_id: str | None

    @property
    def items(self) -> list[ContextItem]:
        """Every candidate, in the order `ContextMemory.assemble` offers them."""
        return [*self.pinned, *self.history, *self.summaries, *self.retrieved]


@dataclass(frozen=True, slots=True)
class ScoredHit:
    """A store hit with the score `ContextMemory` gives it (see `ContextMemory.search`)."""

    hit: Hit
    score: float


@dataclass(slots=True)
class SearchScope:
    """What one `ContextMemory.assemble` call searches for."""

    session_id: str
    user: str | None
    query: str
    counter: TokenCounter
    available: int
    documents: bool | str | Sequence[str]
    other_sessions: bool


def fit_history(
    recent: list[Record], tokens: float, layout: Layout, min_exchanges: int
) -> list[Record]:
    """The newest messages whose rendered history fits ``tokens``, and the newest exchanges."""
    if not recent:
        return []
    used = float(layout.open_cost("history"))
    newer_date: str | None = None
    start = len(recent)
    for position in range(len(recent) - 1, -1, -1):
        item = history_item(recent[position])
        cost = layout.cost(item, "history")
        date = layout.date_of(item, "history")
        if date and date != newer_date:
            cost += layout.counter.count(layout.date_line(date))
        if used + cost > tokens:
            break
        used += cost
        newer_date = date or newer_date
        start = position
    if min_exchanges:
        heads = 0
        for position in range(len(recent) - 1, -1, -1):
            if position < start:
                start = position
            if recent[position].role == "user":
                heads += 1
                if heads >= min_exchanges:
                    break
    return recent[start:]
