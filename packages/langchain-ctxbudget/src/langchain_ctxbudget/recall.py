"""What the memory adds to an agent's state: `ContextMemory.candidates` for the last question.

The agent's state is the history, so of the memory's candidates the middleware offers the ones
the state does not hold (extras) and, for the state's older turns that match the question,
copies as memories, offered only when the history loses those turns (copies). The candidates
of one question are gathered once: the calls that follow tool results in the same turn reuse
them (what the tools returned is in the state).
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING

from langchain_core.messages import BaseMessage, HumanMessage

from ctxbudget import AssembledContext, Budget, ContextItem, Tier
from ctxbudget.core.ids import internal_id

if TYPE_CHECKING:
    from ctxbudget.memory.context import ContextMemory

__all__ = ["QUESTIONS_REMEMBERED", "Recalled", "lost_copies", "recall"]

QUESTIONS_REMEMBERED = 1024
"""Questions whose candidates are remembered (the oldest gathered are forgotten first)."""


class Recalled:
    """The candidates gathered per question, for the last `QUESTIONS_REMEMBERED` questions."""

    def __init__(self) -> None:
        self._items: OrderedDict[tuple[str, str, str], list[ContextItem]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str, str]) -> list[ContextItem] | None:
        """The candidates gathered for ``key``, or None."""
        with self._lock:
            return self._items.get(key)

    def put(self, key: tuple[str, str, str], items: list[ContextItem]) -> None:
        """Remember the candidates of ``key``."""
        with self._lock:
            self._items[key] = items
            while len(self._items) > QUESTIONS_REMEMBERED:
                self._items.popitem(last=False)


def recall(
    memory: ContextMemory,
    recalled: Recalled,
    messages: Sequence[BaseMessage],
    keys: Sequence[str],
    ids: tuple[str, str | None],
    in_state: set[str],
    budget: Budget,
    documents: bool | str | Sequence[str],
) -> tuple[list[ContextItem], dict[str, ContextItem]]:
    """What the memory adds for the state's last user message: ``(extras, copies)``.

    Extras: pinned facts, tasks, summaries, documents, the user's other sessions and stored
    turns the state does not hold: `ContextMemory.candidates` for this call's budget (the
    same gathering and scoring as `ContextMemory.assemble`).
    Copies: older turns of the state that match the question, by the key of the turn (their
    own ids are ``ctxbudget:memory:<key>``).
    """
    position = next(
        (i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], HumanMessage)),
        None,
    )
    if position is None or not messages[position].text.strip():
        return [], {}
    session, user = ids
    query = messages[position].text
    cache_key = (memory.namespace, session, f"{position}:{keys[position]}")
    cached = recalled.get(cache_key)
    if cached is None:
        # The candidates ContextMemory would offer, bounded by this call's budget; the newest
        # stored turns are searched too (here the state is the history).
        found = memory.candidates(
            session,
            query,
            budget=budget,
            user_id=user,
            documents=documents,
            search_recent=True,
        )
        cached = found.items
        recalled.put(cache_key, cached)
    extras: list[ContextItem] = []
    copies: dict[str, ContextItem] = {}
    seen: set[str] = set()
    for item in cached:
        if item.tier in (Tier.SYSTEM, Tier.QUERY):
            continue  # the state has the prompt and the question
        if item.id in in_state:
            if item.tier != Tier.RECENT and item.id not in copies:
                copies[item.id] = dataclasses.replace(
                    item, id=internal_id("memory", item.id), tool_calls=(), tool_call_id=None
                )
            continue
        if item.tier == Tier.RECENT:
            # Stored turns the state does not hold (an earlier thread of the session).
            item = dataclasses.replace(
                item,
                id=internal_id("memory", item.id),
                tier=Tier.RETRIEVED,
                tool_calls=(),
                tool_call_id=None,
            )
        if item.id not in seen:  # a turn can be both recent history and a match
            seen.add(item.id)
            extras.append(item)
    return extras, copies


def lost_copies(ctx: AssembledContext, copies: dict[str, ContextItem]) -> list[ContextItem]:
    """The copies of the turns ``ctx`` cut from the history, to offer in a second pass.

    History can only shrink when more is offered, so no copy repeats a kept turn.
    """
    included = {it.id for it in ctx.included}
    return [c for key, c in copies.items() if key not in included]
