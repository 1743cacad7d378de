"""The baselines ContextMemory is measured against, packed and rendered by the same assembler.

Both get exactly what ContextMemory gets: the same budget, the same counter and format, the
query rendered last. Only the choice of turns differs.

- `recency_window`: the newest turns that fit, in order (what LangChain's
  ``trim_messages(strategy="last")`` keeps): the conversation offered as history alone.
- `top_k`: the turns most similar to the question that fit, best first: the longest prefix of
  the similarity ranking whose rendering fits the budget.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ctxbudget.core.assemble import ContextAssembler
from ctxbudget.core.items import ContextItem, Tier
from ctxbudget.core.render import Format
from ctxbudget.core.report import AssembledContext

__all__ = ["query_item", "recency_window", "top_k"]


def query_item(question: str) -> ContextItem:
    """The question as the query item every method renders last."""
    return ContextItem("query", question, tier=Tier.QUERY, role="user", source="query")


def recency_window(
    turns: Sequence[ContextItem],
    question: str,
    *,
    budget: int,
    assembler: ContextAssembler,
    format: Format,  # noqa: A002 - the name used across ctxbudget
) -> AssembledContext:
    """The newest turns that fit (``turns`` in conversation order), as history.

    The assembler's history packing keeps the newest whole exchanges that fit, and the part of
    the next one that fits, so the window is contiguous and as long as the budget allows.

    >>> turns = [ContextItem("m1", "We went to Porto.", role="user")]
    >>> trimmer = ContextAssembler(min_exchanges=0)
    >>> ctx = recency_window(turns, "Where?", budget=256, assembler=trimmer, format="text")
    >>> ctx.included_ids
    ['m1', 'query']
    """
    history = [dataclasses.replace(t, tier=Tier.RECENT) for t in turns]
    return assembler.assemble([*history, query_item(question)], budget=budget, format=format)


def top_k(
    ranked: Sequence[ContextItem],
    question: str,
    *,
    budget: int,
    assembler: ContextAssembler,
    format: Format,  # noqa: A002
) -> AssembledContext:
    """The longest prefix of ``ranked`` (most similar first) that fits whole, as retrieved turns.

    The prefix length is estimated from the items' rendered costs, then settled with real
    assemblies: the result holds every item of the prefix and adding the next would not fit.
    """
    items = [dataclasses.replace(t, tier=Tier.RETRIEVED) for t in ranked]
    query = query_item(question)

    def attempt(n: int) -> AssembledContext | None:
        ctx = assembler.assemble([*items[:n], query], budget=budget, format=format)
        return ctx if len(ctx.included) == n + 1 else None

    alone = assembler.assemble([query], budget=budget, format=format)
    n = _estimate(items, budget - alone.tokens_used, assembler, format)
    best = attempt(n)
    if best is None:
        while n > 0:
            n -= 1
            best = attempt(n)
            if best is not None:
                return best
        return alone
    while n < len(items):
        bigger = attempt(n + 1)
        if bigger is None:
            break
        best, n = bigger, n + 1
    return best


def _estimate(
    items: Sequence[ContextItem], room: int, assembler: ContextAssembler, fmt: Format
) -> int:
    """How many of ``items`` fit in ``room`` tokens (each item's cost, each date line once)."""
    layout = assembler.layout(fmt)
    used = layout.open_cost("knowledge")
    if fmt == "messages":
        used += layout.group_open_cost("context")
    dates: set[str] = set()
    for count, item in enumerate(items):
        cost = layout.cost(item, "knowledge")
        date = layout.date_of(item, "knowledge")
        if date and date not in dates:
            cost += layout.counter.count(layout.date_line(date))
        if used + cost > room:
            return count
        used += cost
        if date:
            dates.add(date)
    return len(items)
