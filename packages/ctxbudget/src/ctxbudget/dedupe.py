"""Dropping duplicates before packing: same id, same normalized content, near-same meaning."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ctxbudget.errors import InvalidItemError
from ctxbudget.items import ContextItem, Tier

__all__ = ["Duplicate", "dedupe", "normalize"]

_SPACE = re.compile(r"\s+")
_NORMALIZED: dict[str, str] = {}


def normalize(text: str) -> str:
    r"""Text as compared for duplicates: case-folded, whitespace collapsed (cached).

    >>> normalize("  Hello\\n  World ") == normalize("hello world")
    True
    """
    key = _NORMALIZED.get(text)
    if key is None:
        key = _SPACE.sub(" ", text).strip().casefold()
        if len(_NORMALIZED) > 200_000:
            _NORMALIZED.clear()
        _NORMALIZED[text] = key
    return key


@dataclass(frozen=True, slots=True)
class Duplicate:
    """An item dropped as a duplicate of ``kept_id``; ``how`` is "id", "content" or "near"."""

    item: ContextItem
    kept_id: str
    how: str


def _rank(item: ContextItem, index: int) -> tuple[int, int, float, int]:
    # Never-pruned first, then higher tier, higher score, earlier input.
    return (0 if item.never_pruned else 1, int(item.tier), -item.score, index)


def dedupe(
    items: Sequence[ContextItem],
    *,
    near_threshold: float | None = 0.95,
    is_history: Callable[[ContextItem], bool] | None = None,
) -> tuple[list[ContextItem], list[Duplicate]]:
    """Keep the best copy of each duplicate group, in input order; report the rest.

    Same id: always duplicates (two *different* never-pruned items with one id are an error).
    Same normalized content or cosine similarity of embeddings at or
    above ``near_threshold``: duplicates unless both are history messages (people repeat
    themselves; each turn is its own) or one of them is never pruned. The copy kept is the
    never-pruned one, else the higher tier, else the higher score, else the earlier.
    """
    history = is_history or (lambda item: item.tier == Tier.RECENT and item.role is not None)
    ranked = sorted(range(len(items)), key=lambda i: _rank(items[i], i))
    keep = [False] * len(items)
    dropped: list[Duplicate] = []
    by_id: dict[str, str] = {}
    ranked_index: dict[str, int] = {}
    by_text: dict[str, str] = {}
    vectors: list[tuple[int, np.ndarray]] = []
    for index in ranked:
        item = items[index]
        if item.id in by_id:
            first = items[ranked_index[item.id]]
            if item.never_pruned and first.text != item.text:
                msg = (
                    f"two different never-pruned items share the id {item.id!r}; give each "
                    "system prompt, query or shrink='never' item its own id"
                )
                raise InvalidItemError(msg)
            dropped.append(Duplicate(item, by_id[item.id], "id"))
            continue
        if not history(item) and not item.never_pruned:
            key = normalize(item.text)
            if key in by_text:
                dropped.append(Duplicate(item, by_text[key], "content"))
                continue
            by_text[key] = item.id
        by_id[item.id] = item.id
        ranked_index[item.id] = index
        keep[index] = True
        if (
            near_threshold is not None
            and item.embedding is not None
            and not history(item)
            and not item.never_pruned
        ):
            vectors.append((index, np.asarray(item.embedding, dtype=np.float64)))
    if near_threshold is not None and len(vectors) > 1:
        dropped.extend(_near(items, vectors, keep, near_threshold, history))
    kept = [item for index, item in enumerate(items) if keep[index]]
    return kept, dropped


def _near(
    items: Sequence[ContextItem],
    vectors: list[tuple[int, np.ndarray]],
    keep: list[bool],
    threshold: float,
    history: Callable[[ContextItem], bool],
) -> list[Duplicate]:
    dims = {v.shape for _, v in vectors}
    if len(dims) != 1:
        return []  # embeddings from different models cannot be compared
    matrix = np.stack([v for _, v in vectors])
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    unit = matrix / norms
    similarity = unit @ unit.T
    dropped: list[Duplicate] = []
    alive: list[int] = []  # positions in `vectors`, best first (vectors are in rank order)
    for position, (index, _) in enumerate(vectors):
        twin = next((p for p in alive if similarity[position, p] >= threshold), None)
        if twin is None or items[index].never_pruned:
            alive.append(position)
            continue
        keep[index] = False
        dropped.append(Duplicate(items[index], items[vectors[twin][0]].id, "near"))
    return dropped
