"""Sequence numbers: each session's messages get ``seq`` 0, 1, 2... in insertion order.

Within a process, writes to a store (same path or URL and collection) are serialized by one lock
(`ctxbudget.store.connection.store_lock`). An embedded Chroma belongs to one process (a Chroma
limitation), so the lock is enough there. A server may be shared by several processes, which no
lock here serializes: on a server each seq is also claimed with an entry in
``<collection>.meta`` that only the first writer gets (Chroma's ``add`` ignores an id it already
has), and a writer that loses a claim takes the next seq. Seqs are then unique across
processes; they stay dense unless a write fails after its claim, and the order between
processes is the order of their claims. The records are the truth; the session counter is only
a starting point, and a deleted message's seq is not given out again.

The session counters are part of the session entries in ``<collection>.meta``
(`ctxbudget.store.sessions`); the messages are read in the session's home partition.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from functools import partial
from typing import Any

from ctxbudget.errors import StoreError
from ctxbudget.store.keys import address, seq_keys
from ctxbudget.store.layout import Collections
from ctxbudget.store.records import json_key
from ctxbudget.store.sessions import SessionEntry

__all__ = [
    "AHEAD",
    "COUNTER_LAG",
    "Sequences",
    "is_message_of",
    "messages_from",
    "session_where",
]

_CLAIM_ROUNDS = 100
# A session's stored last seq may trail the truth by this much (a write saved per message); the
# range read in `recent` has no upper bound and `last_seq` looks past it, so both stay exact.
COUNTER_LAG = 16


AHEAD = 2 * COUNTER_LAG
"""Seqs read at a time past a session's counter (see `messages_from`): one read, unless the
counter trails by more than it may (writers of several processes on a server)."""


def session_where(namespace: str, session_id: str) -> dict[str, Any]:
    """The ``where`` of a session's messages, on its selective key (`ctxbudget.store.keys`)."""
    return {"at": address(namespace, ("session", session_id), "message")}


def is_message_of(meta: dict[str, Any], namespace: str, session_id: str) -> bool:
    """Whether a row's metadata is a message of this session."""
    return (
        meta.get("kind") == "message"
        and meta.get("ns") == namespace
        and meta.get("sid") == session_id
        and "seq" in meta
    )


def messages_from(
    cols: Collections,
    partition: str,
    namespace: str,
    session_id: str,
    start: int,
    top: int,
    vectors: bool,
    extra: dict[str, Any] | None = None,
) -> list[tuple[str, str, dict[str, Any], Any]]:
    """The rows of a session's messages with seq ``start`` and up, and of ``extra`` (once).

    Reads seqs ``start``..``top`` - 1 by their keys (`keys.seq_keys`), then `AHEAD` more at a
    time while the newest block read is more than half full: messages past a counter are
    numbered densely, so a block less than half full ends them. Rows are (Chroma id, text,
    metadata, vector: a float32 array if ``vectors``, else None).
    """
    rows: list[tuple[str, str, dict[str, Any], Any]] = []
    low = start
    while True:
        where: dict[str, Any] = {"sk": {"$in": seq_keys(namespace, session_id, range(low, top))}}
        if extra is not None and not rows:
            where = {"$or": [where, extra]}
        if vectors:
            got = cols.part_vectors(partition, where)
        else:
            got = [(k, d, m, None) for k, d, m in cols.part_rows(partition, where=where)]
        rows += got
        seqs = [int(m["seq"]) for _, _, m, _ in got if is_message_of(m, namespace, session_id)]
        if not seqs or max(seqs) < top - AHEAD // 2:
            return rows
        low, top = top, top + AHEAD


class Sequences:
    """Numbering one store's messages, in the home partition of each session."""

    def __init__(self, collections: Collections) -> None:
        self._collections = collections

    def last_seq(self, namespace: str, session_id: str, entry: SessionEntry) -> int:
        """The highest seq given out in a session, from its counter and the messages past it."""
        # The counter is a hint; messages past it (a failed counter write, another process) win.
        start = entry.last + 1
        rows = messages_from(
            self._collections, entry.home, namespace, session_id, start, start + AHEAD, False
        )
        return max([entry.last, *(int(m["seq"]) for _, _, m, _ in rows)])

    def take(
        self, namespace: str, session_id: str, entry: SessionEntry, count: int
    ) -> Sequence[int]:
        """The next ``count`` seqs of a session (claimed, on a server)."""
        start = self.last_seq(namespace, session_id, entry) + 1
        if self._collections.conn.shared:
            return self._claim(namespace, session_id, start, count)
        return range(start, start + count)

    def _claim(self, namespace: str, session_id: str, start: int, count: int) -> list[int]:
        # Several processes may number one session of a shared server at once. Chroma's add()
        # keeps the first write of an id and ignores later ones, so a claim entry per seq works
        # as compare-and-set: whoever reads its own token back owns the seq.
        cols = self._collections
        token = uuid.uuid4().hex
        owned: list[int] = []
        candidate = start
        for _ in range(_CLAIM_ROUNDS):
            wanted = list(range(candidate, candidate + count - len(owned)))
            ids = [json_key("seq", namespace, session_id, str(seq)) for seq in wanted]
            claims = [
                {"type": "claim", "ns": namespace, "sid": session_id, "seq": seq, "owner": token}
                for seq in wanted
            ]
            cols.conn.call(
                "claim seqs",
                partial(cols.meta.add, ids=ids, embeddings=[[1.0]] * len(ids), metadatas=claims),
            )
            rows = cols.rows(cols.meta, ids=ids, documents=False)
            owners = {key: meta.get("owner") for key, _, meta in rows}
            owned += [seq for seq, key in zip(wanted, ids, strict=True) if owners.get(key) == token]
            if len(owned) == count:
                return owned
            candidate = wanted[-1] + 1
        msg = (
            f"could not claim {count} seqs in session {session_id!r} after {_CLAIM_ROUNDS} "
            "rounds: other processes keep writing to it; retry the add"
        )
        raise StoreError(msg)
