"""Which acknowledged batches go to the store together: `store_groups`, by `pending_key`.

`ctxbudget.memory.writing.behind` stores its queue a few batches per store call; two versions
of one record never share a call (the store would see one id twice), so they keep their order.
Nor does a batch that names a user for a session after an earlier batch of the call wrote to it
without one: the store gives a new session the first user its write names (home and owner), and
that must be the first call's, whether its calls were stored one by one or together.
"""

from __future__ import annotations

from ctxbudget.store.journal import JournalBatch
from ctxbudget.store.records import Record, record_key, scope_of
from ctxbudget.store.writes import first_users

__all__ = ["pending_key", "store_groups"]


def pending_key(record: Record) -> str:
    """What names a record in the store: its namespace, scope and id."""
    return record_key(record.namespace, scope_of(record), record.id)


def store_groups(work: list[JournalBatch], size: int) -> list[list[JournalBatch]]:
    """Consecutive batches in store calls of about ``size`` records, no key twice in one."""
    groups: list[list[JournalBatch]] = []
    keys: set[str] = set()
    count = 0
    users: dict[tuple[str, str], str | None] = {}  # the group's sessions: the first user named
    for batch in work:
        mine = {pending_key(r) for r in batch.records}
        named = first_users(batch.records)
        late = any(user is not None and users.get(s, user) is None for s, user in named.items())
        if not groups or count + len(batch.records) > size or keys & mine or late:
            groups.append([])
            keys, count, users = set(), 0, {}
        groups[-1].append(batch)
        keys |= mine
        count += len(batch.records)
        for session, user in named.items():
            if users.get(session) is None:
                users[session] = user
    return groups
