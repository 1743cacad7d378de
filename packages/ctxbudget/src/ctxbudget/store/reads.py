"""Reading records by metadata (no vector search): a session's messages, filters, counts.

Every read takes a namespace, and its filters are part of the ``where`` Chroma evaluates.
Each read touches only the partitions its filters route to (`Sessions.route`): a session's
home, a user's partitions, a namespace's documents. `recent` reads a ``seq`` range from the
session's counter (`ctxbudget.store.sessions`), not the whole session.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ctxbudget.store.filters import user_where, where_filter
from ctxbudget.store.keys import address, matches, seq_keys, where_keys
from ctxbudget.store.layout import Collections
from ctxbudget.store.partitions import docs_partition, user_partition
from ctxbudget.store.records import (
    Record,
    Scope,
    StoreStats,
    decode_record,
    require_count,
    require_name,
)
from ctxbudget.store.sequences import AHEAD, is_message_of, messages_from, session_where
from ctxbudget.store.sessions import SessionEntry, Sessions, Stamp, Stamps, session_key

__all__ = ["Reader", "SessionView"]


@dataclass(frozen=True, slots=True)
class SessionView:
    """What one call needs of a session, read in one or two Chroma calls (`Reader.view`).

    Attributes:
        stamp: the session's `Stamp`: its generation changes whenever the session's stored
            messages change in a way a copy kept in memory would miss (a deleted or replaced
            message, the session deleted and started again); None: the session has no entry.
        recent: its last messages (at least the newest one), oldest first.
        pins: its pinned records (facts and tasks), sorted by seq and id.
        summaries: its summaries, sorted by seq and id.
        user_id: the user whose user-wide pins ``user_pins`` are (the one asked, else the
            session's owner; None: no user).
        user_pins: that user's user-wide pins, sorted by id.
        vectors: the stored vectors of ``recent`` by message id (float32 arrays), so a copy of
            the session kept in memory takes its new messages from the view.
        since: None, or the last seq of the copy the caller holds (``held``), which is
            current: then ``recent`` holds only the messages after it.
        elsewhere: the user asked for and the partitions of other owners that hold their
            messages, read with the session's entry (`Sessions.route` takes them); None: not
            read (no user asked, or the entry came from the caller's `Stamps` without them).
        has_documents: whether the namespace's documents partition is registered, read with
            the session's entry (`Stamps.has_documents`; None: not read).
    """

    stamp: Stamp | None
    recent: list[Record]
    pins: list[Record]
    summaries: list[Record]
    user_id: str | None
    user_pins: list[Record]
    vectors: dict[str, Any]
    since: int | None = None
    elsewhere: tuple[str, tuple[str, ...]] | None = None
    has_documents: bool | None = None


def _sorted(records: list[Record]) -> list[Record]:
    return sorted(records, key=lambda r: (r.kind, -1 if r.seq is None else r.seq, r.id))


class Reader:
    """Reads one store's records and sessions by metadata (`ChromaStore`'s reading methods)."""

    def __init__(self, collections: Collections, sessions: Sessions) -> None:
        self._collections = collections
        self._sessions = sessions

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
        entry = self._sessions.entry(namespace, session_id)
        if entry is None:
            return []
        return self.window(namespace, session_id, entry, limit, before_seq)[0]

    def view(
        self,
        *,
        namespace: str,
        session_id: str,
        limit: int,
        user_id: str | None,
        held: Stamp | None = None,
        known: Stamps | None = None,
    ) -> SessionView:
        """`ChromaStore.session_view`: a session's window, pins, summaries and user pins."""
        ns = require_name("namespace", namespace)
        sid = require_name("session_id", session_id)
        require_count("limit", limit)
        if user_id is not None:
            require_name("user_id", user_id)
        elsewhere: tuple[str, tuple[str, ...]] | None = None
        if known is not None and known.entry_key == session_key(ns, sid):
            entry = known.entry  # read by the caller, just before, with the session's stamps
            if known.user_id is not None and known.elsewhere is not None:
                elsewhere = (known.user_id, known.elsewhere)
            documents = known.has_documents
        else:  # where the user's other sessions are and whether there are documents: one read
            entry, partitions, documents = self._sessions.entry_read(ns, sid, user_id)
            if user_id is not None and partitions is not None:
                elsewhere = (user_id, partitions)
        if entry is None:
            theirs = [] if user_id is None else self._user_pins(ns, user_id)
            return SessionView(
                None, [], [], [], user_id, theirs, {}, elsewhere=elsewhere, has_documents=documents
            )
        user = user_id or entry.owner or None
        keys = [address(ns, ("session", sid), k) for k in ("pinned", "summary")]
        together = user is not None and entry.home == user_partition(
            self._collections.name, ns, user
        )
        if together and user is not None:  # the user's pins are in the same collection
            keys.append(address(ns, ("user", user), "pinned"))
        extra: dict[str, Any] = {"at": {"$in": keys}}
        # A copy held in memory of the current generation has every message up to its last.
        # (Not on a server: another process may still write a message with a lower seq.)
        stamp = entry.stamp()
        since = None
        if stamp.same_session(held) and held is not None and not self._collections.conn.shared:
            since = held.last
        window, rest, vectors = self.window(ns, sid, entry, max(1, limit), extra=extra, after=since)
        rest = [r for r in rest if r.namespace == ns]
        mine = [r for r in rest if r.session_id == sid and r.kind in ("pinned", "summary")]
        if together:
            user_pins = [
                r
                for r in rest
                if r.session_id is None
                and r.user_id == user
                and r.kind == "pinned"
                and r.metadata.get("_scope") == "user"
            ]
        elif user is not None:
            user_pins = self._user_pins(ns, user)
        else:
            user_pins = []
        last = max([entry.last, since or 0, *(r.seq for r in window if r.seq is not None)])
        return SessionView(
            stamp=stamp._replace(last=last),
            recent=window,
            pins=_sorted([r for r in mine if r.kind == "pinned"]),
            summaries=_sorted([r for r in mine if r.kind == "summary"]),
            user_id=user,
            user_pins=_sorted(user_pins),
            vectors=vectors,
            since=since,
            elsewhere=elsewhere,
            has_documents=documents,
        )

    def _user_pins(self, namespace: str, user_id: str) -> list[Record]:
        return self.find(
            namespace=namespace, kinds=["pinned"], user_id=user_id, where={"_scope": "user"}
        )

    def window(
        self,
        namespace: str,
        session_id: str,
        entry: SessionEntry,
        limit: int,
        before_seq: int | None = None,
        extra: dict[str, Any] | None = None,
        after: int | None = None,
    ) -> tuple[list[Record], list[Record], dict[str, Any]]:
        """A session's last ``limit`` messages, the records passing ``extra``, and their vectors.

        The vectors are those of the messages, by id. All come from one read of the session's
        home (``extra``: e.g. its pins and summaries), by the keys of the seqs wanted
        (`ctxbudget.store.keys`); more only if seqs have gaps. ``after``: only messages with a
        greater seq.
        """
        cols = self._collections
        end = entry.last + 1 if before_seq is None else before_seq
        first = 0 if after is None else after + 1
        low = max(first, end - limit)
        top = max(end, low) + AHEAD if before_seq is None else end
        rows = messages_from(cols, entry.home, namespace, session_id, low, top, True, extra)
        window: dict[str, tuple[Record, Any]] = {}
        rest: list[Record] = []
        for _, doc, meta, vector in rows:
            record = decode_record(doc, meta)
            if is_message_of(meta, namespace, session_id) and (
                before_seq is None or int(meta["seq"]) < before_seq
            ):
                window[record.id] = (record, vector)
            elif record.kind != "message" or record.session_id != session_id:
                rest.append(record)
        while len(window) < limit and low > first:
            # Fewer than asked: seqs have gaps (deleted messages); read further back.
            high, low = low, max(first, end - 2 * (end - low))
            more = messages_from(cols, entry.home, namespace, session_id, low, high, True)
            window.update(
                (str(meta["rid"]), (decode_record(doc, meta), vector))
                for _, doc, meta, vector in more
                if is_message_of(meta, namespace, session_id) and int(meta["seq"]) < high
            )
        ordered = sorted(window.values(), key=lambda pair: pair[0].seq or 0)[-limit:]
        return [r for r, _ in ordered], rest, {r.id: v for r, v in ordered}

    def get(self, scope: Scope, keys: list[str], *, namespace: str) -> list[Record]:
        """`ChromaStore.get`: the records with these Chroma ids in one scope, in that order."""
        kind, name = scope
        partition: str | None
        if kind == "session":
            entry = self._sessions.entry(namespace, name)
            partition = None if entry is None else entry.home
        elif kind == "user":
            partition = user_partition(self._collections.name, namespace, name)
        else:
            partition = docs_partition(self._collections.name, namespace)
        found = {} if partition is None else self._collections.fetch(partition, keys)
        return [found[k] for k in keys if k in found]

    def session_messages(self, *, namespace: str, session_id: str) -> list[Record]:
        """`ChromaStore.session_messages`: every message of a session, in seq order."""
        require_name("namespace", namespace)
        require_name("session_id", session_id)
        entry = self._sessions.entry(namespace, session_id)
        if entry is None:
            return []
        found = self._collections.records_where(entry.home, session_where(namespace, session_id))
        found = [r for r in found if r.namespace == namespace and r.session_id == session_id]
        return sorted(found, key=lambda r: r.seq or 0)

    def message_vectors(
        self, *, namespace: str, session_id: str, seqs: Sequence[int] | None = None
    ) -> list[tuple[Record, list[float]]]:
        """`ChromaStore.message_vectors`: a session's messages with their vectors, by seq."""
        require_name("namespace", namespace)
        require_name("session_id", session_id)
        entry = self._sessions.entry(namespace, session_id)
        if entry is None:
            return []
        where = session_where(namespace, session_id)
        if seqs is not None:
            numbers = sorted({require_count("seq", n) for n in seqs})
            if not numbers:
                return []
            where = {"sk": {"$in": seq_keys(namespace, session_id, numbers)}}
        found = [
            (r, v)
            for r, v in self._collections.with_vectors(entry.home, where)
            if r.namespace == namespace and r.session_id == session_id and r.kind == "message"
        ]
        return sorted(found, key=lambda pair: pair[0].seq or 0)

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
        numbers = None
        if seqs is not None:
            numbers = sorted({require_count("seq", n) for n in seqs})
            if not numbers:
                return []
        extra = user_where(where)
        chosen: dict[str, Any] | None
        if numbers is not None and session_id is not None:
            keys = {"sk": {"$in": seq_keys(namespace, session_id, numbers)}}
            chosen = keys if extra is None else {"$and": [keys, extra]}
        else:
            chosen = where_keys(namespace, session_id, user_id, None, kinds, extra)
        found: list[Record] = []
        for partition in self._sessions.route(namespace, session_id, user_id, kinds):
            rows = self._collections.part_rows(partition, where=chosen)
            found += [
                decode_record(doc, meta)
                for _, doc, meta in rows
                if matches(meta, namespace, session_id, user_id, None, kinds)
                and (numbers is None or meta.get("seq") in numbers)
            ]
        found.sort(key=lambda r: (r.kind, -1 if r.seq is None else r.seq, r.id))
        return found

    def list_sessions(
        self, *, namespace: str, user_id: str | None = None, holding: bool = True
    ) -> list[str]:
        """`ChromaStore.list_sessions`: from the session and member entries of ``meta``."""
        ns = require_name("namespace", namespace)
        # Chroma evaluates each clause against the whole store (ctxbudget.store.keys): ask only
        # for what few entries match, and check the namespace here.
        if user_id is None:
            where: dict[str, Any] = {"type": "session"}
            kind = "session"
        else:
            where = {"uid": require_name("user_id", user_id)}
            kind = "member"
        cols = self._collections
        rows = cols.rows(cols.meta, where=where, documents=False)
        found = sorted(
            {str(m["sid"]) for _, _, m in rows if m.get("type") == kind and m.get("ns") == ns}
        )
        if user_id is None or not holding:
            return found
        # A member entry says the user once wrote there; the session may hold none of their
        # records now (cleared, or their messages deleted): only those that do are theirs.
        return [sid for sid in found if self.find(namespace=ns, session_id=sid, user_id=user_id)]

    def count(self, *, namespace: str | None = None) -> int:
        """`ChromaStore.count`: the records of one namespace, or of all."""
        if namespace is not None:
            require_name("namespace", namespace)
        cols = self._collections
        total = 0
        for partition in cols.partitions(namespace):
            total += cols.run(partition, lambda c: int(cols.conn.call("count", c.count))) or 0
        return total

    def stats(self, *, embedder: str) -> StoreStats:
        """`ChromaStore.stats`: counts per kind, namespaces and sessions (reads every record)."""
        by_kind: dict[str, int] = {}
        namespaces: set[str] = set()
        sessions: set[tuple[str, str]] = set()
        cols = self._collections
        rows = [
            row
            for partition in cols.partitions()
            for row in cols.part_rows(partition, documents=False)
        ]
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
