"""Packing documents, nodes or search hits into a token budget.

The one way every retriever, compressor and node postprocessor fits documents: the core
assembler in the text format, within ``tokens`` counted the way the documents are sent, layout
included (the "Relevant context" block, each document's bullet and line end). What is returned
therefore fits ``tokens`` as one block of text, and so does each document's own text.
"""

from __future__ import annotations

from collections.abc import Sequence

from ctxbudget.core.assemble import ContextAssembler
from ctxbudget.core.budget import Budget
from ctxbudget.core.items import ContextItem
from ctxbudget.core.report import AssembledContext
from ctxbudget.errors import BudgetExceededError

__all__ = ["pack_documents"]


def pack_documents(
    items: Sequence[ContextItem], assembler: ContextAssembler, tokens: int
) -> AssembledContext | None:
    """What `assembler` keeps of `items` within ``tokens``, layout included.

    Args:
        items: the documents as items (usually tier RETRIEVED, scored, ``shrink`` as wanted);
            none may be never-pruned.
        assembler: the assembler (its counter, near-duplicate threshold and summarizer).
        tokens: tokens the documents may use, rendered.

    Returns:
        The assembly (``included``: the kept documents, truncated ones with their cut text;
        ``pruned``: the others with their reasons), or None when ``tokens`` is below what the
        layout alone costs (then nothing fits).
    """
    try:
        return assembler.assemble(list(items), budget=Budget(window=tokens), format="text")
    except BudgetExceededError:
        return None
