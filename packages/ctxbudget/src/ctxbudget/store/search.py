"""Vector search: the records most similar to one or several queries, under filters.

A search queries only the partitions its filters route to (`Sessions.route`), and the filters
(namespace, session, user, kinds, the caller's metadata ``where``) are part of the query Chroma
evaluates, so a record outside them is never read. Several queries under the same
filters go to Chroma in one call. On a server, a search is a read, so it is retried when it
meets a new collection's index still being written (`search_transient`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import partial
from typing import Any

from ctxbudget.core.numbers import count, shown
from ctxbudget.errors import StoreInputError
from ctxbudget.store.client import index_not_ready
from ctxbudget.store.filters import user_where, where_filter
from ctxbudget.store.keys import matches, where_keys
from ctxbudget.store.layout import Collections
from ctxbudget.store.records import Hit, decode_record, require_count
from ctxbudget.store.replies import query_reply
from ctxbudget.store.retry import is_transient
from ctxbudget.store.sessions import Sessions
from ctxbudget.store.vectors import Vectors

__all__ = ["MAX_HITS", "search_k", "search_many", "search_transient"]

MAX_HITS = 2**31 - 1
"""The largest ``k`` of one search: what Chroma takes as ``n_results`` (a 32-bit count)."""


def search_k(value: object, what: str = "k") -> int:
    """``value`` as the ``k`` of one search: a count from 0 to `MAX_HITS` (numpy ints taken).

    The check `ContextMemory.search` makes of ``k``, and every door's ``k`` (``what``: where
    it came from, ending in ``k``, e.g. ``"CtxBudgetRetriever: k"``).

    Raises:
        ConfigurationError: a bool, text, a float, a negative or too large number.

    >>> search_k(4)
    4
    """
    return count(value, what, least=0, most=MAX_HITS, hint="the most hits one search returns")


def search_transient(exc: BaseException) -> bool:
    """Whether a failed search on a server is worth another try."""
    return is_transient(exc) or index_not_ready(exc)


def search_many(
    collections: Collections,
    sessions: Sessions,
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
    elsewhere: Sequence[str] | None = None,
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
        if require_count("k", each) > MAX_HITS:
            most = f"{MAX_HITS:,} (the most hits one search returns)"
            msg = f"k must be at most {most}, got {shown(each)}"
            raise StoreInputError(msg)
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

    if elsewhere is not None and (
        isinstance(elsewhere, str)
        or not isinstance(elsewhere, Sequence)
        or not all(isinstance(p, str) and p for p in elsewhere)
    ):
        msg = (
            f"elsewhere must be a list of partition names (Stamps.elsewhere), got "
            f"{shown(elsewhere)}; pass None to have the search read them"
        )
        raise StoreInputError(msg)
    partitions = sessions.route(namespace, session_id, user_id, kinds, elsewhere)
    chosen = where_keys(
        namespace, session_id, user_id, exclude_session_id, kinds, user_where(where)
    )
    merged: list[list[Hit]] = [[] for _ in queries]
    for partition in partitions:
        found = _query(collections, partition, vectors, max(ks), chosen, where)
        for number, hits in enumerate(found):
            merged[number] += [
                hit
                for hit, meta in hits
                if matches(meta, namespace, session_id, user_id, exclude_session_id, kinds)
            ]
    results: list[list[Hit]] = []
    for best, limit in zip(merged, ks, strict=True):
        best.sort(key=lambda h: (-h.similarity, h.record.id))
        results.append(best[:limit])
    return results


def _query(
    collections: Collections,
    partition: str,
    vectors: list[list[float]],
    k: int,
    chosen: dict[str, Any] | None,
    where: dict[str, Any] | None,
) -> list[list[tuple[Hit, dict[str, Any]]]]:
    """The hits of each vector in one partition (none if it does not exist)."""

    def run_query(collection: Any) -> Any:
        try:
            got = collection.query(
                query_embeddings=vectors,
                n_results=k,
                where=chosen,
                include=["documents", "metadatas", "distances"],
            )
        except json.JSONDecodeError:  # the server's reply, not the filter (see Connection.call)
            raise
        except ValueError as exc:  # chromadb checks filters before sending them
            msg = f"invalid where filter {where!r}: {exc}"
            raise StoreInputError(msg) from exc
        return query_reply(got, queries=len(vectors), k=k)

    # A server answers a search racing a new collection's first writes with "index not ready"
    # (see client.index_not_ready): a read, so safe to try again once the write is done.
    got = collections.run(
        partition,
        lambda c: collections.conn.call(
            "search", partial(run_query, c), transient=search_transient
        ),
    )
    if got is None:
        return [[] for _ in vectors]
    return [
        [
            (
                Hit(
                    decode_record(doc, dict(meta or {})), max(-1.0, min(1.0, 1.0 - float(distance)))
                ),
                dict(meta or {}),
            )
            for doc, meta, distance in zip(
                got["documents"][number],
                got["metadatas"][number],
                got["distances"][number],
                strict=True,
            )
        ]
        for number in range(len(vectors))
    ]
