"""Packing documents, nodes or search hits into a token budget.

The one way every retriever, compressor and node postprocessor fits documents: the core
assembler in the text format, within ``tokens`` counted the way the documents are sent, layout
included (the "Relevant context" block, each document's bullet and line end). What is returned
therefore fits ``tokens`` as one block of text, and so does each document's own text.

`included_positions` maps what the report includes back to what was offered, by position: an
adapter returns exactly the documents the report lists, even when two offered share an id.
"""

from __future__ import annotations

from collections.abc import Sequence

from ctxbudget.core.assemble import ContextAssembler
from ctxbudget.core.budget import Budget
from ctxbudget.core.items import ContextItem
from ctxbudget.core.report import AssembledContext, PrunedItem, PruneReason
from ctxbudget.errors import BudgetExceededError, InvalidItemError

__all__ = ["included_positions", "pack_documents"]


def pack_documents(
    items: Sequence[ContextItem],
    assembler: ContextAssembler,
    tokens: int,
    *,
    k: int | None = None,
) -> AssembledContext | None:
    """What `assembler` keeps of `items` within ``tokens``, layout included.

    Args:
        items: the documents as items (usually tier RETRIEVED, scored, ``shrink`` as wanted);
            none may be never-pruned.
        assembler: the assembler (its counter, near-duplicate threshold and summarizer).
        tokens: tokens the documents may use, rendered.
        k: at most this many kept (None: as many as fit): of the items that fit together,
            the ``k`` with the highest scores (ties: by id), packed again on their own; the
            others that fit are pruned as ``over_limit``. A retriever's ``k``.

    Returns:
        The assembly (``included``: the kept documents, truncated ones with their cut text;
        ``pruned``: the others with their reasons), or None when ``tokens`` is below what the
        layout alone costs (then nothing fits).

    Raises:
        InvalidItemError: ``k`` is not a non-negative int.
    """
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 0):
        msg = f"k must be a non-negative int (or None for as many as fit), got {k!r}"
        raise InvalidItemError(msg)
    offered = list(items)
    try:
        packed = assembler.assemble(offered, budget=Budget(window=tokens), format="text")
        if k is None or len(packed.included) <= k:
            return packed
        ranked = sorted(packed.included, key=lambda item: (-item.score, item.id))
        best = {item.id for item in ranked[:k]}
        left = {id(entry.item) for entry in packed.pruned}
        kept = assembler.assemble(
            [item for item in offered if item.id in best],
            budget=Budget(window=tokens),
            format="text",
        )
    except BudgetExceededError:
        return None
    detail = f"k={k}: {k} items that fit scored higher"
    more = [entry for entry in packed.pruned if entry.item.id not in best]
    more += [
        PrunedItem(item, PruneReason.OVER_LIMIT, detail)
        for item in offered
        if item.id not in best and id(item) not in left
    ]
    kept.extend_pruned(more)
    return kept


def included_positions(offered: Sequence[ContextItem], context: AssembledContext) -> list[int]:
    """The position in ``offered`` of each item ``context`` includes, in the report's order.

    An included item is the offered object itself, or (cut to fit) a copy with its id; of
    offered items that share an id, the one the report includes is the one not pruned (the core
    keeps one of them and reports the others as duplicates of it). So an adapter that returns
    ``[given[i] for i in included_positions(items, context)]`` returns what the report lists,
    never another object that happens to carry the same id.

    Raises:
        InvalidItemError: an included item was not offered (``context`` is another call's).

    >>> a, b = ContextItem("n", "Hi."), ContextItem("n", "Hi.", tier=20)
    >>> ctx = ContextAssembler(model="gpt-4o").assemble([a, b], budget=100, format="text")
    >>> included_positions([a, b], ctx)
    [1]
    """
    at = {id(item): index for index, item in enumerate(offered)}
    left = {id(entry.item) for entry in context.pruned}
    by_id = {item.id: index for index, item in enumerate(offered) if id(item) not in left}
    positions: list[int] = []
    for item in context.included:
        index = at.get(id(item), by_id.get(item.id))
        if index is None:
            msg = f"included item {item.id!r} was not offered; pass the items this context packed"
            raise InvalidItemError(msg)
        positions.append(index)
    return positions
