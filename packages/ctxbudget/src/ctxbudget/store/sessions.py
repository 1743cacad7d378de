"""Sessions and users in ``<collection>.meta``: where each session's records live, and its stamp.

Each session has one entry (`SessionEntry`, with the `Stamp` copies of it are keyed by; both
in `ctxbudget.store.stamps`). The entry is created with the session's first write, with
Chroma's ``add`` (which keeps the first write of an id), so two processes starting one session
on a server agree on its home. Alongside: one entry per (session, user) pair, and one per user
with messages in a session of another user's partition (its ``elsewhere`` partitions).

What a session's candidates draw from beyond the session has stamps of its own (`Stamps`): one
generation per user (its user-wide pins and its messages in every session) and one per
namespace's documents, drawn again after every removal or replacement of one of their records
(`Sessions.removed`), never deleted (a user's is drawn again by `delete_user`), and named by
the digest of the user's or documents' partition, so no user id is left behind. Additions
change no stamp: a copy that lacks what was added since offers nothing that was removed.

`Sessions.route` is the one rule of which partitions a read touches: a session's home, a user's
partition and elsewhere ones, a namespace's documents, or (a read of a whole namespace) every
partition of it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from ctxbudget.store.layout import Collections
from ctxbudget.store.members import member_keys, note_members
from ctxbudget.store.partitions import (
    docs_partition,
    session_partition,
    user_partition,
    values_partition,
)
from ctxbudget.store.records import Record, json_key
from ctxbudget.store.stamps import (
    SessionEntry,
    Stamp,
    Stamps,
    entry_of,
    new_generation,
    session_key,
    stamp_key,
)

__all__ = [
    "Session",
    "SessionEntry",
    "Sessions",
    "Stamp",
    "Stamps",
    "new_generation",
    "partition_owner",
    "session_key",
]

Session = tuple[str, str]
"""A session: (namespace, session id)."""

Row = tuple[str, Any, dict[str, Any]]
"""A stored record as read back: (Chroma id, text, metadata)."""


class Sessions:
    """The session, member, user and partition entries of one store."""

    def __init__(self, collections: Collections) -> None:
        self._collections = collections

    # -- reading ---------------------------------------------------------------------------
    def entries(self, sessions: Iterable[Session]) -> dict[Session, SessionEntry]:
        """The entries of these sessions (those that have one)."""
        cols = self._collections
        ids = [session_key(ns, sid) for ns, sid in dict.fromkeys(sessions)]
        rows = cols.rows(cols.meta, ids=ids, documents=False) if ids else []
        return {(m["ns"], m["sid"]): e for _, _, m in rows if (e := _entry(m)) is not None}

    def entries_and_members(
        self, sessions: Iterable[Session], records: Iterable[Record]
    ) -> tuple[dict[Session, SessionEntry], frozenset[str]]:
        """`entries`, and which of ``records``' (session, user) pairs are noted: one read.

        The pairs go to `note_members` (``noted=``) after the write, which then reads only
        what a write to another user's session needs (the user's ``elsewhere``).
        """
        cols = self._collections
        ids = [session_key(ns, sid) for ns, sid in dict.fromkeys(sessions)]
        pairs = set(member_keys(records))
        rows = cols.rows(cols.meta, ids=[*ids, *pairs], documents=False) if ids or pairs else []
        entries = {
            (m["ns"], m["sid"]): e
            for key, _, m in rows
            if key not in pairs and (e := _entry(m)) is not None
        }
        return entries, frozenset(key for key, _, _ in rows if key in pairs)

    def entry(self, namespace: str, session_id: str) -> SessionEntry | None:
        """The entry of one session (None: it has none: no record was ever written to it)."""
        return self.entries([(namespace, session_id)]).get((namespace, session_id))

    def stamps(
        self, namespace: str, session_id: str, user_id: str | None, *, shared_values: bool = False
    ) -> Stamps:
        """The `Stamps` of a session's candidates for ``user_id`` (None: the session's owner).

        ``shared_values``: with the stamp of the namespace's shared values. One read by id (the
        user's `elsewhere` with it); a second only when ``user_id`` is None and the session has
        an owner.
        """
        cols = self._collections
        entry_id = session_key(namespace, session_id)
        docs = stamp_key(docs_partition(cols.name, namespace))
        shared = stamp_key(values_partition(cols.name, namespace, None))
        held = self._documents_key(namespace)
        ids = [entry_id, docs, held, *([shared] if shared_values else [])]
        user = None
        if user_id is not None:
            user = stamp_key(user_partition(cols.name, namespace, user_id))
            ids += [user, json_key("user", namespace, user_id)]
        found = {key: meta for key, _, meta in cols.rows(cols.meta, ids=ids, documents=False)}
        entry = _entry(found.get(entry_id))
        if user_id is None and entry is not None and entry.owner:
            user_id = entry.owner
            user = stamp_key(user_partition(cols.name, namespace, user_id))
            more = [user, json_key("user", namespace, user_id)]
            found.update((k, m) for k, _, m in cols.rows(cols.meta, ids=more, documents=False))
        stamp = None if entry is None else entry.stamp()
        elsewhere = None
        if user_id is not None:
            elsewhere = _elsewhere(found.get(json_key("user", namespace, user_id)))
        return Stamps(
            stamp,
            "" if user is None else str(found.get(user, {}).get("gen", "")),
            str(found.get(docs, {}).get("gen", "")),
            user_id,
            str(found.get(shared, {}).get("gen", "")) if shared_values else "",
            entry,
            entry_id,
            elsewhere,
            held in found,
        )

    def elsewhere(self, namespace: str, user_id: str) -> tuple[str, ...]:
        """The partitions of other owners that hold messages of this user."""
        cols = self._collections
        rows = cols.rows(cols.meta, ids=[json_key("user", namespace, user_id)], documents=False)
        return _elsewhere(rows[0][2] if rows else None)

    def entry_read(
        self, namespace: str, session_id: str, user_id: str | None
    ) -> tuple[SessionEntry | None, tuple[str, ...] | None, bool]:
        """`entry`, `elsewhere` (of ``user_id``; None: no user) and `Stamps.has_documents`.

        One read by id: what a call on a session reads of ``meta`` before anything else.
        """
        cols = self._collections
        entry_id, held = session_key(namespace, session_id), self._documents_key(namespace)
        user = None if user_id is None else json_key("user", namespace, user_id)
        ids = [entry_id, held, *([user] if user is not None else [])]
        found = {k: m for k, _, m in cols.rows(cols.meta, ids=ids, documents=False)}
        elsewhere = None if user is None else _elsewhere(found.get(user))
        return _entry(found.get(entry_id)), elsewhere, held in found

    def _documents_key(self, namespace: str) -> str:
        """The ``meta`` id of the namespace's documents partition's registration."""
        return json_key("part", docs_partition(self._collections.name, namespace))

    def route(
        self,
        namespace: str,
        session_id: str | None,
        user_id: str | None,
        kinds: Sequence[str] | None,
        elsewhere: Sequence[str] | None = None,
    ) -> list[str]:
        """The partitions a read with these filters touches (see the module docstring).

        A read of a whole namespace touches every partition of it, except one of documents
        alone (``kinds=["document"]``), which reads the namespace's documents. ``elsewhere``:
        ``user_id``'s `elsewhere` as the caller read it just before (None: read here).
        """
        name = self._collections.name
        if session_id is not None:
            entry = self.entry(namespace, session_id)
            return [] if entry is None else [entry.home]
        if user_id is not None:
            others = self.elsewhere(namespace, user_id) if elsewhere is None else sorted(elsewhere)
            return [user_partition(name, namespace, user_id), *others]
        if kinds is not None and set(kinds) <= {"document"}:
            return [docs_partition(name, namespace)]
        return self._collections.partitions(namespace)

    # -- writing ---------------------------------------------------------------------------
    def open(
        self,
        firsts: dict[Session, str | None],
        known: dict[Session, SessionEntry] | None = None,
    ) -> dict[Session, SessionEntry]:
        """The entries of these sessions, created for new ones (home: their first user's).

        ``firsts`` gives each session the user of its first record in the write (None: no
        user, so the session gets a partition of its own). ``known``: their entries as the
        caller read them under the store's lock (None: read here). A session another process
        starts after that read is not lost: its entry is added with Chroma's ``add``, which
        keeps the first write, and read back.
        """
        if known is None:
            known = self.entries(firsts)
        new = {s: user for s, user in firsts.items() if s not in known}
        if not new:
            return known
        cols = self._collections
        made = self.new_entries(new)
        entries = {session_key(*s): e.metadata(*s) for s, e in made.items()}
        keys = list(entries)
        # add() keeps an id's first write: on a shared server, the first process to start the
        # session chooses its home, and every process reads that choice back.
        for start in range(0, len(keys), cols.batch):
            chunk = keys[start : start + cols.batch]
            cols.conn.call(
                "start sessions",
                partial(
                    cols.meta.add,
                    ids=chunk,
                    embeddings=[[1.0]] * len(chunk),
                    metadatas=[entries[k] for k in chunk],
                ),
                wrote="; nothing was written",
            )
        return {**known, **self.entries(new)}

    def new_entries(self, firsts: dict[Session, str | None]) -> dict[Session, SessionEntry]:
        """Entries for new sessions, their homes created and registered.

        A session's home is the partition of its first user, else a partition of its own.
        """
        name = self._collections.name
        made: dict[Session, SessionEntry] = {}
        parts: dict[str, dict[str, str]] = {}
        for (ns, sid), user in firsts.items():
            if user is None:
                home = session_partition(name, ns, sid)
                parts[home] = {"ns": ns, "kind": "session", "owner": sid}
            else:
                home = user_partition(name, ns, user)
                parts[home] = {"ns": ns, "kind": "user", "owner": user}
            made[(ns, sid)] = SessionEntry(-1, home, user or "", 0, new_generation())
        self._collections.register(parts)
        return made

    def partition_of(self, record: Record, entries: dict[Session, SessionEntry]) -> str:
        """The partition a record is written to (its session's home, its user's, documents)."""
        name = self._collections.name
        if record.session_id is not None:
            return entries[(record.namespace, record.session_id)].home
        if record.user_id is not None:
            return user_partition(name, record.namespace, record.user_id)
        return docs_partition(name, record.namespace)

    def save(
        self, entries: dict[Session, SessionEntry], *, wrote: str, fields: tuple[str, ...] = ()
    ) -> None:
        """Write these session entries: whole, or only ``fields`` of existing ones.

        Writing only the fields that changed (``("last",)`` for a counter) leaves the others as
        they are, so a counter moved by one process never undoes another's version bump; an
        entry deleted meanwhile stays deleted.
        """
        if not entries:
            return
        cols = self._collections
        if not fields:
            cols.upsert_meta(
                {session_key(*s): e.metadata(*s) for s, e in entries.items()}, wrote=wrote
            )
            return
        keys = [session_key(*s) for s in entries]
        values = [{f: e.metadata(*s)[f] for f in fields} for s, e in entries.items()]
        for start in range(0, len(keys), cols.batch):
            cols.conn.call(
                "write session counters",
                partial(
                    cols.meta.update,
                    ids=keys[start : start + cols.batch],
                    metadatas=values[start : start + cols.batch],
                ),
                wrote=wrote,
            )

    def note_members(
        self, records: Iterable[tuple[Record, str]], noted: frozenset[str] | None = None
    ) -> None:
        """After a write of (record, partition): new (session, user) pairs, elsewhere partitions.

        ``noted``: the pairs found noted by `entries_and_members` under the write's lock (their
        entries never change once written); None: read here (`ctxbudget.store.members`).
        """
        note_members(self._collections, records, noted)

    def touched(self, rows: list[tuple[str, str, dict[str, Any]]], *, wrote: str) -> None:
        """Before these rows are deleted or replaced: new generations for their sessions.

        Their versions are bumped too, and deleted messages move their session's counter past
        them, so a deleted message's seq is never given out again in that session.
        """
        highest: dict[Session, int] = {}
        for _, _, meta in rows:
            if "sid" in meta:
                session = (str(meta["ns"]), str(meta["sid"]))
                seq = int(meta["seq"]) if meta.get("kind") == "message" and "seq" in meta else -1
                highest[session] = max(highest.get(session, -1), seq)
        entries = self.entries(highest)
        changed = {
            s: replace(
                e,
                last=max(e.last, highest[s]),
                version=e.version + 1,
                generation=new_generation(),
            )
            for s, e in entries.items()
        }
        self.save(changed, wrote=wrote, fields=("last", "ver", "gen"))

    def removed(
        self,
        rows: Iterable[Row],
        *,
        users: Iterable[tuple[str, str]] = (),
        sessions: bool = True,
    ) -> None:
        """After these rows were deleted or replaced: new stamps for what they were part of.

        Their users' and documents' stamps, and (with ``sessions``) their sessions'
        generations, drawn again after `touched` drew them before: a copy read in between (on a
        server, by another worker) has a stamp that is no longer current either. ``users``:
        (namespace, user) pairs drawn again too (`delete_user`, whatever rows it found).
        """
        name = self._collections.name
        wrote = (
            "; the records were removed, but copies kept in memory elsewhere may still offer "
            "them: repeat the call"
        )
        scopes = {stamp_key(user_partition(name, ns, uid)): ns for ns, uid in users}
        touched: set[Session] = set()
        for _, _, meta in rows:
            ns = str(meta["ns"])
            if "sid" in meta:
                touched.add((ns, str(meta["sid"])))
            if "uid" in meta:
                scopes[stamp_key(user_partition(name, ns, str(meta["uid"])))] = ns
            elif "sid" not in meta:
                scopes[stamp_key(docs_partition(name, ns))] = ns
        if sessions and touched:
            drawn = {
                s: replace(e, generation=new_generation()) for s, e in self.entries(touched).items()
            }
            self.save(drawn, wrote=wrote, fields=("gen",))
        if scopes:
            entries = {
                key: {"type": "stamp", "ns": ns, "gen": new_generation()}
                for key, ns in scopes.items()
            }
            self._collections.upsert_meta(entries, wrote=wrote)


def partition_owner(record: Record) -> dict[str, str]:
    """How the partition of a record with no session is registered: its namespace and owner."""
    if record.user_id is not None:
        return {"ns": record.namespace, "kind": "user", "owner": record.user_id}
    return {"ns": record.namespace, "kind": "docs", "owner": ""}


def _elsewhere(meta: dict[str, Any] | None) -> tuple[str, ...]:
    """The ``elsewhere`` partitions of a user's entry in ``meta`` (none: no entry)."""
    return tuple(sorted(json.loads(str((meta or {}).get("elsewhere", "[]")))))


def _entry(meta: dict[str, Any] | None) -> SessionEntry | None:
    """The session entry ``meta`` holds (None: no row, or a row of another type)."""
    return entry_of(meta) if meta is not None and "home" in meta else None
