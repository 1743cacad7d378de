"""Ids a write gives that are held already: the same write again, or other content (refused).

`refuse_changes` runs before the first record of a write is stored: a record its scope holds
with the same content (`ctxbudget.store.validate.same_write`) is not written again, and one
held with other content refuses the whole write (`StoreInputError`, nothing written).

A caller that keeps the first write of an id instead (``first_write_wins`` of
`ContextMemory.add_messages`: the LangChain middleware, which stores an agent's state on every
call) needs no read for that: the store's own ``add`` finds the ids it holds as it writes, and
`ctxbudget.store.first_write.add_acknowledged` keeps the stored record and warns. Then only the
records acknowledged and not stored yet (write-behind) are checked here, in memory, and one
held there with other content is kept the same way (a warning, not written).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from ctxbudget.errors import StoreInputError
from ctxbudget.store.records import Record, scope_of
from ctxbudget.store.validate import same_write

if TYPE_CHECKING:
    from ctxbudget.store.chroma_store import ChromaStore

__all__ = ["UNWRITTEN", "Held", "refuse_changes"]

logger = logging.getLogger(__name__)

UNWRITTEN = "; nothing was written"

Held = set[tuple[tuple[str, str], str]]
"""The ``(scope, id)`` of records held already: nothing to write."""


def refuse_changes(
    store: ChromaStore,
    namespace: str,
    records: list[Record],
    noun: str,
    *,
    pending: Callable[[Record], Record | None] | None = None,
    keep_first: bool = False,
) -> Held:
    """Refuse ids stored with other content before the first batch (not batch by batch).

    Only the records' own scopes are read: an id another session or user uses is not a
    conflict, and nothing about it is revealed. ``pending`` gives the acknowledged record not
    yet stored under a record's id (write-behind): it is what that id holds. ``keep_first``:
    the store is not read (its ``add`` keeps the first write of an id itself), and a record
    ``pending`` holds with other content is kept out with a warning instead of refusing all.

    Returns:
        The ``(scope, id)`` of the records held already (`same_write`): nothing to write.
    """
    by_scope: dict[tuple[str, str], list[str]] = {}
    stored: dict[tuple[tuple[str, str], str], Record] = {}
    for record in records:
        waiting = None if pending is None else pending(record)
        if waiting is not None:
            stored[(scope_of(record), record.id)] = waiting
        elif not keep_first:
            by_scope.setdefault(scope_of(record), []).append(record.id)
    for scope, ids in by_scope.items():
        kind, name = scope
        found = store.get(
            ids,
            namespace=namespace,
            session_id=name if kind == "session" else None,
            user_id=name if kind == "user" else None,
            collection=name if kind == "collection" else None,
        )
        stored.update(((scope, r.id), r) for r in found)
    held: Held = set()
    changed: list[str] = []
    for record in records:
        old = stored.get((scope_of(record), record.id))
        if old is None:
            continue
        same = same_write(record, old)
        if same or keep_first:
            held.add((scope_of(record), record.id))
        if not same:
            changed.append(record.id)
    if changed and keep_first:
        logger.warning(
            "%d %s(s) were not stored: ids %s were acknowledged before with different content "
            "(not stored yet), and the first write wins (give new content a new id)",
            len(changed),
            noun,
            changed[:10],
        )
        return held
    if changed:
        msg = (
            f"{len(changed)} {noun}(s) are already stored with different content: ids "
            f"{changed[:10]}; give new content a new id (or delete the stored one first)"
            f"{UNWRITTEN}"
        )
        raise StoreInputError(msg)
    return held
