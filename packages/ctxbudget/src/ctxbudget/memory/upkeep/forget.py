"""Forgetting: a session's conversation (`ContextMemory.clear`), a session, a user.

What goes and what stays: `clear_session` removes a session's messages and summaries and keeps
its pinned facts and tasks (unless ``pins=True``); `delete_session` removes everything of the
session; `delete_user` removes the user's sessions whole and every other record with their user
id (in a session another user started, only those). User-wide pins of other users and documents
are never touched. The session's word index (`SessionIndexes`) is dropped with what it indexed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctxbudget.memory.reading.held_indexes import SessionIndexes

if TYPE_CHECKING:
    from ctxbudget.store.chroma_store import ChromaStore

__all__ = ["clear_session", "delete_session", "delete_user"]


def clear_session(
    store: ChromaStore, namespace: str, indexes: SessionIndexes, session_id: str, *, pins: bool
) -> int:
    """Remove the session's messages and summaries (everything with ``pins``); how many."""
    if pins:
        return delete_session(store, namespace, indexes, session_id)
    found = store.find(namespace=namespace, kinds=["message", "summary"], session_id=session_id)
    if not found:
        return 0
    indexes.forget(session_id)
    store.delete([r.id for r in found], namespace=namespace, session_id=session_id)
    return len(found)


def delete_session(
    store: ChromaStore, namespace: str, indexes: SessionIndexes, session_id: str
) -> int:
    """Remove every record of the session; returns how many."""
    indexes.forget(session_id)
    return store.delete_session(namespace=namespace, session_id=session_id)


def delete_user(store: ChromaStore, namespace: str, indexes: SessionIndexes, user_id: str) -> int:
    """Remove the user's sessions whole and every other record of theirs; returns how many.

    The user's sessions are those the user started (also when none of their records is left
    there: the session's entry names them), and those without an owner that hold a record of
    theirs. A session another user started keeps everything but this user's records and the
    summaries quoting them: that user's own messages, pins and summaries are theirs (it went
    whole before 2026-11-29).
    """
    removed = 0
    indexes.forget()
    for session in store.list_sessions(namespace=namespace, user_id=user_id, holding=False):
        stamp = store.session_stamp(namespace=namespace, session_id=session)
        if stamp is None or (stamp.owner and stamp.owner != user_id):
            continue  # gone, or another user's: only this user's records go, below
        if not stamp.owner and not store.find(
            namespace=namespace, session_id=session, user_id=user_id
        ):
            continue  # no owner and nothing of theirs left: nothing ties it to them
        removed += store.delete_session(namespace=namespace, session_id=session)
    return removed + store.delete_user(namespace=namespace, user_id=user_id)
