"""The system messages put into a `CtxBudgetMemory`: sent first, exactly as they were put.

Each stored system message (`llama_index.ctxbudget.storing`) is sent as a system message of its
own, its text exactly as put (never escaped, trimmed or given a line break), first, in the order
put and never cut: an item of role ``system`` at the start of the history, counted as it is
sent. What ctxbudget adds (pinned facts, memory blocks, relevant context, summaries) goes
inside the first of them, after its text and a blank line (`SEPARATOR`; the core's joined
layout, `ctxbudget.core.split`). When nothing is added, that message is sent as it was put and
counted so (`SystemMessages.plain`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ctxbudget import AssembledContext, ContextItem, Shrink, Tier, TokenCounter
from ctxbudget.core.ids import internal_id
from ctxbudget.core.render import Layout
from ctxbudget.memory.context import ContextMemory
from llama_index.ctxbudget.storing import system_records

__all__ = ["SEPARATOR", "SystemMessages", "adds_to_system", "system_messages"]

SEPARATOR = "\n\n"
"""What separates the first system message's text from what ctxbudget adds after it."""

_OWN = frozenset({"history", "query"})  # sections that are messages of their own


@dataclass(frozen=True, slots=True)
class SystemMessages:
    """The session's system messages as items, first and never cut.

    Attributes:
        items: one item per stored system message, in order; the first counted with
            `SEPARATOR` after its text (what ctxbudget adds follows it).
        plain: the same items, the first without `SEPARATOR` (sent when nothing is added).
        separator_tokens: what `SEPARATOR` adds to the first one's count.
        ids: the pinned records the messages are stored as (not offered a second time).
    """

    items: tuple[ContextItem, ...] = ()
    plain: tuple[ContextItem, ...] = ()
    separator_tokens: int = 0
    ids: frozenset[str] = frozenset()


def _item(position: int, text: str) -> ContextItem:
    # Never cut, a message of its own (history), before the first user turn: sent first. In
    # ctxbudget's own id space, as the system prompt of every door: the report lists its
    # items in section order, and what is added to this message is rendered inside it.
    return ContextItem(
        internal_id("system", position),
        text,
        tier=Tier.RECENT,
        role="system",
        source="system",
        shrink=Shrink.NEVER,
    )


def system_messages(
    memory: ContextMemory, session_id: str, counter: TokenCounter
) -> SystemMessages:
    """The stored system messages of ``session_id`` (`SystemMessages`; empty: none)."""
    records = system_records(memory, session_id)
    if not records:
        return SystemMessages()
    first, *others = records
    rest = tuple(_item(n, r.text) for n, r in enumerate(others, start=1))
    separated = _item(0, first.text + SEPARATOR)
    extra = counter.count(first.text + SEPARATOR) - counter.count(first.text)
    ids = frozenset(r.id for r in records)
    return SystemMessages((separated, *rest), (_item(0, first.text), *rest), extra, ids)


def adds_to_system(context: AssembledContext | Sequence[ContextItem]) -> bool:
    """Whether ctxbudget adds text to the first system message.

    It does when an item that is not a message of its own (history, query) is included
    (``context``) or offered (a list of items).
    """
    items = context.included if isinstance(context, AssembledContext) else context
    return any(Layout.section_of(item) not in _OWN for item in items)
