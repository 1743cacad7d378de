"""`ContextLogs`' deletes: a deleted session's, user's or message's records leave every log.

One of `ContextLogs`' bases (`ctxbudget.store.context_log` describes the logs, their queue and
why deletes hold the store's lock). The store's `Deleter` calls these holding that lock. A
deleted record may have been recalled in other sessions' logs (named by its scoped id, quoted
with ``keep_context``): only the logs of the users who can recall it are read
(`LogPartitions.recalling`), and matching entries still queued, in this store's queue and its
siblings' (`ContextLogs._discard`), are never written.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Collection, Mapping, Sequence

from ctxbudget.core.ids import scoped_id
from ctxbudget.store.layout import Collections
from ctxbudget.store.log_partitions import LogEntry, LogPartitions, quoted, quoting_session

__all__ = ["LogDeletes", "built"]

logger = logging.getLogger("ctxbudget.store.context_log")


class LogDeletes:
    """`ContextLogs`' deletes (one of its bases): logs, records and queued entries dropped."""

    _collections: Collections
    _parts: LogPartitions

    def _discard(self, which: Callable[[LogEntry], bool]) -> None:
        """Drop the queued entries ``which`` picks, here and in this store's siblings."""
        raise NotImplementedError  # pragma: no cover - ContextLogs defines it

    def readers(self, namespace: str, sessions: Collection[str]) -> dict[str, set[str]]:
        """`LogPartitions.readers`: read before the sessions' entries are deleted."""
        return self._parts.readers(namespace, sessions)

    def delete_session(
        self,
        namespace: str,
        session_id: str,
        *,
        readers: Collection[str] = (),
        members: Collection[str] = (),
    ) -> None:
        """Drop a session's log, its entries in ``meta`` and what is queued for it.

        With ``readers`` (`readers`), other logs' records that recalled any record of the
        session go too, queued ones included (`delete_recalling`, for all of its ids at once).
        """
        with self._collections.conn.lock:
            self._discard(lambda e: (e.namespace, e.session_id) == (namespace, session_id))
            self._parts.drop(namespace, session_id)
            needles = quoting_session(session_id)
            self._drop_recalling(namespace, session_id, needles, readers, members)

    def delete_user(
        self,
        namespace: str,
        user_id: str,
        *,
        sessions: Sequence[str] = (),
        readers: Mapping[str, Collection[str]] | None = None,
        named: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        """Drop the user's records in every log, and the logs of ``sessions`` (gone with them).

        A log left with no record is dropped with its entries in ``meta``; the records naming
        ``named`` (deleted from sessions that stay) go (`delete_naming`). With ``readers`` (of
        the user's sessions), so do other logs' records that recalled a record of ``sessions``
        or ``named`` (`delete_session`, `delete_recalling`), after the user's own.
        """
        readers = readers or {}
        with self._collections.conn.lock:
            self._discard(lambda e: e.namespace == namespace and e.user_id == user_id)
            self._parts.drop_user(namespace, user_id)
            for sid in sessions:
                self.delete_session(namespace, sid, readers=readers.get(sid, ()), members=readers)
            for sid, ids in (named or {}).items():
                if sid not in sessions:
                    self.delete_naming(namespace, sid, ids)
                    self.delete_recalling(namespace, sid, ids, readers.get(sid, ()), readers)

    def delete_naming(self, namespace: str, session_id: str, ids: Sequence[str]) -> None:
        """Drop the records of a session's log that name records deleted from it (``ids``).

        Entries still queued for the session are discarded: an assembly that held them must not
        be written after the delete (the writer's generation check catches another process's).
        """
        if not ids:
            return
        with self._collections.conn.lock:
            self._discard(lambda e: (e.namespace, e.session_id) == (namespace, session_id))
            self._parts.drop_naming(namespace, session_id, ids)

    def delete_recalling(
        self,
        namespace: str,
        session_id: str,
        ids: Sequence[str],
        readers: Collection[str],
        members: Collection[str] = (),
    ) -> None:
        """Drop the records of other sessions' logs that recalled these messages of a session.

        A session's message recalled in another session of its user's is named there by its
        scoped id (``ctxbudget:session:["s","m1"]``), and quoted with ``keep_context``. Only
        the logs of ``readers`` (the users who can recall from the session: its owner and
        those who wrote in it) are read, and the logs without a user of the sessions they own
        (`LogPartitions.recalling`, with ``members``); matching queued entries are discarded.
        """
        if ids:
            needles = quoted([scoped_id(("session", session_id), i) for i in ids])
            self._drop_recalling(namespace, session_id, needles, readers, members)

    def _drop_recalling(
        self,
        ns: str,
        sid: str,
        needles: Collection[str],
        readers: Collection[str],
        members: Collection[str],
    ) -> None:
        if needles and readers:
            with self._collections.conn.lock:
                self._discard(functools.partial(_quotes, ns, sid, needles))
                self._parts.drop_recalled(ns, sid, needles, readers, members)


def _quotes(namespace: str, session_id: str, needles: Collection[str], entry: LogEntry) -> bool:
    """Whether an entry of another session of the namespace holds any of ``needles``."""
    other = entry.namespace == namespace and entry.session_id != session_id
    return other and any(n in built(entry) for n in needles)


def built(entry: LogEntry) -> str:
    """An entry's document, as the writer stores it ("" for a record that fails to build)."""
    try:
        return entry.document()
    except (ValueError, TypeError, KeyError) as exc:  # a bug in the record: skip, say so
        logger.error("context log entry of session %r not built: %s", entry.session_id, exc)
        return ""
