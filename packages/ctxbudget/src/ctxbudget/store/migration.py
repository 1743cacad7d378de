"""Opening a store written with another layout version: migrate an older one, refuse a newer one.

Layout versions (`ctxbudget.store.layout`): 1 keyed records ``[namespace, id]``; 2 adds the
scope. A store written with an older layout is migrated when opened (`LAYOUT_VERSION`): every
record is written again under its new key with its vector, text and metadata (seqs included),
then its old key is removed, batch by batch, and the version is recorded last. Each step is
idempotent, so an interrupted migration simply resumes on the next open; a store with a newer
layout than this code knows is refused. Stop processes running an older ctxbudget on a shared
server before opening it with this one (they would keep writing the old keys).

A new store records its version with its first write (`LayoutVersion.pending`), so opening a
store never writes to it.
"""

from __future__ import annotations

import json
from functools import partial

from ctxbudget.errors import StoreError
from ctxbudget.store.layout import LAYOUT_VERSION, Collections
from ctxbudget.store.records import record_key, stored_scope

__all__ = ["LayoutVersion", "layout1_key"]

_LAYOUT_ID = "layout"


class LayoutVersion:
    """The layout version of one store's collections: checked on open, recorded once."""

    def __init__(self, collections: Collections) -> None:
        self._collections = collections
        self.pending = False
        """Whether the version is still to be recorded (a new store: with its first write)."""

    def check(self) -> None:
        """Migrate a store of an older layout, refuse a newer one (see the module docstring).

        Raises:
            StoreError: the layout is newer than this code's, or Chroma failed (a migration
                resumes on the next open).
        """
        cols = self._collections
        with cols.conn.lock:
            rows = cols.rows(cols.meta, ids=[_LAYOUT_ID], documents=False)
            version = int(rows[0][2].get("version", 1)) if rows else None
            if version == LAYOUT_VERSION:
                return
            if version is not None and version > LAYOUT_VERSION:
                msg = (
                    f"collection {cols.name!r} in {cols.conn.location} has store layout "
                    f"{version}, written by a newer ctxbudget; this one reads layout "
                    f"{LAYOUT_VERSION}: upgrade ctxbudget"
                )
                raise StoreError(msg)
            if version is None and not cols.conn.call("count records", cols.records.count):
                self.pending = True  # a new store: recorded with its first write
                return
            _migrate_to_scoped_ids(cols)
            self.record()

    def record(self) -> None:
        """Write this code's layout version into the store (after a migration, or a first write)."""
        entry = {"type": "layout", "version": LAYOUT_VERSION}
        self._collections.upsert_meta(
            {_LAYOUT_ID: entry}, action="record the store layout", wrote=""
        )
        self.pending = False


def _migrate_to_scoped_ids(cols: Collections) -> None:
    """Layout 1 -> 2: re-key every ``[namespace, id]`` record under its scoped key."""
    conn = cols.conn
    every = conn.call("read", lambda: cols.records.get(include=[]))
    old = [key for key in every["ids"] if layout1_key(key)]
    if not old:
        return
    conn.logger.warning(
        "migrating %d records of collection %r in %s to store layout %d (scoped ids)",
        len(old),
        cols.name,
        conn.location,
        LAYOUT_VERSION,
    )
    unsure = "; the migration is idempotent: open the store again to finish it"
    for start in range(0, len(old), cols.batch):
        chunk = old[start : start + cols.batch]
        got = conn.call(
            "read records to migrate",
            partial(
                cols.records.get,
                ids=chunk,
                include=["embeddings", "documents", "metadatas"],
            ),
        )
        metas = [dict(m or {}) for m in got["metadatas"]]
        keys = [record_key(str(m["ns"]), stored_scope(m), str(m["rid"])) for m in metas]
        vectors = [[float(x) for x in vector] for vector in got["embeddings"]]
        documents = [doc if doc is not None else "" for doc in got["documents"]]
        conn.call(
            "migrate records",
            partial(
                cols.records.upsert,
                ids=keys,
                embeddings=vectors,
                documents=documents,
                metadatas=metas,
            ),
            wrote=unsure,
            unsure=unsure,
        )
        conn.call(
            "migrate records",
            partial(cols.records.delete, ids=list(got["ids"])),
            wrote=unsure,
            unsure=unsure,
        )


def layout1_key(key: str) -> bool:
    """Whether a Chroma id is a layout-1 record key, ``[namespace, id]``.

    >>> layout1_key('["default","m1"]'), layout1_key('["default","session","s1","m1"]')
    (True, False)
    """
    try:
        parts = json.loads(key)
    except ValueError:
        return False
    return isinstance(parts, list) and len(parts) == 2
