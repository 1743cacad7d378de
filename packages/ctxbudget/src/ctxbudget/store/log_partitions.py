"""The partitions of context logs: where a session's log is kept, and how it is read and deleted.

A session's log is a partition of its own, ``<store>.l-<digest of namespace and session>``
(`ctxbudget.store.partitions.log_partition`). It is not registered with the record partitions, so
no search, read, ``count`` or ``stats`` of records ever visits it, and reading a session's log
reads that one collection, whose size the retention limit bounds. Each row holds a key that
sorts by time, a fixed one-dimensional vector (Chroma needs one; nothing searches by it) and
metadata: ``lt`` (time), ``lu`` (the user, if any) and ``r`` (the record): no ``ns``, ``sid``
or ``uid`` key, so the clauses record reads filter on never match a log row.
``<store>.meta`` holds one entry per (session, user) with a log, ``{"type": "log", "ns", "sid",
"uid"}``: `delete_user` and reports over a user or a namespace find the logs through them, and
a session's deletion removes them with its other entries. A deleted or edited record may have
been recalled in other sessions' logs: only those of the users who can recall it are read
(`LogPartitions.recalling`), found through their entries here.

A record's document is kept deflated and base64-encoded in the row's metadata (``r``), not as
the row's Chroma document: Chroma indexes documents for full-text search, which made a write
of 20 records about 2.5 times slower in our measurement, and no one searches a log's text.

The writing (a background queue) is `ctxbudget.store.context_log`; every method here makes its
Chroma calls through the store's `Collections`.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import zlib
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from ctxbudget.core.ids import scoped_id
from ctxbudget.store.layout import Collections
from ctxbudget.store.partitions import log_partition
from ctxbudget.store.records import json_key, require_name
from ctxbudget.store.stamps import session_key

__all__ = ["LogEntry", "LogPartitions", "LogRow", "quoted", "quoting_session"]

_PACKED = "z1:"  # a document deflated, then base64: the metadata value ``r``
_VECTOR = [1.0]  # every row's vector: Chroma needs one, nothing searches the log by it


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One assembly to log: where it belongs, and how to build its document.

    Attributes:
        namespace: the tenant.
        session_id: the session assembled for (its log holds the entry).
        user_id: the user the assembly was for (None: none known).
        key: unique, and sorts by time (the oldest are dropped first).
        time: seconds since the epoch.
        document: builds the stored JSON document (called on the background thread).
        retain: at most this many records are kept in the session's log.
        generation: the session's generation when assembled (`ctxbudget.store.sessions.Stamp`;
            "": a session with no records, or none known): the entry is kept only while the
            session keeps it (`ctxbudget.store.context_log`).
    """

    namespace: str
    session_id: str
    user_id: str | None
    key: str
    time: float
    document: Callable[[], str]
    retain: int
    generation: str = ""


@dataclass(frozen=True, slots=True)
class LogRow:
    """A stored log record as read back: its key, document ("" if unreadable), user and time."""

    key: str
    document: str
    user_id: str | None
    time: float


class LogPartitions:
    """The context logs' collections of one store, and their entries in ``meta``."""

    def __init__(self, collections: Collections) -> None:
        self._collections = collections

    # -- writing ---------------------------------------------------------------------------
    def register(self, entries: Sequence[LogEntry]) -> None:
        """Write the ``meta`` entries of these entries' (session, user) pairs that are missing.

        Called before their rows are written: a row is never stored where a delete cannot find
        it, even after a delete by another store or process (the entries are read by id).
        """
        cols = self._collections
        owners: dict[str, dict[str, Any]] = {}
        for entry in entries:
            owner = {"type": "log", "ns": entry.namespace, "sid": entry.session_id}
            if entry.user_id is not None:
                owner["uid"] = entry.user_id
            key = json_key("log", entry.namespace, entry.session_id, entry.user_id or "")
            owners[key] = owner
        known = {key for key, _, _ in cols.rows(cols.meta, ids=list(owners), documents=False)}
        new = {k: v for k, v in owners.items() if k not in known}
        if new:
            cols.upsert_meta(new, action="register context logs", wrote="")

    def write(self, entries: Sequence[tuple[LogEntry, str]]) -> None:
        """Upsert one session's entries with their documents, in one Chroma call."""
        namespace, session_id = entries[0][0].namespace, entries[0][0].session_id
        cols = self._collections
        partition = log_partition(cols.name, namespace, session_id)
        cols.run(partition, functools.partial(self._upsert, entries), create=True)

    def _upsert(self, entries: Sequence[tuple[LogEntry, str]], collection: Any) -> None:
        keys = [entry.key for entry, _ in entries]
        self._collections.conn.call(
            "write the context log",
            functools.partial(
                collection.upsert,
                ids=keys,
                embeddings=[_VECTOR] * len(keys),
                metadatas=[_row_meta(entry, document) for entry, document in entries],
            ),
        )

    def take_back(self, entries: Sequence[LogEntry]) -> None:
        """Delete these written entries of one session's log (`ContextLogs` takes them back).

        The ``meta`` entries of their users with no record left in the log go too. The log
        itself stays, even empty: another process may be writing to it now (a new life of the
        session), and a record of one of those users written meanwhile registers them again.
        """
        namespace, session_id = entries[0].namespace, entries[0].session_id
        cols = self._collections
        partition = log_partition(cols.name, namespace, session_id)
        cols.delete_in(partition, [entry.key for entry in entries])
        users = {entry.user_id or "" for entry in entries} - self._users(partition)
        if not users:
            return
        cols.delete(cols.meta, [json_key("log", namespace, session_id, u) for u in users])
        back = users & self._users(partition)
        if back:
            self.register([entry for entry in entries if (entry.user_id or "") in back])

    def _users(self, partition: str) -> set[str]:
        """The users ("" for none) with a record in a log."""
        rows = self._collections.part_rows(partition, documents=False)
        return {_user(meta) or "" for _, _, meta in rows}

    def retain(self, namespace: str, session_id: str, retain: int) -> None:
        """Drop the oldest records of a session's log beyond ``retain`` (a count, then ids)."""
        cols = self._collections
        partition = log_partition(cols.name, namespace, session_id)
        count = cols.run(partition, lambda c: int(cols.conn.call("count", c.count))) or 0
        if count > retain:
            keys = sorted(self._keys(partition))
            cols.delete_in(partition, keys[: len(keys) - retain])

    def _keys(self, partition: str) -> list[str]:
        cols = self._collections
        got = cols.run(
            partition, lambda c: cols.conn.call("read", functools.partial(c.get, include=[]))
        )
        return [str(key) for key in (got or {}).get("ids", [])]

    # -- reading ---------------------------------------------------------------------------
    def read(self, namespace: str, session_id: str, *, limit: int | None = None) -> list[LogRow]:
        """The stored records of a session's log, newest first (the newest ``limit``)."""
        cols = self._collections
        ns, sid = require_name("namespace", namespace), require_name("session_id", session_id)
        partition = log_partition(cols.name, ns, sid)
        if limit is None:
            rows = cols.part_rows(partition, documents=False)
        else:  # the newest keys first, then only their rows
            keys = sorted(self._keys(partition), reverse=True)[:limit]
            rows = cols.part_rows(partition, ids=keys, documents=False) if keys else []
        rows.sort(key=lambda row: row[0], reverse=True)
        return [
            LogRow(key, _unpacked(meta), _user(meta), float(meta.get("lt", 0.0)))
            for key, _, meta in rows
        ]

    def sessions(self, namespace: str, *, user_id: str | None = None) -> list[str]:
        """The sessions of a namespace (or those one user was assembled for) with a log."""
        ns = require_name("namespace", namespace)
        cols = self._collections
        # One selective clause goes to Chroma (see ctxbudget.store.keys); the rest is checked here.
        where = {"type": "log"} if user_id is None else {"uid": require_name("user_id", user_id)}
        rows = cols.rows(cols.meta, where=where, documents=False)
        return sorted(
            {str(m["sid"]) for _, _, m in rows if m.get("type") == "log" and m.get("ns") == ns}
        )

    # -- deleting (callers hold the store's lock) -------------------------------------------
    def drop(self, namespace: str, session_id: str) -> None:
        """Drop a session's log and its entries in ``meta``."""
        cols = self._collections
        cols.drop(log_partition(cols.name, namespace, session_id))
        rows = cols.rows(cols.meta, where={"sid": session_id}, documents=False)
        cols.delete(
            cols.meta,
            [k for k, _, m in rows if m.get("type") == "log" and m.get("ns") == namespace],
        )

    def drop_user(self, namespace: str, user_id: str) -> None:
        """Delete a user's records from every log; a log left with none is dropped."""
        cols = self._collections
        for session_id in self.sessions(namespace, user_id=user_id):
            partition = log_partition(cols.name, namespace, session_id)
            rows = cols.part_rows(partition, documents=False)
            mine = [key for key, _, meta in rows if _user(meta) == user_id]
            if len(mine) == len(rows):
                self.drop(namespace, session_id)
            else:
                cols.delete_in(partition, mine)
                cols.delete(cols.meta, [json_key("log", namespace, session_id, user_id)])

    def drop_naming(self, namespace: str, session_id: str, ids: Collection[str]) -> None:
        """Delete the records of a session's log that name any of ``ids`` (records deleted).

        A record names an item by its id (included or pruned) and, with ``keep_context``,
        holds the context as sent: so a deleted message's id and text stay in no record. A
        record is matched by the id as a JSON string anywhere in its document (an item's own id,
        or inside another scope's id), which may also take a record that merely quotes it: a
        log, never memory.
        """
        self.drop_quoting(namespace, session_id, quoted(ids))

    def drop_recalled(
        self,
        namespace: str,
        session_id: str,
        needles: Collection[str],
        readers: Collection[str],
        members: Collection[str] = (),
    ) -> None:
        """Delete the records holding any of ``needles`` in the logs `recalling` gives."""
        for other in self.recalling(namespace, readers, besides=session_id, members=members):
            self.drop_quoting(namespace, other, needles)

    def drop_quoting(self, namespace: str, session_id: str, needles: Collection[str]) -> None:
        """Delete the records of a session's log whose document holds any of ``needles``."""
        if not needles:
            return
        cols = self._collections
        partition = log_partition(cols.name, namespace, session_id)
        rows = cols.part_rows(partition, documents=False)
        if not rows:
            return
        doomed = [key for key, _, meta in rows if any(n in _unpacked(meta) for n in needles)]
        if len(doomed) == len(rows):
            self.drop(namespace, session_id)
        elif doomed:
            cols.delete_in(partition, doomed)

    # -- who may have recalled a session's records (callers hold the store's lock) ----------
    def readers(self, namespace: str, sessions: Collection[str]) -> dict[str, set[str]]:
        """The users who may recall each session's records elsewhere: its owner and writers.

        One read of ``meta`` (the sessions' entries and members), done before they are deleted.
        Another session recalls a session's messages and summaries for their own user only, or
        without a user for the session's owner (`ctxbudget.memory.reading.retrieval`).
        """
        found: dict[str, set[str]] = {sid: set() for sid in sessions}
        if not found:
            return found
        cols = self._collections
        where = {"sid": {"$in": sorted(found)}}
        for _, _, meta in cols.rows(cols.meta, where=where, documents=False):
            users = found.get(str(meta.get("sid")))
            if users is None or meta.get("ns") != namespace:
                continue
            if meta.get("type") == "member" and meta.get("uid"):
                users.add(str(meta["uid"]))
            elif meta.get("type") == "session" and meta.get("owner"):
                users.add(str(meta["owner"]))
        return found

    def recalling(
        self,
        namespace: str,
        readers: Collection[str],
        *,
        besides: str,
        members: Collection[str] = (),
    ) -> list[str]:
        """The sessions (not ``besides``) whose logs may quote what ``readers`` can recall.

        The logs holding records of ``readers``, and the logs without a user of the sessions
        they own (those they are members of, and ``members``: a deleted user's, whose entries
        are gone). Two reads of ``meta`` (theirs by user, then by id): the cost follows those
        users' sessions, not the store.
        """
        if not readers:
            return []
        cols = self._collections
        rows = cols.rows(cols.meta, where={"uid": {"$in": sorted(readers)}}, documents=False)
        mine = [meta for _, _, meta in rows if meta.get("ns") == namespace]
        logs = {str(m["sid"]) for m in mine if m.get("type") == "log"}
        joined = {str(m["sid"]) for m in mine if m.get("type") == "member"} | set(members)
        member = sorted(joined - logs)
        ids = [json_key("log", namespace, sid, "") for sid in member]
        ids += [session_key(namespace, sid) for sid in member]
        unowned: set[str] = set()
        owned: set[str] = set()
        for _, _, meta in cols.rows(cols.meta, ids=ids, documents=False) if ids else []:
            if meta.get("ns") != namespace:
                continue
            if meta.get("type") == "log" and not meta.get("uid"):
                unowned.add(str(meta["sid"]))
            elif meta.get("type") == "session" and meta.get("owner") in readers:
                owned.add(str(meta["sid"]))
        return sorted((logs | (unowned & owned)) - {besides})


def quoted(ids: Collection[str]) -> set[str]:
    """How each of ``ids`` appears in a log's JSON document (a JSON string, or inside one)."""
    needles = set()
    for record_id in ids:
        for text in (json.dumps(record_id), json.dumps(record_id, ensure_ascii=False)):
            needles |= {text, json.dumps(text, ensure_ascii=False)[1:-1]}
    return needles


def quoting_session(session_id: str) -> set[str]:
    """How the start of any of a session's scoped ids appears in a log's JSON document.

    A record of session ``"s1"`` recalled elsewhere is named ``ctxbudget:session:["s1","m1"]``
    (`ctxbudget.core.ids.scoped_id`); these needles are what `quoted` gives for that id up to
    the session's name and the comma after it (JSON escapes each character on its own, so an
    escaped prefix is a prefix of the escaped id), and match every record of the session.
    """
    full = scoped_id(("session", session_id), "")
    prefix = full[: len(full) - len('""]')]
    needles = set()
    for text in (json.dumps(prefix), json.dumps(prefix, ensure_ascii=False)):
        text = text[:-1]  # the closing quote: the id goes on
        needles |= {text, json.dumps(text, ensure_ascii=False)[1:-1]}
    return needles


def _row_meta(entry: LogEntry, document: str) -> dict[str, Any]:
    packed = base64.b64encode(zlib.compress(document.encode("utf-8"))).decode("ascii")
    meta: dict[str, Any] = {"lt": entry.time, "r": _PACKED + packed}
    if entry.user_id is not None:
        meta["lu"] = entry.user_id
    return meta


def _unpacked(meta: dict[str, Any]) -> str:
    """A row's document ("": none that can be read, which its reader reports)."""
    packed = meta.get("r")
    if not isinstance(packed, str) or not packed.startswith(_PACKED):
        return ""
    try:
        return zlib.decompress(base64.b64decode(packed[len(_PACKED) :])).decode("utf-8")
    except (binascii.Error, zlib.error, UnicodeDecodeError):
        return ""


def _user(meta: dict[str, Any]) -> str | None:
    user = meta.get("lu")
    return user if isinstance(user, str) else None
