"""Dropping duplicates before packing: same id, same normalized content, near-same meaning."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import compress
from operator import attrgetter

import numpy as np

from ctxbudget.core.items import NEVER_PRUNED_TIERS, ContextItem, Tier, tier_name
from ctxbudget.core.report import PrunedItem, PruneReason
from ctxbudget.errors import InvalidItemError

__all__ = ["Duplicate", "dedupe", "dedupe_ids", "normalize", "pruned_duplicates"]

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
    """``item``, dropped as a repeat of ``kept`` (``kept_id``); ``how``: "id", "content", "near"."""

    item: ContextItem
    kept_id: str
    how: str
    kept: ContextItem | None = None

    @property
    def detail(self) -> str:
        """What the report says: which other item this one repeats, and how.

        A copy with the same id names the kept copy's tier and score (the id alone does not
        tell two copies apart).

        >>> a = ContextItem("a", "Hi", tier=Tier.RETRIEVED)
        >>> Duplicate(ContextItem("b", "hi"), "a", "content", a).detail
        "same content as a [RETRIEVED]: 'Hi'"
        """
        kept = self.kept
        if kept is None:
            return f"same {self.how} as {self.kept_id}"
        what = {"id": "same id as", "content": "same content as", "near": "nearly the same as"}
        preview = kept.text.replace("\n", " ")[:40]
        text = "" if self.how == "content" and not preview else f": {preview!r}"
        tier = tier_name(kept.tier)
        if self.how == "id":
            # Both copies have one id: the kept one is told apart by its tier and score.
            tier = f"{tier}, score {kept.score:g}"
            if kept.text == self.item.text:
                text = ", same content"
        return f"{what.get(self.how, self.how)} {kept.label} [{tier}]{text}"


def _rank(item: ContextItem, index: int) -> tuple[int, int, float, int]:
    # Never-pruned first, then higher tier, higher score, earlier input.
    return (0 if item.never_pruned else 1, int(item.tier), -item.score, index)


_ID = attrgetter("id")
_TIER = attrgetter("tier")
_HISTORY = int(Tier.RECENT)


def dedupe(
    items: Sequence[ContextItem], *, near_threshold: float | None = 0.95
) -> tuple[list[ContextItem], list[Duplicate]]:
    """Keep the best copy of each duplicate group, in input order; report the rest.

    Same id: always duplicates (two *different* never-pruned items with one id are an error).
    Same normalized content: duplicates unless one of them is a history message (people repeat
    themselves; each turn is its own); the system prompt and the query are always kept, but a
    never-pruned fact or schema with the text of an item kept already is dropped too. Cosine
    similarity of embeddings at or above ``near_threshold``: duplicates unless one is a history
    message or never pruned. The copy kept is the never-pruned one, else the higher tier, else
    the higher score, else the earlier.

    Cost: one C-speed pass over all items; only non-history items are compared by content, so a
    long conversation costs next to nothing here.
    """
    n = len(items)
    keep = [True] * n
    dropped: list[Duplicate] = []
    if len(set(map(_ID, items))) != n:
        dedupe_ids(items, keep, dropped)
    tiers = list(map(_TIER, items))
    others = [i for i in range(n) if tiers[i] != _HISTORY and keep[i]]
    keys = [normalize(items[i].text) for i in others]
    if len(set(keys)) == len(keys) and (
        near_threshold is None or all(items[i].embedding is None for i in others)
    ):
        return list(compress(items, keep)), dropped  # nothing alike: no ranking needed
    others.sort(key=lambda i: _rank(items[i], i))
    by_text: dict[str, ContextItem] = {}
    vectors: list[tuple[int, np.ndarray]] = []
    for index in others:
        item = items[index]
        key = normalize(item.text)
        if item.never_pruned:
            if key in by_text and item.tier not in NEVER_PRUNED_TIERS:
                # A fact or schema said twice is sent once (the system prompt and the query
                # are always sent, whatever else says the same).
                keep[index] = False
                dropped.append(Duplicate(item, by_text[key].id, "content", by_text[key]))
            else:
                by_text.setdefault(key, item)
            continue
        if key in by_text:
            keep[index] = False
            dropped.append(Duplicate(item, by_text[key].id, "content", by_text[key]))
            continue
        by_text[key] = item
        if near_threshold is not None and item.embedding is not None:
            vector = _vector(item.embedding)
            if vector is not None:
                vectors.append((index, vector))
    if near_threshold is not None and len(vectors) > 1:
        dropped.extend(_near(items, vectors, keep, near_threshold))
    return list(compress(items, keep)), dropped


def dedupe_ids(items: Sequence[ContextItem], keep: list[bool], dropped: list[Duplicate]) -> None:
    """Mark all but the best copy of each id as not kept (``keep[i] = False``)."""
    best: dict[str, int] = {}
    for index, item in enumerate(items):
        first = best.get(item.id)
        if first is None:
            best[item.id] = index
            continue
        other = items[first]
        if item.never_pruned and other.never_pruned and item.text != other.text:
            msg = (
                f"two different never-pruned items share the id {item.id!r}; give each "
                "system prompt, query or shrink='never' item its own id"
            )
            raise InvalidItemError(msg)
        if _rank(item, index) < _rank(other, first):
            best[item.id] = index
            keep[first] = False
            dropped.append(Duplicate(other, item.id, "id", item))
        else:
            keep[index] = False
            dropped.append(Duplicate(item, other.id, "id", other))


def _vector(embedding: Iterable[float]) -> np.ndarray | None:
    """An embedding as a vector that can be compared; None for one that cannot.

    An empty one, or one holding NaN, an infinity or an int no float holds, is like none:
    its item is compared by content only (it would make every similarity NaN, with numpy's
    warnings, or raise an OverflowError).
    """
    try:
        vector = np.asarray(embedding, dtype=np.float64)
    except (OverflowError, ValueError, TypeError):
        return None
    if vector.ndim != 1 or not vector.size or not np.isfinite(vector).all():
        return None
    # Squares of values near the float limit overflow the norm: scaled, the cosine is the same.
    peak = float(np.abs(vector).max())
    return vector / peak if peak > 1e150 else vector


def _near(
    items: Sequence[ContextItem],
    vectors: list[tuple[int, np.ndarray]],
    keep: list[bool],
    threshold: float,
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
        twin_item = items[vectors[twin][0]]
        dropped.append(Duplicate(items[index], twin_item.id, "near", twin_item))
    return dropped


Lazy = Iterable[tuple[Sequence[ContextItem], PruneReason, str]]


def pruned_duplicates(
    duplicates: Sequence[Duplicate],
    included: Sequence[ContextItem],
    pruned: Sequence[PrunedItem],
    lazy: Lazy,
) -> list[PrunedItem]:
    """Each duplicate as the report lists it, once packing chose what is sent: ``DUPLICATE``.

    ``duplicate_of`` is the item kept in its place when that item is sent. When it is not (cut
    for the budget, a cap, a summary), ``duplicate_of`` is None and the detail says so, with
    that item's reason: never the duplicate of something nobody received (an agent's message
    dropped for its memory copy, the copy then cut, named the copy until 2026-11-30).
    """
    sent_objects = {id(item) for item in included}
    sent_ids = {item.id for item in included}
    reasons: dict[int, tuple[PruneReason, str]] | None = None
    out = []
    for dup in duplicates:
        kept = dup.kept
        if kept is None or id(kept) in sent_objects or kept.id in sent_ids:
            out.append(PrunedItem(dup.item, PruneReason.DUPLICATE, dup.detail, duplicate_of=kept))
            continue
        if reasons is None:  # rare: read what happened to every pruned item once
            reasons = {id(p.item): (p.reason, p.detail) for p in pruned}
            for items, reason, detail in lazy:
                reasons.update(dict.fromkeys(map(id, items), (reason, detail)))
        reason, detail = reasons.get(id(kept), (PruneReason.OVER_BUDGET, ""))
        said = f"{dup.detail}, which was not sent either ({reason.value}: {detail})"
        out.append(PrunedItem(dup.item, PruneReason.DUPLICATE, said.replace(": )", ")")))
    return out
