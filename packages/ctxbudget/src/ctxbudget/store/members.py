"""Who wrote in which session: the (session, user) pair entries and each user's ``elsewhere``.

Beside each session's entry in ``<collection>.meta`` (`ctxbudget.store.sessions`): one entry per
(session, user) pair a write stored (`ChromaStore.list_sessions` and `delete_user` read them),
and one per user with messages in a partition not their own (``elsewhere``: a session another
user started, or one started without a user), which a search of the user's other sessions reads.
A pair's entry never changes once written, so a write reads the pairs with the session entries
under its lock (`Sessions.entries_and_members`) and `note_members` writes only the new ones.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from ctxbudget.store.layout import Collections
from ctxbudget.store.partitions import user_partition
from ctxbudget.store.records import Record, json_key

__all__ = ["member_keys", "note_members"]


def member_keys(records: Iterable[Record]) -> Iterator[str]:
    """The ids in ``meta`` of the (session, user) pairs of ``records``."""
    for record in records:
        if record.user_id is not None and record.session_id is not None:
            yield json_key("member", record.namespace, record.session_id, record.user_id)


def note_members(
    cols: Collections, records: Iterable[tuple[Record, str]], noted: frozenset[str] | None
) -> None:
    """After a write of (record, partition): its new pairs, and partitions new to ``elsewhere``.

    ``noted``: the pairs known to be written already (None: read them here).
    """
    members: dict[str, dict[str, Any]] = {}
    away: dict[tuple[str, str], set[str]] = {}
    for record, partition in records:
        if record.user_id is None:
            continue
        ns, uid = record.namespace, record.user_id
        if record.session_id is not None:
            member = {"type": "member", "ns": ns, "sid": record.session_id, "uid": uid}
            members[json_key("member", ns, record.session_id, uid)] = member
        if partition != user_partition(cols.name, ns, uid):
            away.setdefault((ns, uid), set()).add(partition)
    if noted is not None:
        members = {k: v for k, v in members.items() if k not in noted}
    if not members and not away:
        return
    users = {json_key("user", ns, uid): (ns, uid) for ns, uid in away}
    rows = cols.rows(cols.meta, ids=[*members, *users], documents=False)
    stored = {key: meta for key, _, meta in rows}
    entries = {k: v for k, v in members.items() if k not in stored}
    for key, (ns, uid) in users.items():
        had = set(json.loads(str(stored.get(key, {}).get("elsewhere", "[]"))))
        if not away[(ns, uid)] <= had:
            everywhere = json.dumps(sorted(had | away[(ns, uid)]))
            entries[key] = {"type": "user", "ns": ns, "uid": uid, "elsewhere": everywhere}
    if entries:
        cols.upsert_meta(entries, wrote="; the records were written")
