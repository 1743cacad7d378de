"""Deleting records: by id in one scope, a whole session, or everything of a user.

Deletes hold the store's lock like writes do. Session counters survive a `delete` (moved past
the deleted messages first, so a seq is never given out twice in a session); they go with the
last records of their session (`delete_session`, `delete_user`).
"""

from __future__ import annotations

from collections.abc import Sequence

from ctxbudget.errors import StoreInputError
from ctxbudget.store.filters import all_of
from ctxbudget.store.layout import Collections
from ctxbudget.store.records import KINDS, require_name
from ctxbudget.store.sequences import Sequences

__all__ = ["Deleter"]


class Deleter:
    """Deletes one store's records (`ChromaStore`'s deleting methods)."""

    def __init__(self, collections: Collections, sequences: Sequences) -> None:
        self._collections = collections
        self._sequences = sequences

    def delete(self, keys: list[str], *, kinds: Sequence[str] | None = None) -> int:
        """`ChromaStore.delete` of these Chroma ids (`layout.scoped_keys`); how many existed.

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
        with cols.conn.lock:
            rows = cols.rows(cols.records, ids=keys, documents=False)
            if allowed is not None:
                rows = [row for row in rows if row[2].get("kind") in allowed]
            self._sequences.remember(rows)
            cols.delete(cols.records, [key for key, _, _ in rows])
        return len(rows)

    def delete_session(self, *, namespace: str, session_id: str) -> int:
        """`ChromaStore.delete_session`: every record of a session and its counter."""
        scope = all_of(
            [
                {"ns": require_name("namespace", namespace)},
                {"sid": require_name("session_id", session_id)},
            ]
        )
        cols = self._collections
        with cols.conn.lock:
            keys = cols.ids(cols.records, scope)
            cols.delete(cols.records, keys)
            cols.delete(cols.meta, cols.ids(cols.meta, scope))
        return len(keys)

    def delete_user(self, *, namespace: str, user_id: str) -> int:
        """`ChromaStore.delete_user`: every record of a user, and counters left without records."""
        ns = require_name("namespace", namespace)
        uid = require_name("user_id", user_id)
        cols = self._collections
        with cols.conn.lock:
            rows = cols.rows(
                cols.records, where=all_of([{"ns": ns}, {"uid": uid}]), documents=False
            )
            members = cols.rows(
                cols.meta,
                where=all_of([{"type": "member"}, {"ns": ns}, {"uid": uid}]),
                documents=False,
            )
            sessions = {m["sid"] for _, _, m in rows if "sid" in m}
            sessions |= {m["sid"] for _, _, m in members}
            self._sequences.remember(rows)
            cols.delete(cols.records, [key for key, _, _ in rows])
            cols.delete(cols.meta, [key for key, _, _ in members])
            for sid in sorted(sessions):
                scope = all_of([{"ns": ns}, {"sid": sid}])
                if not cols.ids(cols.records, scope, limit=1):
                    cols.delete(cols.meta, cols.ids(cols.meta, scope))
        return len(rows)
