"""Deleting records: by id in one scope, a whole session, or everything of a user.

Deletes hold the store's lock like writes do, and read only the partitions that can hold what
they delete. Session entries survive a `delete` (their counter moved past the deleted messages
first, so a seq is never given out twice in a session, and their version bumped so processes
keeping the session in memory read it again); they go with the last records of their session
(`delete_session`, `delete_user`), and a partition left empty by them is deleted. Every delete
draws new stamps for the users and documents whose records it removed, after removing them
(`Sessions.removed`). A session's context log (`ctxbudget.store.context_log`) goes with the
session, and a user's records in other sessions' logs with the user; a deleted document chunk
leaves the documents' entity index (`ctxbudget.store.doc_entities`); a user's keyed values
(`ctxbudget.store.values`) go with the user. Deleting or replacing some of a session's messages,
with what quotes them, is `ctxbudget.store.message_edits`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ctxbudget.core.numbers import shown
from ctxbudget.errors import StoreInputError
from ctxbudget.store.context_log import ContextLogs
from ctxbudget.store.doc_entities import DocEntities
from ctxbudget.store.keys import address, matches, where_keys
from ctxbudget.store.layout import Collections, Row, scoped_keys
from ctxbudget.store.message_edits import MessageEdits
from ctxbudget.store.partitions import session_partition, user_partition
from ctxbudget.store.records import KINDS, USER_PREFIX, Record, Scope, json_key, require_name
from ctxbudget.store.sessions import Sessions
from ctxbudget.store.values import ValueStore
from ctxbudget.store.writes import Writer, check_batch

AUTHORS = USER_PREFIX + "_authors"  # a summary's users, `summarize._author`

__all__ = ["DeleteMethods", "Deleter"]

_RECALLED = frozenset({"message", "summary"})  # what other sessions recall of a session


class Deleter:
    """Deletes one store's records (`ChromaStore`'s deleting methods)."""

    def __init__(self, collections: Collections, sessions: Sessions, values: ValueStore) -> None:
        self._collections = collections
        self._sessions = sessions
        self._values = values
        self.logs = ContextLogs(collections)
        """The store's context logs, deleted with their sessions and users."""
        self.entities = DocEntities(collections)
        """The documents' entity index; a deleted chunk is taken out of it."""
        self.edits = MessageEdits(collections, sessions, self.logs)
        """Deleting and replacing some messages of a session."""

    def delete(
        self, scope: Scope, keys: list[str], *, namespace: str, kinds: Sequence[str] | None = None
    ) -> int:
        """`ChromaStore.delete` of these Chroma ids in one scope; how many existed.

        Raises:
            StoreInputError: an unknown kind.
        """
        allowed: set[str] | None = None
        if kinds is not None:
            allowed = {kinds} if isinstance(kinds, str) else set(kinds)
            if not allowed <= KINDS:
                msg = f"kinds {sorted(allowed - KINDS)} are unknown; use some of {sorted(KINDS)}"
                raise StoreInputError(msg)
        cols = self._collections
        kind, name = scope
        with cols.conn.lock:
            partitions = self._sessions.route(
                namespace,
                name if kind == "session" else None,
                name if kind == "user" else None,
                ["document"] if kind == "collection" else None,
            )
            if kind == "user":  # a user's own records (user-wide pins) are in its partition
                partitions = partitions[:1]
            deleted = 0
            entries: list[Row] | None = None  # the session's entries in meta, read once
            for partition in partitions:
                rows = cols.part_rows(partition, ids=keys, documents=False)
                if allowed is not None:
                    rows = [row for row in rows if row[2].get("kind") in allowed]
                if kind == "session":  # a replace of one elsewhere sees it (message_edits)
                    messages = [row for row in rows if row[2].get("kind") == "message"]
                    if messages:
                        if entries is None:
                            entries = self.edits.session_entries(name)
                        self.edits.tombstones.sweep(namespace, name, entries)
                        self.edits.tombstones.record(namespace, name, messages)
                self._sessions.touched(rows, wrote="; nothing was deleted")
                cols.delete_in(partition, [key for key, _, _ in rows])
                deleted += len(rows)
                if kind == "collection" and rows:
                    chunks = [(name, str(json.loads(key)[-1])) for key, _, _ in rows]
                    self.entities.remove(namespace, chunks)
                self._sessions.removed(rows)
                if kind == "session" and rows:  # its log's records naming them go too
                    ids = [str(m["rid"]) for _, _, m in rows if "rid" in m]
                    self.logs.delete_naming(namespace, name, ids)
                    # Other sessions recall messages and summaries (never a session's pins).
                    recallable = [
                        str(m["rid"])
                        for _, _, m in rows
                        if "rid" in m and m.get("kind") in _RECALLED
                    ]
                    entry = self._sessions.entry(namespace, name) if recallable else None
                    if entry is not None:  # and other logs' records that recalled them
                        self.edits.forget_recalled(
                            entry, namespace, name, recallable, entries=entries
                        )
        return deleted

    def delete_session(self, *, namespace: str, session_id: str) -> int:
        """`ChromaStore.delete_session`: every record of a session and its entries."""
        ns = require_name("namespace", namespace)
        sid = require_name("session_id", session_id)
        cols = self._collections
        with cols.conn.lock:
            entry = self._sessions.entry(ns, sid)
            readers = self.logs.readers(ns, [sid])[sid]  # before its entries go
            keys: list[str] = []
            if entry is not None:
                # First: a replace elsewhere that reads a message before the delete and writes
                # after it sees this mark (ctxbudget.store.tombstones); it goes with the entries.
                self.edits.tombstones.record_session(ns, sid)
                rows = cols.part_rows(
                    entry.home, where=where_keys(ns, sid, None, None, None), documents=False
                )
                rows = [row for row in rows if matches(row[2], ns, sid, None, None, None)]
                keys = [key for key, _, _ in rows]
                cols.delete_in(entry.home, keys)
                if entry.home == session_partition(cols.name, ns, sid):
                    cols.drop(entry.home)
                # Its users' other sessions; its own entry goes below.
                self._sessions.removed(rows, sessions=False)
            cols.delete(cols.meta, _session_entries(cols, ns, sid))
            self.logs.delete_session(ns, sid, readers=readers)
        return len(keys)

    def delete_user(self, *, namespace: str, user_id: str) -> int:
        """`ChromaStore.delete_user`: every record of a user, and what is left without records.

        Reads the user's partition, the partitions its entry lists as elsewhere and the homes of
        every session it is a member of; sessions left without records lose their entries, and
        the user's partition is deleted once it holds no records.
        """
        ns = require_name("namespace", namespace)
        uid = require_name("user_id", user_id)
        cols = self._collections
        mine = user_partition(cols.name, ns, uid)
        with cols.conn.lock:
            # Only the selective clause goes to Chroma (see ctxbudget.store.keys); the rest here.
            members = [
                row
                for row in cols.rows(cols.meta, where={"uid": uid}, documents=False)
                if row[2].get("type") == "member" and row[2].get("ns") == ns
            ]
            sessions = {str(m["sid"]) for _, _, m in members}
            known = self._sessions.entries((ns, s) for s in sessions)
            homes = {e.home for e in known.values()}
            partitions = [mine, *sorted((homes | set(self._sessions.elsewhere(ns, uid))) - {mine})]
            user_scope = where_keys(ns, None, uid, None, None)
            deleted = 0
            named: dict[str, list[str]] = {}  # session: the records deleted from it
            for partition in partitions:
                rows = cols.part_rows(partition, where=user_scope, documents=False)
                rows = [row for row in rows if matches(row[2], ns, None, uid, None, None)]
                homed = {sid for (_, sid), e in known.items() if e.home == partition}
                rows += self._quoting(partition, ns, uid, rows, homed)
                sessions |= {str(m["sid"]) for _, _, m in rows if "sid" in m}
                for _, _, m in rows:
                    if "sid" in m and "rid" in m:
                        named.setdefault(str(m["sid"]), []).append(str(m["rid"]))
                self._sessions.touched(rows, wrote="; nothing was deleted")
                # A replace of one of its messages elsewhere sees these (store.tombstones).
                messages = [r for r in rows if r[2].get("kind") == "message" and "sid" in r[2]]
                self.edits.tombstones.record_rows(ns, messages)
                cols.delete_in(partition, [key for key, _, _ in rows])
                deleted += len(rows)
            readers = self.logs.readers(ns, sessions)  # before their entries go
            cols.delete(cols.meta, [key for key, _, _ in members])
            cols.delete(cols.meta, [json_key("user", ns, uid)])
            entries = self._sessions.entries((ns, s) for s in sessions)
            gone: list[str] = []
            for sid in sorted(sessions):
                entry = entries.get((ns, sid))
                session = where_keys(ns, sid, None, None, None)
                if entry is None or not cols.part_rows(entry.home, where=session, documents=False):
                    gone.append(sid)
                    cols.delete(cols.meta, _session_entries(cols, ns, sid))
                    if entry is not None and entry.home != mine:
                        cols.drop_if_empty(entry.home)
            cols.drop_if_empty(mine)
            self._values.drop_user(ns, uid)  # the user's keyed values (ctxbudget.store.values)
            self._sessions.removed([], users=[(ns, uid)])
            # Another user's session keeps its log, not the records naming theirs (``named``).
            self.logs.delete_user(ns, uid, sessions=gone, readers=readers, named=named)
        return deleted

    def _quoting(
        self,
        partition: str,
        namespace: str,
        user_id: str,
        rows: list[tuple[str, str, dict[str, Any]]],
        sessions: set[str],
    ) -> list[tuple[str, str, dict[str, Any]]]:
        """The summaries in ``partition`` that quote ``user_id``, not among ``rows``.

        A summary lists the users whose words it holds (``_authors``, `summarize._authors`;
        one of several users' carries no user); one stored before 2026-11-29 lists none and is
        matched by the messages it covers among ``rows``. Read in ``sessions`` (the user's
        there) and those of ``rows``.
        """
        quoted: dict[str, set[str]] = {sid: set() for sid in sessions}
        for _, _, meta in rows:
            if meta.get("kind") == "message" and "sid" in meta:
                quoted.setdefault(str(meta["sid"]), set()).add(str(meta["rid"]))
        if not quoted:
            return []
        taken = {key for key, _, _ in rows}
        at = [address(namespace, ("session", sid), "summary") for sid in sorted(quoted)]
        found: list[tuple[str, str, dict[str, Any]]] = []
        # One read for all of them (the selective key only, see ctxbudget.store.keys).
        for row in self._collections.part_rows(
            partition, where={"at": {"$in": at}}, documents=False
        ):
            key, _, meta = row
            ids = quoted.get(str(meta.get("sid")))
            if ids is None or key in taken:
                continue
            if not matches(meta, namespace, str(meta["sid"]), None, None, ["summary"]):
                continue
            authors = meta.get(AUTHORS)
            if authors is not None:
                if user_id in json.loads(str(authors)):
                    found.append(row)
            elif ids & set(json.loads(str(meta.get("summary_of", "[]")))):
                found.append(row)
        return found


def _session_entries(cols: Collections, namespace: str, session_id: str) -> list[str]:
    """The ids of a session's entries in ``meta`` (its counter, members and seq claims)."""
    rows = cols.rows(cols.meta, where={"sid": session_id}, documents=False)
    return [key for key, _, meta in rows if meta.get("ns") == namespace]


class DeleteMethods:
    """`ChromaStore`'s deleting methods (one of its bases), each a call of its `Deleter`."""

    _deleter: Deleter
    _writer: Writer  # ChromaStore's

    def delete(
        self,
        ids: Sequence[str],
        *,
        namespace: str,
        session_id: str | None = None,
        user_id: str | None = None,
        collection: str | None = None,
        kinds: Sequence[str] | None = None,
    ) -> int:
        """Delete records by id in one scope (as `get` names it); returns how many existed.

        A record with the same id in another scope is never touched. With ``kinds``, only
        records of those kinds are deleted (``kinds=["pinned"]``: pins only). Session counters
        are kept: a deleted message's seq is not given out again.

        Raises:
            StoreInputError: no scope or more than one, a malformed id or an unknown kind.
        """
        scope, keys = scoped_keys("delete", ids, namespace, session_id, user_id, collection)
        return self._deleter.delete(scope, keys, namespace=namespace, kinds=kinds)

    def delete_session(self, *, namespace: str, session_id: str) -> int:
        """Delete every record of a session and its counter; returns how many records."""
        return self._deleter.delete_session(namespace=namespace, session_id=session_id)

    def delete_user(self, *, namespace: str, user_id: str) -> int:
        """Delete every record of a user (messages, pinned, summaries...); returns how many.

        Sessions left without records lose their counters too; the user's keyed values
        (`ContextMemory.put_value`) go as well (not counted).
        """
        return self._deleter.delete_user(namespace=namespace, user_id=user_id)

    def delete_messages(self, ids: Sequence[str], *, namespace: str, session_id: str) -> int:
        """Delete messages of one session by id; returns how many existed.

        The session's summaries that cover one of them and its context log's records naming
        one go too (`ctxbudget.store.message_edits`). Unknown ids are not counted.

        Raises:
            StoreInputError: ``ids`` a str, a malformed id, or an id of the session's that is
                not a message (a pinned fact, task or summary). Nothing was deleted.
        """
        if not isinstance(ids, Sequence):  # a generator read twice would delete nothing
            msg = f"ids must be a list of message ids, got {shown(ids)}; nothing was deleted"
            raise StoreInputError(msg)
        scoped_keys("delete", ids, namespace, session_id, None, None)  # checks ids and names
        wanted = list(dict.fromkeys(ids))
        return self._deleter.edits.delete(namespace, session_id, wanted)

    def replace_message(self, record: Record) -> Record:
        """Store a message over the one with its id in its session, at its seq; the stored one.

        ``record`` is checked as by `add` (seq None: the stored message's is kept); the same
        content again changes nothing. What quotes the old text (summaries covering it, log
        records naming it) goes (`ctxbudget.store.message_edits`).

        Raises:
            StoreInputError: a malformed record or one not a session's message, no message
                with its id in its session, a record of another kind under it, another user
                than the stored message's, or the message was deleted (by another process)
                while it was replaced (`ctxbudget.store.tombstones`). Nothing was changed.
        """
        check_batch([record])
        if record.kind != "message" or record.session_id is None:
            msg = (
                f"replace_message takes a message of a session, got a {record.kind} record "
                f"{record.id!r}; nothing was changed"
            )
            raise StoreInputError(msg)
        return self._deleter.edits.replace(self._writer, record)
