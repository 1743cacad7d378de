"""Tombstones: a delete of a session's message, seen by a replace of it in another process.

`MessageEdits.replace` reads the stored message, then writes its replacement (an upsert). The
store's lock is per process: on a Chroma server, a `delete_messages` of the same message in
another process (or through another client, which takes another lock) can land between the
two, and the upsert would bring the deleted message back (at its old seq, or at the end if the
writer's own read already missed it). Chroma has no conditional write, so the two calls follow a
protocol of plain writes and reads, each ordered after the one before (one server, read after
write):

- The **deleter** (`delete_messages`, and `ChromaStore.delete` in a session, as ``clear``
  does) reads the messages it deletes, then writes a tombstone for each in ``meta`` (`record`):
  keyed by namespace, session, id and the **seq** it read; only then deletes them.
- The **replacer** reads the message (its seq ``s``), writes the replacement, and only then
  reads the tombstone of (id, ``s``) (`deleted`). If there is one, it deletes what it wrote
  (if the row still has the seq it wrote) and refuses: the message was deleted while it was
  replaced; nothing was changed.

Why this is sound: say a delete removes the message between the replacer's read and its write.
Its tombstone was written before its delete, so before the replacer's write, so before the
replacer's read of the tombstone, which finds it: the replacer deletes its own write. If instead
the delete removes the message after the replacer's write, it removes the replacement too. Both
orders end with the message deleted, as the delete's caller was told. The seq is what tells a
relevant tombstone from an old one: a seq is never given out twice in a session, so a message
added again under a deleted id (a new seq) is never matched by the old message's tombstone, and
`add` needs no read or write of tombstones at all (nothing is added to the per-turn path). A
delete whose read came before the replacer's and saw the same message wrote the tombstone of
that seq too. What this does not cover is a delete that read an older message under the id,
then, once that one was deleted and the id added again by two more calls, deleted the new one
just as it was being replaced: four calls on one id at once.

Whole sessions and users. `delete_session` first writes a mark of the session
(`record_session`), then deletes its records, then its entries (the mark with them);
`delete_user` writes the tombstones of the messages it deletes, as above. The replacer writes
only over a message still stored (`Writer.add` with ``existing``: a message deleted since its
read is refused and nothing written), and after its write reads, in the one read by id
(`gone`), the message's tombstone, the session's mark and the session's entry. A delete of the
session that removed the message after the replacer's read either ended before its write (the
message is not stored: refused), or has its mark, or its entry gone, when the replacer looks. A
mark older than `TOMBSTONE_TTL` is not honoured: a `delete_session` cut short by a crash does
not refuse replaces for ever. Not covered: the session deleted and started again under its id,
both between a replacer's read and its write.

Tombstones go with their session (`delete_session`, `delete_user`: ``ctxbudget.store.deletes``
deletes every ``meta`` entry of the session) and are swept by the next delete of messages of
the session once older than `TOMBSTONE_TTL` (a replace's read-to-check window is milliseconds
to seconds), so they do not pile up in a session whose messages are deleted as it goes.

Cost (measured at load 5, medians): a delete writes its tombstones in one ``meta`` write (8 ms
on a server, 20 ms embedded, a commit) and sweeps from a read it makes anyway; a replace reads
one tombstone by id (2 ms on a server, 1 ms embedded). Neither is on the per-turn path.
"""

from __future__ import annotations

import time
from typing import Any

from ctxbudget.store.layout import Collections, Row
from ctxbudget.store.records import json_key
from ctxbudget.store.stamps import session_key

__all__ = ["TOMBSTONE_TTL", "Tombstones", "session_tombstone_key", "tombstone_key"]

TOMBSTONE_TTL = 3600.0
"""Seconds a tombstone is kept at least (swept by a later delete of its session after that)."""


def tombstone_key(namespace: str, session_id: str, message_id: str, seq: int) -> str:
    """The id in ``meta`` of the tombstone of a session's message deleted at ``seq``."""
    return json_key("tomb", namespace, session_id, message_id, str(seq))


def session_tombstone_key(namespace: str, session_id: str) -> str:
    """The id in ``meta`` of the mark a `delete_session` of the session writes first."""
    return json_key("tomb", namespace, session_id)


def _seq(meta: dict[str, Any]) -> int:
    return int(meta.get("seq", -1))


class Tombstones:
    """A store's tombstones of deleted messages (see the module docstring)."""

    def __init__(self, collections: Collections) -> None:
        self._collections = collections

    def record(self, namespace: str, session_id: str, rows: list[Row]) -> None:
        """Before these messages of the session are deleted: their tombstones (one write)."""
        self.record_rows(namespace, [(k, t, {**m, "sid": session_id}) for k, t, m in rows])

    def record_rows(self, namespace: str, rows: list[Row]) -> None:
        """Before these messages (of their sessions, ``sid``) are deleted: their tombstones."""
        if not rows:
            return
        now = time.time()
        entries = {
            tombstone_key(namespace, str(meta["sid"]), str(meta["rid"]), _seq(meta)): {
                "type": "tomb",
                "ns": namespace,
                "sid": str(meta["sid"]),
                "rid": str(meta["rid"]),
                "seq": _seq(meta),
                "t": now,
            }
            for _, _, meta in rows
        }
        self._collections.upsert_meta(
            entries, action="record deleted messages", wrote="; nothing was deleted"
        )

    def record_session(self, namespace: str, session_id: str) -> None:
        """Before a session's records are deleted (`delete_session`): its mark (one write).

        It goes with the session's other entries at the end of the delete.
        """
        mark = {"type": "tomb", "ns": namespace, "sid": session_id, "t": time.time()}
        self._collections.upsert_meta(
            {session_tombstone_key(namespace, session_id): mark},
            action="mark the session deleted",
            wrote="; nothing was deleted",
        )

    def gone(self, namespace: str, session_id: str, message_id: str, seq: int | None) -> bool:
        """Whether a message replaced at ``seq`` was deleted since it was read (one read).

        Its tombstone, the session's mark of a `delete_session` under way (younger than
        `TOMBSTONE_TTL`: one cut short by a crash is not honoured for ever), or the session's
        entry gone (the delete has ended).
        """
        cols = self._collections
        keys = [session_key(namespace, session_id), session_tombstone_key(namespace, session_id)]
        if seq is not None:
            keys.append(tombstone_key(namespace, session_id, message_id, seq))
        found = {key: meta for key, _, meta in cols.rows(cols.meta, ids=keys, documents=False)}
        if keys[0] not in found or (seq is not None and keys[2] in found):
            return True
        mark = found.get(keys[1])
        return mark is not None and float(mark.get("t", 0.0)) > time.time() - TOMBSTONE_TTL

    def sweep(
        self,
        namespace: str,
        session_id: str,
        entries: list[Row] | None = None,
        *,
        now: float | None = None,
    ) -> int:
        """Delete the session's tombstones older than `TOMBSTONE_TTL`; how many.

        ``entries``: the entries in ``meta`` with the session's id, if read already (a delete
        reads them for its readers too); otherwise read here.
        """
        cols = self._collections
        limit = (time.time() if now is None else now) - TOMBSTONE_TTL
        # One selective clause goes to Chroma (see ctxbudget.store.keys); the rest is checked here.
        rows = (
            cols.rows(cols.meta, where={"sid": session_id}, documents=False)
            if entries is None
            else entries
        )
        old = [
            key
            for key, _, meta in rows
            if meta.get("type") == "tomb"
            and meta.get("ns") == namespace
            and float(meta.get("t", 0.0)) < limit
        ]
        cols.delete(cols.meta, old)
        return len(old)
