"""How a values search with a query ranks: by meaning and words, in [0, 1].

The nearest embedded values under the prefix come from Chroma in a pool of
``max(50, 4 * (offset + limit))``, grown while the filter leaves too few and the prefix holds
more; each is scored by its similarity (cosine, below 0 counted as 0) fused with BM25 over the
pool's texts (`ctxbudget.memory.reading.lexical`, the best scoring 1): ``0.7 * meaning + 0.3 *
words``; ties go to the newest. Values put with ``index=False`` follow with score None, newest
first (as LangGraph's in-memory store lists unembedded items after the ranked ones).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ctxbudget.memory.reading.lexical import LexicalIndex, lexical_terms
from ctxbudget.memory.values.matching import passes
from ctxbudget.memory.values.model import index_text
from ctxbudget.store.values import ValueRow, ValueStore

__all__ = ["POOL", "best_first", "fuse", "newest_first", "ranked", "row_text", "shown_text"]

POOL = 50
"""The least number of nearest values a query reads."""

_MEANING = 0.7  # the share of a query score that is similarity (the rest: words)

Scored = list[tuple[ValueRow, float | None]]


def row_text(row: ValueRow) -> str:
    """What a row was embedded from (its index paths' texts; "" for none)."""
    if row.index is None:
        return ""
    paths = json.loads(row.index)
    return index_text(json.loads(row.document), paths) or ""


def shown_text(row: ValueRow) -> str:
    """A value as context shows it: its indexed text when paths were given, else compact JSON."""
    if row.index is not None and json.loads(row.index) is not None:
        return row_text(row)
    value = json.loads(row.document)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def newest_first(rows: list[ValueRow]) -> list[ValueRow]:
    """Rows by ``updated`` newest first (then namespace and key: a stable order)."""
    return sorted(rows, key=lambda r: (-r.updated, r.namespace, r.key))


def best_first(scored: Scored) -> Scored:
    """Scored rows of several partitions merged: by score, then those without (newest first)."""
    return sorted(
        scored,
        key=lambda p: (p[1] is None, -(p[1] or 0.0), -p[0].updated, p[0].namespace, p[0].key),
    )


def ranked(
    values: ValueStore,
    namespace: str,
    user_id: str | None,
    space: tuple[str, ...],
    wanted: dict[str, Any] | None,
    query: str,
    vector: list[float],
    needed: int,
    now: int,
    unembedded: Callable[[], list[ValueRow]],
) -> Scored:
    """The values under ``space`` passing ``wanted``, best for ``vector`` first (see above).

    ``unembedded`` reads the values that were not embedded and pass the filter (only called
    when the ranked ones are fewer than ``needed``).
    """
    pool = max(POOL, 4 * needed)
    while True:
        hits, more = values.nearest(namespace, user_id, space, vector, pool, now)
        kept = [(r, s) for r, s in hits if passes(json.loads(r.document), wanted)]
        if len(kept) >= needed or not more:
            break
        pool *= 4
    out = fuse(kept, query)
    if len(out) < needed:  # values that were not embedded follow, newest first
        out += [(r, None) for r in newest_first(unembedded())]
    return out


def fuse(hits: list[tuple[ValueRow, float]], query: str) -> Scored:
    """Hits scored by similarity fused with BM25 over their texts, best first."""
    if not hits:
        return []
    index = LexicalIndex()
    for row, _ in hits:
        index.add(row_text(row))
    words = index.scores(lexical_terms(query))
    top = max(words.values(), default=0.0)
    scored: Scored = []
    for n, (row, similarity) in enumerate(hits):
        lexical = words.get(n, 0.0) / top if top > 0 else 0.0
        score = _MEANING * max(0.0, similarity) + (1 - _MEANING) * lexical
        scored.append((row, min(1.0, max(0.0, score))))
    scored.sort(key=lambda p: (-(p[1] or 0.0), -p[0].updated, p[0].namespace, p[0].key))
    return scored
