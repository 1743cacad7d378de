"""Reading records by metadata (no vector search): a session's messages, filters, counts.

Every read takes a namespace, and its filters are part of the ``where`` Chroma evaluates.
`recent` reads a ``seq`` range from the session's counter (`ctxbudget.store.sequences`), not
the whole session.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctxbudget.store.filters import all_of, where_filter
from ctxbudget.store.layout import Collections
from ctxbudget.store.records import Record, StoreStats, require_count, require_name
from ctxbudget.store.sequences import Sequences, session_where

__all__ = ["Reader"]


class Reader:
    """Reads one store's records and sessions by metadata (`ChromaStore`'s reading methods)."""

    def __init__(self, collections: Collections, sequences: Sequences) -> None:
        self._collections = collections
        self._sequences = sequences

    def recent(
        self, *, namespace: str, session_id: str, limit: int, before_seq: int | None = None
    ) -> list[Record]:
        """`ChromaStore.recent`: the last ``limit`` messages of a session, oldest first."""
        require_name("namespace", namespace)
        require_name("session_id", session_id)
        require_count("limit", limit)
        if before_seq is not None:
            require_count("before_seq", before_seq)
        if limit == 0:
            return []
        if before_seq is None:
            session = (namespace, session_id)
            end = self._sequences.counters([session]).get(session, -1) + 1
            upper: list[dict[str, Any]] = []
        else:
            end = before_seq
            upper = [{"seq": {"$lt": before_seq}}]
        low = max(0, end - limit)
        while True:
            where = session_where(namespace, session_id, {"seq": {"$gte": low}}, *upper)
            found = self._collections.records_where(where)
            if len(found) >= limit or low == 0:
                break
            # Fewer than asked: seqs have gaps (deleted messages); widen the range.
            low = max(0, end - 2 * (end - low))
        found.sort(key=lambda r: r.seq or 0)
        return found[-limit:]

    def session_messages(self, *, namespace: str, session_id: str) -> list[Record]:
        """`ChromaStore.session_messages`: every message of a session, in seq order."""
        require_name("namespace", namespace)
        require_name("session_id", session_id)
        found = self._collections.records_where(session_where(namespace, session_id))
        return sorted(found, key=lambda r: r.seq or 0)

    def find(
        self,
        *,
        namespace: str,
        kinds: Sequence[str] | None = None,
        session_id: str | None = None,
        user_id: str | None = None,
        seqs: Sequence[int] | None = None,
        where: dict[str, Any] | None = None,
    ) -> list[Record]:
        """`ChromaStore.find`: records that pass every filter, sorted by kind, seq and id."""
        clauses = where_filter(namespace, session_id, user_id, None, kinds, where)
        if clauses is None:
            return []
        if seqs is not None:
            numbers = sorted({require_count("seq", n) for n in seqs})
            if not numbers:
                return []
            clauses.append({"seq": {"$in": numbers}})
        found = self._collections.records_where(all_of(clauses))
        found.sort(key=lambda r: (r.kind, -1 if r.seq is None else r.seq, r.id))
        return found

    def list_sessions(self, *, namespace: str, user_id: str | None = None) -> list[str]:
        """`ChromaStore.list_sessions`: from the session and member entries of ``meta``."""
        where: list[dict[str, Any]] = [{"ns": require_name("namespace", namespace)}]
        if user_id is None:
            where.append({"type": "session"})
        else:
            where += [{"type": "member"}, {"uid": require_name("user_id", user_id)}]
        cols = self._collections
        rows = cols.rows(cols.meta, where=all_of(where), documents=False)
        return sorted({str(meta["sid"]) for _, _, meta in rows})

    def count(self, *, namespace: str | None = None) -> int:
        """`ChromaStore.count`: the records of one namespace, or of all."""
        cols = self._collections
        if namespace is None:
            return int(cols.conn.call("count", cols.records.count))
        return len(cols.ids(cols.records, {"ns": require_name("namespace", namespace)}))

    def stats(self, *, embedder: str) -> StoreStats:
        """`ChromaStore.stats`: counts per kind, namespaces and sessions (reads every record)."""
        by_kind: dict[str, int] = {}
        namespaces: set[str] = set()
        sessions: set[tuple[str, str]] = set()
        cols = self._collections
        rows = cols.rows(cols.records, documents=False)
        for _, _, meta in rows:
            by_kind[meta["kind"]] = by_kind.get(meta["kind"], 0) + 1
            namespaces.add(meta["ns"])
            if "sid" in meta:
                sessions.add((meta["ns"], meta["sid"]))
        return StoreStats(
            records=len(rows),
            by_kind=dict(sorted(by_kind.items())),
            namespaces=len(namespaces),
            sessions=len(sessions),
            embedder=embedder,
            location=cols.conn.location,
        )
