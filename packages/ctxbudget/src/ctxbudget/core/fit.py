"""The exact count of the rendered output, and what goes when a counter makes it too big.

With an additive counter (tiktoken) the fragments' counts add up to the whole, so the parts'
tokens are the exact count; otherwise (or with ``verify``) the whole output is counted as it
will be sent. Only counters whose counts do not add up (Hugging Face, approximate) can find the
packed output over the budget: `shrink_to_fit` then drops the least valuable items until it fits.
"""

from __future__ import annotations

from collections.abc import Sequence

from ctxbudget.core.accounting import PackState
from ctxbudget.core.items import ContextItem
from ctxbudget.core.markup import SECTIONS
from ctxbudget.core.render import Layout, Part
from ctxbudget.core.report import PrunedItem, PruneReason
from ctxbudget.errors import BudgetExceededError

__all__ = ["exact_tokens", "shrink_to_fit"]


def exact_tokens(layout: Layout, state: PackState, parts: Sequence[Part], *, verify: bool) -> int:
    """The tokens of ``parts`` as they will be sent (``verify``: count the whole output)."""
    counter = layout.counter
    system = [it for it in state.included if state.section[it.id] == "system"]
    # A system text after another may start with "/", which tiktoken can join to the end
    # of the one before it: the one fragment shape packing cannot control. In a joined layout
    # even the first follows text (the caller's system message).
    after = system if layout.joined else system[1:]
    joined = any(it.text.strip().startswith("/") for it in after)
    if counter.additive and not verify and not joined:
        # Exact by construction: fragments count additively, and the messages form of the
        # text formats holds every fragment plus the message overhead (never less).
        return layout.parts_tokens(parts)
    return _count_all(layout, parts)


def shrink_to_fit(
    layout: Layout,
    state: PackState,
    placed: dict[str, list[ContextItem]],
) -> tuple[list[ContextItem], list[Part], int]:
    """Drop the least valuable items from ``placed`` until the exact count fits the budget.

    Returns:
        The included items in render order, the rendered parts, and their exact count.

    Raises:
        BudgetExceededError: the never-pruned items alone are over the budget.
    """
    budget = state.budget
    while True:
        victim = _least_valuable(placed)
        if victim is None:
            msg = (
                "the never-pruned items do not fit when counted exactly: "
                f"{budget.available:,} tokens available; raise the budget"
            )
            raise BudgetExceededError(
                msg, required=budget.available + 1, available=budget.available
            )
        section, items = victim
        for item in items:
            placed[section].remove(item)
            state.pruned.append(
                PrunedItem(item, PruneReason.OVER_BUDGET, "exact count of the rendered output")
            )
            state.included_ids.discard(item.id)
        parts = layout.render_sections(placed)
        tokens = _count_all(layout, parts)
        if tokens <= budget.available:
            included = [it for s in SECTIONS for it in placed.get(s, ())]
            kept_ids = {it.id for it in included}
            state.included = [it for it in state.included if it.id in kept_ids]
            return included, parts, tokens


def _count_all(layout: Layout, parts: Sequence[Part]) -> int:
    messages = layout.counter.count_messages(layout.to_messages(parts))
    if layout.format == "messages":
        return messages
    return max(messages, layout.counter.count(layout.to_text(parts)))


def _least_valuable(
    placed: dict[str, list[ContextItem]],
) -> tuple[str, list[ContextItem]] | None:
    candidates = [
        (section, index, item)
        for section, items in placed.items()
        if section != "history"
        for index, item in enumerate(items)
        if not item.never_pruned
    ]
    if candidates:
        section, _, item = max(candidates, key=lambda c: (int(c[2].tier), -c[2].score, c[1]))
        return section, [item]
    history = [it for it in placed.get("history", []) if not it.never_pruned]
    if not history:
        return None
    # The oldest exchange goes first: up to (not including) the next user message.
    drop = [history[0]]
    for item in history[1:]:
        if (item.role or "user") == "user":
            break
        drop.append(item)
    return "history", drop
