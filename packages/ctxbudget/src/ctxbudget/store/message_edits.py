"""Editing one session's messages: deleting some by id, replacing one in its place.

What a message leaves behind goes with its old text: its vector and stored token counts (in
its record), the session's summaries that cover it (they quote it; `summarize` folds later
stretches only, so the messages stand for that stretch from then on), the records of the
session's context log that name it (`ContextLogs.delete_naming`, which also discards queued
ones), and the records of other sessions' logs that recalled it there (named by its scoped id,
and quoted with ``keep_context``: `ContextLogs.delete_recalling`, over the logs of the users who
can recall it). The session's generation is drawn before the change and again after it
(`Sessions.touched`, `Sessions.removed`), and its users' stamps after: every copy kept in memory
(a `SessionIndex`, its entities, the LangChain middleware's candidates) is read again by its
next call, in any object, process or worker. A replaced message keeps its seq; a deleted one's
seq is never given out again. Only the named session's records are read or changed (besides
those logs): a message with the same id in another session, or of another user's session, is
another record.

A delete and a replace of one message in two processes of one Chroma server (whose locks do not
serialize them) end with the message deleted: the delete writes a tombstone before it deletes,
the replace reads it after it writes and undoes its write if there is one
(`ctxbudget.store.tombstones`, which says why that is sound).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ctxbudget.errors import StoreInputError
from ctxbudget.store.keys import address, matches
from ctxbudget.store.layout import Collections, Row
from ctxbudget.store.partitions import session_partition
from ctxbudget.store.records import Record, decode_record, record_key, same_content
from ctxbudget.store.sessions import Sessions
from ctxbudget.store.stamps import SessionEntry
from ctxbudget.store.tombstones import Tombstones
from ctxbudget.store.writes import Vanished

if TYPE_CHECKING:
    from ctxbudget.store.context_log import ContextLogs
    from ctxbudget.store.writes import Writer

__all__ = ["MessageEdits"]

_NOTHING = "; nothing was changed"


class MessageEdits:
    """Deletes and replaces messages of one session (`ChromaStore.delete_messages`...)."""

    def __init__(self, collections: Collections, sessions: Sessions, logs: ContextLogs) -> None:
        self._collections = collections
        self._sessions = sessions
        self._logs = logs
        self.tombstones = Tombstones(collections)
        """The tombstones of deleted messages, read by replaces in other processes."""

    def delete(self, namespace: str, session_id: str, ids: list[str]) -> int:
        """Delete these messages of the session and what quotes them; how many existed.

        Raises:
            StoreInputError: an id names a record of the session that is not a message (a
                pinned fact, a task, a summary); nothing was deleted.
        """
        cols = self._collections
        keys = [record_key(namespace, ("session", session_id), i) for i in ids]
        with cols.conn.lock:
            entry = self._sessions.entry(namespace, session_id)
            if entry is None or not keys:
                return 0
            rows = cols.part_rows(entry.home, ids=keys, documents=False)
            rows = [r for r in rows if matches(r[2], namespace, session_id, None, None, None)]
            others = sorted(str(m["rid"]) for _, _, m in rows if m.get("kind") != "message")
            if others:
                msg = (
                    f"ids {others} of session {session_id!r} are not messages (pinned facts, "
                    "tasks or summaries): delete_messages deletes messages only; unpin a "
                    "pinned fact with unpin(id, session_id=...); nothing was deleted"
                )
                raise StoreInputError(msg)
            if not rows:
                return 0
            entries = self.session_entries(session_id)  # its members, for _readers; its tombstones
            self.tombstones.record(namespace, session_id, rows)  # before the delete
            self._forget(entry, namespace, session_id, rows, delete=True, entries=entries)
            self.tombstones.sweep(namespace, session_id, entries)
        return len(rows)

    def replace(self, writer: Writer, record: Record) -> Record:
        """Store ``record`` over the session's message with its id, in its place; the stored one.

        ``record`` is a checked message of a session (``seq`` None). The stored message must
        exist and be one message of that session; ``record.user_id`` must be its user. The same
        content again changes nothing.

        Raises:
            StoreInputError: no such message in the session, a record of another kind under
                that id, or another user than the stored message's; or it was deleted (in
                another process) while it was replaced, and the replacement was deleted too.
                Nothing was changed.
        """
        namespace, session_id = record.namespace, str(record.session_id)
        key = record_key(namespace, ("session", session_id), record.id)
        cols = self._collections
        with cols.conn.lock:  # the store's lock is reentrant: the write below takes it too
            entry = self._sessions.entry(namespace, session_id)
            rows = [] if entry is None else cols.part_rows(entry.home, ids=[key])
            if entry is None or not rows:
                msg = (
                    f"session {session_id!r} of namespace {namespace!r} holds no message "
                    f"{record.id!r} to replace; store a new message with add_message" + _NOTHING
                )
                raise StoreInputError(msg)
            old = decode_record(rows[0][1], rows[0][2])
            if old.kind != "message":
                msg = (
                    f"{record.id!r} of session {session_id!r} is a {old.kind} record, not a "
                    "message: replace_message replaces messages only" + _NOTHING
                )
                raise StoreInputError(msg)
            if old.user_id != record.user_id:
                msg = (
                    f"message {record.id!r} of session {session_id!r} was stored "
                    f"{_by(old.user_id)}, not {_by(record.user_id)}: a replacement keeps its "
                    "message's user (delete it and add a new message to change it)" + _NOTHING
                )
                raise StoreInputError(msg)
            if same_content(record, old):
                return old
            deleted = (
                f"replace_message of {record.id!r}: message {record.id!r} of session "
                f"{session_id!r} was deleted while it was replaced (by another process or "
                "store), so the replacement was not kept; add it again with add_message if "
                "it is still wanted" + _NOTHING
            )
            try:  # deleted since the read above (its session too): nothing is written
                stored = writer.add([record], replace=True, existing=True)[0]
            except Vanished:
                raise StoreInputError(deleted) from None
            # After the write: a delete that removed the message (or its session) since the
            # read above marked it first (ctxbudget.store.tombstones).
            if self.tombstones.gone(namespace, session_id, record.id, old.seq):
                self._undo(entry, namespace, session_id, key, stored)
                raise StoreInputError(deleted)
            self._forget(entry, namespace, session_id, [rows[0]], delete=False)
        return stored

    def _undo(
        self, entry: SessionEntry, namespace: str, session_id: str, key: str, stored: Record
    ) -> None:
        """Delete the replacement just written over a message deleted meanwhile.

        Only a row with the seq it was written at: a message added again under the id since
        (a new seq) is not the replacement.
        """
        cols = self._collections
        rows = cols.part_rows(entry.home, ids=[key], documents=False)
        mine = [row for row in rows if row[2].get("seq") == stored.seq]
        if mine:
            self._forget(entry, namespace, session_id, mine, delete=True)
        own = session_partition(cols.name, namespace, session_id)
        if entry.home == own and self._sessions.entry(namespace, session_id) is None:
            cols.drop_if_empty(own)  # the session was deleted and the write made it again

    def _forget(
        self,
        entry: SessionEntry,
        namespace: str,
        session_id: str,
        rows: list[Row],
        *,
        delete: bool,
        entries: list[Row] | None = None,
    ) -> None:
        """Remove what quotes these messages' old text (and, with ``delete``, the messages).

        ``entries``: the session's entries in ``meta`` (`session_entries`), if read already.
        """
        ids = {str(meta["rid"]) for _, _, meta in rows}
        doomed = [*rows] if delete else []
        doomed += self._covering(entry.home, namespace, session_id, ids)
        if doomed:
            self._sessions.touched(doomed, wrote=_NOTHING)
            self._collections.delete_in(entry.home, [key for key, _, _ in doomed])
            self._sessions.removed(doomed)
        named = sorted(ids | {str(meta["rid"]) for _, _, meta in doomed})
        self._logs.delete_naming(namespace, session_id, named)
        self.forget_recalled(entry, namespace, session_id, named, entries=entries)

    def forget_recalled(
        self,
        entry: SessionEntry,
        namespace: str,
        session_id: str,
        ids: list[str],
        *,
        entries: list[Row] | None = None,
    ) -> None:
        """Drop other sessions' log records that recalled these records of the session."""
        rows = self.session_entries(session_id) if entries is None else entries
        readers = self._readers(entry, namespace, rows)
        self._logs.delete_recalling(namespace, session_id, ids, readers)

    def session_entries(self, session_id: str) -> list[Row]:
        """The entries in ``meta`` with this session id, of any namespace (callers check)."""
        cols = self._collections
        return cols.rows(cols.meta, where={"sid": session_id}, documents=False)

    def _readers(self, entry: SessionEntry, namespace: str, rows: list[Row]) -> set[str]:
        """The users who may recall the session's messages elsewhere: owner and writers."""
        users = {
            str(m["uid"])
            for _, _, m in rows
            if m.get("type") == "member" and m.get("ns") == namespace and m.get("uid")
        }
        return users | ({entry.owner} if entry.owner else set())

    def _covering(
        self, partition: str, namespace: str, session_id: str, ids: set[str]
    ) -> list[Row]:
        """The session's summaries that cover any of these messages (``summary_of``)."""
        if not ids:
            return []
        at = address(namespace, ("session", session_id), "summary")
        found: list[Row] = []
        for row in self._collections.part_rows(partition, where={"at": at}, documents=False):
            meta = row[2]
            if not matches(meta, namespace, session_id, None, None, ["summary"]):
                continue
            if ids & set(json.loads(str(meta.get("summary_of", "[]")))):
                found.append(row)
        return found


def _by(user: str | None) -> str:
    return "without a user" if user is None else f"by user {user!r}"
