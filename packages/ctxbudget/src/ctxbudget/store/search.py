"""Vector search: the records most similar to one or several queries, under filters.

Filters (namespace, session, user, kinds, the caller's metadata ``where``) are part of the query
Chroma evaluates, so a record outside them is never read. Several queries under the same
filters go to Chroma in one call. On a server, a search is a read, so it is retried when it
meets a new collection's index still being written (`search_transient`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctxbudget.errors import StoreInputError
from ctxbudget.store.client import index_not_ready
from ctxbudget.store.filters import all_of, where_filter
from ctxbudget.store.layout import Collections
from ctxbudget.store.records import Hit, decode_record, require_count
from ctxbudget.store.retry import is_transient
from ctxbudget.store.vectors import Vectors

__all__ = ["search_many", "search_transient"]


def search_transient(exc: BaseException) -> bool:
    """Whether a failed search on a server is worth another try."""
    return is_transient(exc) or index_not_ready(exc)


def search_many(
    collections: Collections,
    vectors_of: Vectors,
    queries: Sequence[str | Sequence[float]],
    *,
    namespace: str,
    k: int | Sequence[int],
    session_id: str | None = None,
    user_id: str | None = None,
    kinds: Sequence[str] | None = None,
    exclude_session_id: str | None = None,
    where: dict[str, Any] | None = None,
) -> list[list[Hit]]:
    """`ChromaStore.search_many` over one store's collections and vectors."""
    if isinstance(queries, str):
        msg = f"queries must be a list of queries, got the str {queries!r}; pass [{queries!r}]"
        raise StoreInputError(msg)
    queries = list(queries)
    ks: list[int] = (
        list(k) if isinstance(k, Sequence) and not isinstance(k, str) else [k] * len(queries)
    )
    if len(ks) != len(queries):
        msg = f"k gives {len(ks)} numbers for {len(queries)} queries; give one per query"
        raise StoreInputError(msg)
    for each in ks:
        require_count("k", each)
    clauses = where_filter(namespace, session_id, user_id, exclude_session_id, kinds, where)
    if clauses is None or not queries or max(ks) == 0:
        return [[] for _ in queries]
    vectors = [vectors_of.query_vector(q) for q in queries]
    info = vectors_of.info()
    if info is None:
        return [[] for _ in queries]  # nothing was ever written
    for vector in vectors:
        if info[1] != len(vector):
            msg = (
                f"the query vector has {len(vector)} dimensions but collection "
                f"{collections.name!r} holds {info[1]}-dimension vectors from {info[0]!r}; "
                "embed with the same model"
            )
            raise StoreInputError(msg)

    def run_query() -> Any:
        try:
            return collections.records.query(
                query_embeddings=vectors,
                n_results=max(ks),
                where=all_of(clauses),
                include=["documents", "metadatas", "distances"],
            )
        except ValueError as exc:  # chromadb checks filters before sending them
            msg = f"invalid where filter {where!r}: {exc}"
            raise StoreInputError(msg) from exc

    # A server answers a search racing a new collection's first writes with "index not ready"
    # (see client.index_not_ready): a read, so safe to try again once the write is done.
    got = collections.conn.call("search", run_query, transient=search_transient)
    results: list[list[Hit]] = []
    for number, limit in enumerate(ks):
        hits = [
            Hit(decode_record(doc, dict(meta or {})), max(-1.0, min(1.0, 1.0 - float(distance))))
            for doc, meta, distance in zip(
                got["documents"][number],
                got["metadatas"][number],
                got["distances"][number],
                strict=True,
            )
        ]
        hits.sort(key=lambda h: (-h.similarity, h.record.id))
        results.append(hits[:limit])
    return results
