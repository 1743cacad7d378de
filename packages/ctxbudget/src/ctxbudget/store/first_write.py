"""Acknowledged records another writer got to first: `add_acknowledged`.

A message acknowledged by write-behind (`ctxbudget.memory.writing.behind`) is stored in the
background, or by the journal's replay after a crash (`ctxbudget.store.journal.replay`). If
another writer (another memory on the same folder or server, an admin) stored a different
record under the same scope and id meanwhile, the store refuses the batch ("already stored with
different content"). That is the id rule of every write (docs/reliability.md, "Re-adding an
id"): the first write wins. So the conflicting records are dropped, each with one warning naming
its id and scope, and the rest of the batch is stored; a batch refused for any other reason is
refused as before (`StoreInputError`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from ctxbudget.errors import StoreInputError
from ctxbudget.store.records import Record, record_key, scope_of
from ctxbudget.store.validate import same_write

__all__ = ["Add", "Get", "add_acknowledged", "conflicts"]

logger = logging.getLogger(__name__)

Add = Callable[[Sequence[Record]], list[Record]]
"""`ChromaStore.add`: records in, stored records out."""

Get = Callable[..., list[Record]]
"""`ChromaStore.get`: ``(ids, *, namespace, session_id, user_id, collection)``."""


def add_acknowledged(
    add: Add, get: Get | None, records: Sequence[Record], *, reported: set[str]
) -> list[Record]:
    """Store acknowledged records; those another writer stored first with other content are not.

    Args:
        add: the store's ``add``.
        get: the store's ``get`` (None: a refused batch is refused whole, as by ``add``).
        records: the acknowledged records, in order.
        reported: keys of records already warned about (a retried batch warns once); the
            keys of the records dropped now are added.

    Returns:
        The records dropped (first write wins), in order.

    Raises:
        StoreInputError: the store refused the batch for another reason than such a conflict.
        StoreError: the store failed (nothing dropped is warned about twice on a retry).
    """
    todo = list(records)
    dropped: list[Record] = []
    while True:
        try:
            if todo:
                add(todo)
            return dropped
        except StoreInputError:
            found = [] if get is None else conflicts(get, todo)
            if not found:
                raise
        gone = {id(r) for r in found}
        for record in found:
            key = record_key(record.namespace, scope_of(record), record.id)
            if key not in reported:
                reported.add(key)
                kind, name = scope_of(record)
                logger.warning(
                    "%s %r of %s %r in namespace %r was not stored: a %s with different content "
                    "was stored under its id first (by another writer, or the id was reused), "
                    "and the first write wins (give new content a new id)",
                    record.kind,
                    record.id,
                    kind,
                    name,
                    record.namespace,
                    record.kind,
                )
        dropped += found
        todo = [r for r in todo if id(r) not in gone]


def conflicts(get: Get, records: Sequence[Record]) -> list[Record]:
    """The records whose scope and id the store holds with other content, in order."""
    wanted: dict[tuple[str, str, str], list[str]] = {}
    for record in records:
        kind, name = scope_of(record)
        wanted.setdefault((record.namespace, kind, name), []).append(record.id)
    stored: dict[str, Record] = {}
    for (namespace, kind, name), ids in wanted.items():
        found = get(
            ids,
            namespace=namespace,
            session_id=name if kind == "session" else None,
            user_id=name if kind == "user" else None,
            collection=name if kind == "collection" else None,
        )
        stored.update((record_key(namespace, (kind, name), r.id), r) for r in found)
    clash: list[Record] = []
    for record in records:
        old = stored.get(record_key(record.namespace, scope_of(record), record.id))
        if old is not None and not same_write(record, old):
            clash.append(record)
    return clash
