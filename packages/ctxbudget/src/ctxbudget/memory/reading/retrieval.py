"""The search behind `ContextMemory.candidates`: what matches one query, and how much history.

The query and the session's last user turns are embedded (earlier turns from a small cache,
`QueryVectors`). The session's messages are searched in memory (`SessionIndex.search`: exact
cosine over the vectors the index keeps), then scored by meaning and by words together
(`SessionIndex.relevance`); the user's other sessions and the documents are searched in the
store, once per source for all queries (`ChromaStore.search_many`). The recent window gets the
share of the budget its matches point to (`history_share`, `fit_history`); the rest are scored
by relevance x recency x salience (`ctxbudget.memory.policy.scoring`). The search pool is a
few times what the budget can hold, never the whole session; with a reranker, at least the
`MemoryConfig.reranker_top` it sees (a perfect reranker over a pool sized by the budget alone
lost evidence that was never in it: docs/benchmarks.md, "Rerankers: what the pipeline carries").
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ctxbudget.core.items import ContextItem
from ctxbudget.core.render import Layout
from ctxbudget.embed.base import Embedder
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.memory.policy.scoring import Floats, Scoring
from ctxbudget.memory.reading.excerpts import excerpt_terms, excerpted
from ctxbudget.memory.reading.lexical import (
    hit_relevance,
    lexical_terms,
    record_score,
    record_scores,
)
from ctxbudget.memory.reading.record_items import (
    history_item,
    item_id,
    prime,
    retrieved_item,
    retrieved_items,
)
from ctxbudget.memory.reading.session_index import Query, SessionIndex, span_of, without_names
from ctxbudget.memory.reading.speakers import spoken
from ctxbudget.memory.reading.successors import TOP, with_successors
from ctxbudget.store.filters import document_filter
from ctxbudget.store.records import Hit, Record
from ctxbudget.tokens.counter import TokenCounter

if TYPE_CHECKING:
    from ctxbudget.store.chroma_store import ChromaStore

__all__ = ["QueryVectors", "SearchScope", "fit_history", "history_share", "retrieve"]

_SEARCH_FACTOR = 4  # the question's dense matches: this many times what the budget can hold
_POOL_FACTOR = 3  # candidates offered: the best of the session's, this many times as many
_TOP_MATCHES = 10  # best matches that decide the share of recent history
_CACHED_VECTORS = 64  # vectors of earlier user turns kept for multi-query search


@dataclass(slots=True)
class SearchScope:
    """What one `ContextMemory.assemble` call searches for."""

    session_id: str
    user: str | None
    query: str
    counter: TokenCounter
    available: int
    documents: bool | str | Sequence[str]
    other_sessions: bool
    elsewhere: tuple[str, ...] | None = None  # `SessionState.elsewhere` (of ``user``)
    has_documents: bool | None = None  # `SessionState.has_documents` (False: none to search)


class QueryVectors:
    """Vectors of recent queries and user turns, kept for multi-query search, thread-safe.

    They recur: a question is an earlier turn of the next calls, and a turn's tool calls ask
    again.
    """

    def __init__(self) -> None:
        self._cache: OrderedDict[str, list[float]] = OrderedDict()
        self._lock = threading.Lock()

    def embed(self, queries: Sequence[Query], embedder: Embedder) -> list[list[float]]:
        """Vectors of the queries; earlier turns come from the cache."""
        cache = self._cache
        with self._lock:
            known = {q.text: cache[q.text] for q in queries if q.text in cache}
        todo = list(dict.fromkeys(q.text for q in queries if q.text not in known))
        known.update(zip(todo, embedder.embed_documents(todo), strict=True))
        with self._lock:
            for q in queries:
                cache[q.text] = known[q.text]
                cache.move_to_end(q.text)
            while len(cache) > _CACHED_VECTORS:
                cache.popitem(last=False)
        return [known[q.text] for q in queries]


def retrieve(
    store: ChromaStore,
    namespace: str,
    config: MemoryConfig,
    vectors: QueryVectors,
    search: SearchScope,
    recent: list[Record],
    index: SessionIndex | None,
    skip: frozenset[str],
    layout: Layout,
    search_recent: bool = False,
) -> tuple[list[Record], list[ContextItem]]:
    """The history to offer (of ``recent``) and the scored retrieval candidates, best first.

    ``skip``: ids never offered; ``search_recent``: the history's turns may be retrieved too.
    """
    scoring = config.scoring
    ns = namespace
    size = len(index) if index is not None else 0
    named = index.named_in(search.query) if index is not None else set()
    turns = [r for r in reversed(recent) if r.role == "user"][: config.query_turns]
    queries = [Query(1.0, without_names(search.query, named), lexical_terms(search.query), None)]
    said = [(r, spoken(r)) for r in turns]  # what the turn says, not who said it
    queries += [Query(config.query_turn_weight, t, lexical_terms(t), r.id) for r, t in said]
    embedded = vectors.embed(queries, store.embedder)
    fit = search.available / ((index.mean_tokens if index is not None else 30.0) + 3.0)
    searched = max(config.semantic_k, math.ceil(_SEARCH_FACTOR * fit))
    pool = max(config.semantic_k, math.ceil(_POOL_FACTOR * fit))
    if config.reranker is not None:  # it sees reranker_top of the pool (reading.rerank)
        pool = max(pool, config.reranker_top)
        searched = max(searched, math.ceil(config.reranker_top * _SEARCH_FACTOR / _POOL_FACTOR))
    # item id (scope-qualified, see item_id) -> record, similarity, weight
    others: dict[str, tuple[Record, float, float]] = {}
    documents_where = document_filter(search.documents)
    # One Chroma call per source for every query together: a filtered query costs about
    # what its filter costs, whatever the number of vectors.
    if index is not None and size:  # the session's messages: searched in memory
        ks = [min(size, searched if n == 0 else config.semantic_k) for n in range(len(queries))]
        for query, nearest in zip(queries, index.nearest_many(embedded, ks), strict=True):
            query.found = nearest
    searches: list[tuple[Query, list[Hit]]] = []
    if search.other_sessions and search.user is not None:
        found = store.search_many(
            embedded,
            namespace=ns,
            k=config.other_sessions_k,
            user_id=search.user,
            exclude_session_id=search.session_id,
            kinds=["message", "summary"],
            elsewhere=search.elsewhere,
        )
        searches += zip(queries, found, strict=True)
    held = search.has_documents is not False  # False: the namespace has no documents
    if search.documents is not False and config.document_k and held:
        found = store.search_many(
            embedded,
            namespace=ns,
            k=config.document_k,
            kinds=["document"],
            where=documents_where,
        )
        searches += zip(queries, found, strict=True)
    for query, hits in searches:
        for hit in hits:
            key = item_id(hit.record, search.session_id)
            known = others.get(key)
            if known is None or hit.similarity * query.weight > known[1] * known[2]:
                others[key] = (hit.record, hit.similarity, query.weight)

    history = list(recent)
    relevance: Floats = np.zeros(size)
    span = (0.0, 0.0)
    if index is not None and size:
        relevance, span = index.relevance(queries, scoring, config.neighbours, named, search.query)
        history = fit_history(
            recent,
            history_share(config, index, relevance, recent) * search.available,
            layout,
            config.min_exchanges,
        )
    taken = skip if search_recent else skip | {r.id for r in history}
    items: list[ContextItem] = []
    newest = index.newest if index is not None else None
    if index is not None and size:
        ranked = np.flatnonzero(relevance > 0)
        ranked = ranked[np.argsort(-relevance[ranked], kind="stable")]
        offered = np.ones(size, dtype=bool)
        offered[[index.position[i] for i in taken if i in index.position]] = False
        chosen = ranked[offered[ranked]][:pool]
        chosen = chosen[index.texted()[chosen]]  # not a tool-call-only turn
        sid = search.session_id
        records = [index.records[p] for p in chosen.tolist()]
        scores = record_scores(scoring, records, relevance[chosen].tolist(), newest, sid)
        items += retrieved_items(records, scores, sid)
    words = set(lexical_terms(search.query))
    for key, (record, similarity, weight) in others.items():
        if key in taken or not record.text.strip():
            continue
        bounds = span if span[1] > span[0] else span_of(s for _, s, _ in others.values())
        match = hit_relevance(scoring, record, similarity, weight, words, bounds)
        items.append(_scored(scoring, record, match, newest, search))
    # Their stored token counts are not primed: retrieved items are counted as the rows they
    # render (the counter's misses are the same with and without, in every format).
    items.sort(key=lambda it: (-it.score, it.id))
    if config.newer_statements and index is not None and size:
        items = _with_successors(items, index, min(TOP, math.ceil(fit)), history, skip, search)
    if config.excerpts:
        terms = excerpt_terms(search.query, named)
        kept = index.pieces_of if index is not None else None
        items = excerpted(items, terms, search.available, search.counter, kept)
    return history, items


def _with_successors(
    items: list[ContextItem],
    index: SessionIndex,
    limit: int,
    history: list[Record],
    skip: frozenset[str],
    search: SearchScope,
) -> list[ContextItem]:
    """Each of the best turns with the later one that restates it (`with_successors`)."""

    def make(record: Record, score: float) -> ContextItem:
        prime(search.counter, [record])
        return retrieved_item(record, score, search.session_id)

    held = {r.id for r in history}
    return with_successors(items, index, limit=limit, history=held, skip=skip, make=make)


def _scored(
    scoring: Scoring, record: Record, relevance: float, newest: float | None, search: SearchScope
) -> ContextItem:
    score = record_score(scoring, record, relevance, newest, search.session_id)
    return retrieved_item(record, score, search.session_id)


def history_share(
    config: MemoryConfig, index: SessionIndex, relevance: Floats, recent: list[Record]
) -> float:
    """`MemoryConfig.recent_share`: the least, or more when the best matches are recent."""
    least, most = config.recent_share
    best = [int(p) for p in np.argsort(-relevance, kind="stable")[:_TOP_MATCHES]]
    best = [p for p in best if relevance[p] > 0]
    if not best:
        return least
    window = {r.id for r in recent}
    recent_matches = sum(index.ids[p] in window for p in best)
    return max(least, most * recent_matches / len(best))


def fit_history(
    recent: list[Record], tokens: float, layout: Layout, min_exchanges: int
) -> list[Record]:
    """The newest messages whose rendered history fits ``tokens``, and the newest exchanges."""
    if not recent:
        return []
    used = float(layout.open_cost("history"))
    newer_date: str | None = None
    start = len(recent)
    for position in range(len(recent) - 1, -1, -1):
        item = history_item(recent[position])
        cost = layout.cost(item, "history")
        date = layout.date_of(item, "history")
        if date and date != newer_date:
            cost += layout.counter.count(layout.date_line(date))
        if used + cost > tokens:
            break
        used += cost
        newer_date = date or newer_date
        start = position
    if min_exchanges:
        heads = 0
        for position in range(len(recent) - 1, -1, -1):
            if position < start:
                start = position
            if recent[position].role == "user":
                heads += 1
                if heads >= min_exchanges:
                    break
    return recent[start:]
