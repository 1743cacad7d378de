"""Which acknowledged batches go to the store together: `store_groups`, by `pending_key`.

`ctxbudget.memory.writing.behind` stores its queue a few batches per store call; two versions
of one record never share a call (the store would see one id twice), so they keep their order.
"""

from __future__ import annotations

from ctxbudget.store.journal import JournalBatch
from ctxbudget.store.records import Record, record_key, scope_of

__all__ = ["pending_key", "store_groups"]


def pending_key(record: Record) -> str:
    """What names a record in the store: its namespace, scope and id."""
    return record_key(record.namespace, scope_of(record), record.id)


def store_groups(work: list[JournalBatch], size: int) -> list[list[JournalBatch]]:
    """Consecutive batches in store calls of about ``size`` records, no key twice in one."""
    groups: list[list[JournalBatch]] = []
    keys: set[str] = set()
    count = 0
    for batch in work:
        mine = {pending_key(r) for r in batch.records}
        if not groups or count + len(batch.records) > size or keys & mine:
            groups.append([])
            keys, count = set(), 0
        groups[-1].append(batch)
        keys |= mine
        count += len(batch.records)
    return groups
