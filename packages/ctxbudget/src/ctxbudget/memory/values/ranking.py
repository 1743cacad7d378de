"""How a values search with a query ranks: by meaning and words, in [0, 1].

A value's score is its similarity to the query (cosine, below 0 counted as 0) fused with its
word match: ``0.7 * meaning + 0.3 * words``. The word match is BM25 (`ctxbudget.memory.reading.
lexical`) over the texts of the `POOL` embedded values nearest the query under the prefix
(before the filter), the best of them scoring 1; a value outside those has no word match.
Neither depends on ``limit`` or ``offset``: a value scores the same in every page, and pages
of one search (``offset`` 0, 10, 20...) are slices of one ranking. Ties go to the more
similar, then the newest.

Reading: the nearest ``max(POOL, offset + limit)`` embedded values under the prefix come from
Chroma (grown 4x while the filter leaves fewer than ``offset + limit`` and the prefix holds
more); every value not read is less similar than every value read, so it scores less and the
page read is exact. The cost is bounded by the page asked for (and the filter), not by the
prefix's size. Values put with ``index=False`` follow with score None, newest first (as
LangGraph's in-memory store lists unembedded items after the ranked ones).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ctxbudget.memory.reading.lexical import LexicalIndex, lexical_terms
from ctxbudget.memory.values.matching import passes
from ctxbudget.memory.values.model import index_text
from ctxbudget.store.values import ValueRow, ValueStore

__all__ = [
    "POOL",
    "Ranked",
    "best_first",
    "fuse",
    "newest_first",
    "ranked",
    "row_text",
    "shown_text",
]

POOL = 50
"""How many nearest values a query's word match is computed over (and the least it reads)."""

_MEANING = 0.7  # the share of a query score that is similarity (the rest: words)
_MOST = 2**30  # the most rows asked of Chroma at once: its n_results is a 32-bit int

Ranked = list[tuple[ValueRow, float | None, float]]
"""Rows with their score (None: not embedded) and similarity (what breaks a tie of scores)."""


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


def best_first(found: Ranked) -> Ranked:
    """Ranked rows of several partitions merged: by score, then those without (newest first)."""
    return sorted(found, key=_order)


def _order(p: tuple[ValueRow, float | None, float]) -> tuple[bool, float, float, int, Any, str]:
    row, score, similarity = p
    none = score is None
    return (
        none,
        -(score or 0.0),
        0.0 if none else -similarity,
        -row.updated,
        row.namespace,
        row.key,
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
) -> Ranked:
    """The values under ``space`` passing ``wanted``, best for ``vector`` first (see above).

    At least the best ``needed`` of them (all of them when fewer pass), whatever ``needed``
    is: the same rows in the same order with the same scores. ``unembedded`` reads the values
    that were not embedded and pass the filter (only called when the ranked ones are fewer
    than ``needed``).
    """
    # No partition holds _MOST values: a larger page (a huge offset) reads them all.
    pool = min(max(POOL, needed), _MOST)
    while True:
        hits, more = values.nearest(namespace, user_id, space, vector, pool, now)
        kept = [(r, s) for r, s in hits if passes(json.loads(r.document), wanted)]
        if len(kept) >= needed or not more or pool >= _MOST:
            break
        pool = min(pool * 4, _MOST)
    words = _words(hits[:POOL], query)
    out = fuse(kept, words)
    if len(out) < needed:  # values that were not embedded follow, newest first
        out += [(r, None, 0.0) for r in newest_first(unembedded())]
    return out


def _words(pool: list[tuple[ValueRow, float]], query: str) -> dict[int, float]:
    """The word match in [0, 1] of the rows of ``pool`` (by ``id``), the best scoring 1."""
    index = LexicalIndex()
    for row, _ in pool:
        index.add(row_text(row))
    scores = index.scores(lexical_terms(query))
    top = max(scores.values(), default=0.0)
    if top <= 0:
        return {}
    return {id(pool[n][0]): score / top for n, score in scores.items()}


def fuse(hits: list[tuple[ValueRow, float]], words: dict[int, float]) -> Ranked:
    """Hits scored by similarity fused with their word match (`_words`), best first."""
    scored: Ranked = []
    for row, similarity in hits:
        lexical = words.get(id(row), 0.0)
        score = _MEANING * max(0.0, similarity) + (1 - _MEANING) * lexical
        scored.append((row, min(1.0, max(0.0, score)), similarity))
    return sorted(scored, key=_order)
