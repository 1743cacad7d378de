"""`ContextMemory.search`: one store search for retrievers, each hit scored as candidates are.

Relevance (the hit's similarity within the hits' range and the content words it shares with the
query) x recency x salience, by `ctxbudget.memory.policy.scoring`; entity memory's own records
(declared relations and patterns) are never hits.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Real
from typing import TYPE_CHECKING

from ctxbudget.core.items import ContextItem, Shrink, Tier
from ctxbudget.core.numbers import shown
from ctxbudget.errors import InvalidItemError
from ctxbudget.memory.entities.stored import ENTITY_MARK
from ctxbudget.memory.inputs import check_query
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.memory.reading.lexical import hit_relevance, lexical_terms, record_score
from ctxbudget.memory.reading.record_items import item_id
from ctxbudget.memory.reading.session_index import span_of
from ctxbudget.store.filters import document_filter
from ctxbudget.store.records import Hit, first_surrogate, scope_of

if TYPE_CHECKING:
    from ctxbudget.store.chroma_store import ChromaStore

__all__ = ["ScoredHit", "scored_search"]


@dataclass(frozen=True, slots=True)
class ScoredHit:
    """A store hit with the score `ContextMemory` gives it (see `ContextMemory.search`)."""

    hit: Hit
    score: float

    def item(self, *, session_id: str | None = None, shrink: Shrink = Shrink.DROP) -> ContextItem:
        """The hit as a ``RETRIEVED`` item to pack, as both adapters' retrievers pack hits.

        Its ``id`` is unique across scopes (`ctxbudget.memory.reading.record_items.item_id`: the
        record's own id for ``session_id``'s records, else qualified with its scope), so two
        collections' ``guide#0`` are two items; ``record_id`` and ``scope`` are the record's.
        """
        record = self.hit.record
        return ContextItem(
            item_id(record, session_id),
            record.text,
            tier=Tier.RETRIEVED,
            score=self.score,
            shrink=shrink,
            source=record.kind,
            record_id=record.id,
            scope=scope_of(record),
        )


def _names(given: object) -> bool:
    return (
        isinstance(given, Sequence)
        and not isinstance(given, str | bytes)
        and all(isinstance(n, str) and n and first_surrogate(n) is None for n in given)
    )


def _check_scope(kinds: object, collections: object, vector: object) -> None:
    """Refuse ``kinds``, ``collections`` or ``vector`` of `ContextMemory.search` it cannot use."""
    if kinds is not None and not _names(kinds):
        msg = f"kinds must be None (every kind) or a list of record kinds, got {shown(kinds)}"
        raise InvalidItemError(msg)
    if not (
        collections is None
        or isinstance(collections, bool)
        or _names([collections] if isinstance(collections, str) else collections)
    ):
        msg = (
            "collections must be None or True (every collection), a collection name or a list "
            f"of them, got {shown(collections)}"
        )
        raise InvalidItemError(msg)
    if vector is not None and (
        isinstance(vector, str | bytes)
        or not isinstance(vector, Sequence)
        or not all(isinstance(x, Real) and not isinstance(x, bool) for x in vector)
    ):
        msg = (
            f"vector must be None or the query's embedding (a list of floats), got {shown(vector)}"
        )
        raise InvalidItemError(msg)


def scored_search(
    store: ChromaStore,
    namespace: str,
    config: MemoryConfig,
    query: str,
    *,
    k: int,
    kinds: Sequence[str] | None,
    session_id: str | None,
    user_id: str | None,
    collections: bool | str | Sequence[str] | None,
    vector: Sequence[float] | None,
) -> list[ScoredHit]:
    """`ContextMemory.search` (see there): one store search, hits scored, best first."""
    check_query(query)  # a lone surrogate is refused here, as assemble refuses it
    _check_scope(kinds, collections, vector)
    if not query.strip():
        return []
    if isinstance(collections, Sequence) and not isinstance(collections, str) and not collections:
        return []  # the documents of no collection (as assemble's documents=[]: none)
    where = None if collections is None else document_filter(collections)
    hits = store.search(
        query if vector is None else vector,
        namespace=namespace,
        k=k,
        kinds=None if kinds is None else list(kinds),
        session_id=session_id,
        user_id=user_id,
        where=where,
    )
    words = set(lexical_terms(query))
    span = span_of(h.similarity for h in hits)
    now = time.time()
    scoring = config.scoring
    scored = []
    for hit in hits:
        if ENTITY_MARK in hit.record.metadata:  # a declared relation or pattern: never a hit
            continue
        relevance = hit_relevance(scoring, hit.record, hit.similarity, 1.0, words, span)
        score = record_score(scoring, hit.record, relevance, now, session_id)
        scored.append(ScoredHit(hit, score))
    scored.sort(key=lambda s: (-s.score, s.hit.record.id))
    return scored
