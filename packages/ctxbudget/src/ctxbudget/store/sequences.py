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

The session counters live in ``<collection>.meta`` (`ctxbudget.store.layout`), with the
(session, user) pairs written alongside them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from functools import partial
from typing import Any

from ctxbudget.errors import StoreError
from ctxbudget.store.filters import all_of
from ctxbudget.store.layout import Collections, Row
from ctxbudget.store.records import Record, json_key

__all__ = ["Sequences", "session_where"]

_CLAIM_ROUNDS = 100
# A session's stored last seq may trail the truth by this much (a write saved per message); the
# range read in `recent` has no upper bound and `last_seq` looks past it, so both stay exact.
_COUNTER_LAG = 16


def session_where(namespace: str, session_id: str, *extra: dict[str, Any]) -> dict[str, Any]:
    """The ``where`` of a session's messages, with ``extra`` clauses (a seq range)."""
    return all_of([{"ns": namespace}, {"sid": session_id}, {"kind": "message"}, *extra])


class Sequences:
    """Numbering one store's messages, and the session counters and members that go with it."""

    def __init__(self, collections: Collections) -> None:
        self._collections = collections

    def counters(self, sessions: Iterable[tuple[str, str]]) -> dict[tuple[str, str], int]:
        """The stored last seq of these (namespace, session) pairs (those that have one)."""
        cols = self._collections
        ids = [json_key("session", ns, sid) for ns, sid in sessions]
        rows = cols.rows(cols.meta, ids=ids, documents=False)
        return {(m["ns"], m["sid"]): int(m["last"]) for _, _, m in rows}

    def last_seq(self, namespace: str, session_id: str, counter: int) -> int:
        """The highest seq given out in a session, from its counter and the messages past it."""
        # The counter is a hint; messages past it (a failed counter write, another process) win.
        cols = self._collections
        where = session_where(namespace, session_id, {"seq": {"$gt": counter}})
        rows = cols.rows(cols.records, where=where, documents=False)
        return max([counter, *(int(m["seq"]) for _, _, m in rows)])

    def take(self, namespace: str, session_id: str, counter: int, count: int) -> Sequence[int]:
        """The next ``count`` seqs of a session with this counter (claimed, on a server)."""
        start = self.last_seq(namespace, session_id, counter) + 1
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

    def update(
        self, pending: list[str], results: dict[str, Record], counters: dict[tuple[str, str], int]
    ) -> None:
        """After a write: move the counters of its sessions on, record new (session, user) pairs.

        A counter is rewritten only when it trails by `_COUNTER_LAG` or more (or is new).
        """
        cols = self._collections
        lasts: dict[tuple[str, str], int] = {}
        members: dict[str, dict[str, Any]] = {}
        for key in pending:
            record = results[key]
            if record.session_id is None:
                continue
            session = (record.namespace, record.session_id)
            last = max(lasts.get(session, -1), counters.get(session, -1))
            if record.kind == "message" and record.seq is not None:
                last = max(last, record.seq)
            lasts[session] = last
            if record.user_id is not None:
                member = {"type": "member", "ns": session[0], "sid": session[1]}
                member["uid"] = record.user_id
                members[json_key("member", *session, record.user_id)] = member
        entries = {
            json_key("session", *session): {"type": "session", "ns": ns, "sid": sid, "last": last}
            for session, last in lasts.items()
            if session not in counters or last - counters[session] >= _COUNTER_LAG
            for ns, sid in [session]
        }
        if members:
            known = {k for k, _, _ in cols.rows(cols.meta, ids=list(members), documents=False)}
            entries.update({k: v for k, v in members.items() if k not in known})
        if entries:
            cols.upsert_meta(entries, wrote="; the records were written")

    def remember(self, rows: list[Row]) -> None:
        """Before these record rows are deleted: move their sessions' counters past them."""
        # The counter may trail the newest messages; before they go, move it past them so a
        # deleted message's seq is never handed out again in that session.
        highest: dict[tuple[str, str], int] = {}
        for _, _, meta in rows:
            if meta.get("kind") == "message" and "sid" in meta and "seq" in meta:
                session = (str(meta["ns"]), str(meta["sid"]))
                highest[session] = max(highest.get(session, -1), int(meta["seq"]))
        counters = self.counters(highest)
        entries = {
            json_key("session", ns, sid): {"type": "session", "ns": ns, "sid": sid, "last": last}
            for (ns, sid), last in highest.items()
            if last > counters.get((ns, sid), -1)
        }
        if entries:
            self._collections.upsert_meta(entries, wrote="; nothing was deleted")
