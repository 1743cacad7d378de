"""Scores of store hits, as `ContextMemory` scores its candidates (internal)."""

from __future__ import annotations

from collections.abc import Sequence

from ctxbudget.scoring import Scoring, content_words
from ctxbudget.store import Hit

__all__ = ["score_hits"]


def score_hits(hits: Sequence[Hit], query: str, scoring: Scoring, *, now: float) -> list[float]:
    """Relevance x recency x salience of each hit (`ctxbudget.scoring`), age counted to ``now``."""
    words = content_words(query)
    out: list[float] = []
    for hit in hits:
        record = hit.record
        age = 0.0 if record.timestamp is None else max(0.0, now - record.timestamp)
        salience = record.metadata.get("salience", 1.0)
        out.append(
            scoring.score(
                similarity=hit.similarity,
                lexical=Scoring.lexical(words, record.text),
                age_seconds=age,
                salience=float(salience) if isinstance(salience, int | float) else 1.0,
            )
        )
    return out
