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

One-off repairs fix what an older ctxbudget left in stores of the current layout; the layout
entry counts those done (``repairs``; an older ctxbudget ignores it). Repair 1: layout 1 stored
``"(tool call)"`` as the text of a turn that only calls tools (`PLACEHOLDER`), and migrations
kept it, so it was sent to the model as the assistant's words; it is made empty text (the calls
kept, the token counts dropped: they counted the placeholder). Only layout 1 wrote it, so:

- A new store records ``repairs`` with its version (its first write) and is never read for it.
- A migration repairs each record as it moves it, with no read of its own; only partitions an
  interrupted migration left (an earlier ctxbudget moved records as they were) are read, once.
- A layout-3 store an earlier ctxbudget wrote without ``repairs`` may hold placeholders (if it
  was migrated from layout 1; nothing in it tells) but is not read on open: Chroma loads each
  collection on its first read in a process, whatever the filter, so reading every partition
  took about 50 minutes for 2,492 partitions (docs/benchmarks.md). Each partition registered
  at open is repaired when this process first opens it, before it is used
  (`Collections.opened`), and its registry entry records it (``repairs``); the layout entry
  does once every one of them has. A partition costs one read more on its first use: its rows
  whose text contains the placeholder (a document filter only: a ``kind`` clause costs as much
  as the whole store holds), and, if some are exactly it, their update and new generations for
  their sessions.

Idempotent, like the migrations, and run under the store's lock: an interrupted repair runs
again, and two processes repairing one partition write the same.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

from ctxbudget.errors import StoreError
from ctxbudget.store.keys import key_fields
from ctxbudget.store.layout import LAYOUT_VERSION, Collections, existing
from ctxbudget.store.records import (
    Record,
    decode_record,
    json_key,
    record_key,
    scope_of,
    stored_scope,
)
from ctxbudget.store.sessions import Session, Sessions, partition_owner

__all__ = ["PLACEHOLDER", "LayoutVersion", "is_placeholder", "layout1_key"]

PLACEHOLDER = "(tool call)"
"""The text layout 1 stored for a message that only calls tools (now empty text)."""

_LAYOUT_ID = "layout"
_REPAIRS = 1  # one-off repairs this code makes (see the module docstring)
_PAGE = 10_000  # metadata rows read at a time
_UNSURE = "; the migration is idempotent: open the store again to finish it"


class LayoutVersion:
    """The layout version of one store's collections: checked on open, recorded once."""

    def __init__(self, collections: Collections, sessions: Sessions) -> None:
        self._collections = collections
        self._sessions = sessions
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
                if int(rows[0][2].get("repairs", 0)) < _REPAIRS:
                    _PartitionRepairs(cols, self._sessions, self.record).start()
                return
            if version is not None and version > LAYOUT_VERSION:
                msg = (
                    f"collection {cols.name!r} in {cols.conn.location} has store layout "
                    f"{version}, written by a newer ctxbudget; this one reads layout "
                    f"{LAYOUT_VERSION}: upgrade ctxbudget"
                )
                raise StoreError(msg)
            # Layouts 1 and 2 kept records in a collection named as the store; it is ours to
            # migrate only if this store wrote to it (its embedder entry), else it is left alone.
            ours = version is not None or bool(cols.rows(cols.meta, ids=["store"], documents=False))
            legacy = _legacy(cols) if ours else None
            if legacy is None and version is None:
                self.pending = True  # a new store: recorded with its first write
                return
            left = cols.partitions()  # of an interrupted migration (maybe not repaired)
            if legacy is not None:
                _migrate_to_scoped_ids(cols, legacy)
                _migrate_to_partitions(cols, self._sessions, legacy)  # repairs what it moves
            for partition in left:
                repaired = cols.run(partition, partial(_repair_partition, cols, self._sessions))
                _report(cols, repaired or 0)
            self.record()

    def record(self) -> None:
        """Write this code's layout version into the store (after a migration, or a first write)."""
        entry = {"type": "layout", "version": LAYOUT_VERSION, "repairs": _REPAIRS}
        self._collections.upsert_meta(
            {_LAYOUT_ID: entry}, action="record the store layout", wrote=""
        )
        self.pending = False


class _PartitionRepairs:
    """Repair 1 of a layout-3 store, each partition on its first use (see the module docstring)."""

    def __init__(self, cols: Collections, sessions: Sessions, done: Callable[[], None]) -> None:
        self._cols = cols
        self._sessions = sessions
        self._done = done  # records the repair in the layout entry
        rows = cols.rows(cols.meta, where={"type": "part"}, documents=False)
        self._todo = {str(m["part"]) for _, _, m in rows if int(m.get("repairs", 0)) < _REPAIRS}

    def start(self) -> None:
        """Record the repair if no partition needs it, else repair each as it is opened."""
        if self._todo:
            self._cols.opened = self.opened
        else:
            self._done()

    def opened(self, partition: str, collection: Any) -> None:
        """Repair ``partition`` unless it was already (by this process or another)."""
        cols = self._cols
        with cols.conn.lock:
            if partition not in self._todo:
                return
            key = json_key("part", partition)
            rows = cols.rows(cols.meta, ids=[key], documents=False)
            if rows and int(rows[0][2].get("repairs", 0)) < _REPAIRS:
                _report(cols, _repair_partition(cols, self._sessions, collection))
                update = partial(cols.meta.update, ids=[key], metadatas=[{"repairs": _REPAIRS}])
                cols.conn.call("record a repair", update, wrote="")  # merged; a dropped one: none
            self._todo.discard(partition)
            if not self._todo:
                cols.opened = None
                self._done()


def _legacy(cols: Collections) -> Any | None:
    """The single records collection of layouts 1 and 2 (None: there is none)."""
    return cols.conn.call("open collection", partial(existing, cols.conn.client, cols.name))


def _migrate_to_scoped_ids(cols: Collections, legacy: Any) -> None:
    """Layout 1 -> 2: re-key every ``[namespace, id]`` record under its scoped key."""
    conn = cols.conn
    every = conn.call("read", lambda: legacy.get(include=[]))
    old = [key for key in every["ids"] if layout1_key(key)]
    if not old:
        return
    conn.logger.warning(
        "migrating %d records of collection %r in %s to store layout 2 (scoped ids)",
        len(old),
        cols.name,
        conn.location,
    )
    for start in range(0, len(old), cols.batch):
        chunk = old[start : start + cols.batch]
        got = conn.call(
            "read records to migrate",
            partial(legacy.get, ids=chunk, include=["embeddings", "documents", "metadatas"]),
        )
        metas = [dict(m or {}) for m in got["metadatas"]]
        keys = [record_key(str(m["ns"]), stored_scope(m), str(m["rid"])) for m in metas]
        vectors = [[float(x) for x in vector] for vector in got["embeddings"]]
        documents = [doc if doc is not None else "" for doc in got["documents"]]
        conn.call(
            "migrate records",
            partial(
                legacy.upsert, ids=keys, embeddings=vectors, documents=documents, metadatas=metas
            ),
            wrote=_UNSURE,
            unsure=_UNSURE,
        )
        conn.call(
            "migrate records",
            partial(legacy.delete, ids=list(got["ids"])),
            wrote=_UNSURE,
            unsure=_UNSURE,
        )


def _migrate_to_partitions(cols: Collections, sessions: Sessions, legacy: Any) -> None:
    """Layout 2 -> 3: move every record into its partition, then delete the old collection.

    Each session's home is chosen first (its first user's partition, by seq) and kept in its
    entry, so a migration that resumes puts the rest of a session where its first part went.
    """
    conn = cols.conn
    metas: list[dict[str, Any]] = []
    for start in itertools.count(0, _PAGE):
        got = conn.call(
            "read", partial(legacy.get, include=["metadatas"], limit=_PAGE, offset=start)
        )
        metas += [dict(m or {}) for m in got["metadatas"]]
        if len(got["ids"]) < _PAGE:
            break
    if metas:
        conn.logger.warning(
            "migrating %d records of collection %r in %s to store layout %d (a collection per "
            "user); the migration is idempotent and resumes if interrupted",
            len(metas),
            cols.name,
            conn.location,
            LAYOUT_VERSION,
        )
    firsts: dict[Session, tuple[tuple[int, int, str], str | None]] = {}
    for meta in metas:
        if "sid" not in meta:
            continue
        session = (str(meta["ns"]), str(meta["sid"]))
        uid = str(meta["uid"]) if "uid" in meta else None
        # The first record with a user decides the home: messages by seq, then the others.
        rank = (0 if uid is not None else 1, int(meta.get("seq", 1 << 60)), str(meta["rid"]))
        if session not in firsts or rank < firsts[session][0]:
            firsts[session] = (rank, uid)
    counters = {
        (str(m["ns"]), str(m["sid"])): int(m.get("last", -1))
        for _, _, m in cols.rows(cols.meta, where={"type": "session"}, documents=False)
    }
    entries = sessions.entries(firsts)  # homes chosen by an interrupted migration stay
    new = sessions.new_entries({s: uid for s, (_, uid) in firsts.items() if s not in entries})
    new = {s: replace(e, last=counters.get(s, -1)) for s, e in new.items()}
    sessions.save(new, wrote=_UNSURE)
    entries.update(new)
    repaired = 0
    while True:
        got = conn.call(
            "read records to migrate",
            partial(legacy.get, include=["embeddings", "documents", "metadatas"], limit=cols.batch),
        )
        if not got["ids"]:
            break
        records = [
            decode_record(d or "", dict(m or {}))
            for d, m in zip(got["documents"], got["metadatas"], strict=True)
        ]
        parts = [sessions.partition_of(r, entries) for r in records]
        cols.register(
            {
                p: partition_owner(r)
                for r, p in zip(records, parts, strict=True)
                if r.session_id is None
            }
        )
        for partition in dict.fromkeys(parts):
            chosen = [n for n, p in enumerate(parts) if p == partition]
            rows = [_moved(got["documents"][n], got["metadatas"][n], records[n]) for n in chosen]
            repaired += sum(fixed for _, _, fixed in rows)
            data = {
                "ids": [got["ids"][n] for n in chosen],
                "embeddings": [[float(x) for x in got["embeddings"][n]] for n in chosen],
                "documents": [document for document, _, _ in rows],
                "metadatas": [meta for _, meta, _ in rows],
            }
            cols.run(partition, partial(_upsert, cols, data), create=True)
        sessions.note_members(zip(records, parts, strict=True))
        conn.call(
            "migrate records",
            partial(legacy.delete, ids=list(got["ids"])),
            wrote=_UNSURE,
            unsure=_UNSURE,
        )
    conn.call("delete the old collection", partial(conn.client.delete_collection, cols.name))
    _report(cols, repaired)


def _report(cols: Collections, repaired: int) -> None:
    if repaired:
        cols.conn.logger.warning(
            "collection %r in %s: %d tool-call-only turn(s) stored with the placeholder text %r "
            "by store layout 1 now have empty text (their tool calls kept)",
            cols.name,
            cols.conn.location,
            repaired,
            PLACEHOLDER,
        )


def _repair_partition(cols: Collections, sessions: Sessions, collection: Any) -> int:
    """Repair 1 in one partition: its tool-call-only turns with `PLACEHOLDER` as their text.

    Their sessions get new generations, as for any replaced message: a copy of one kept in
    memory (another `ContextMemory` on the folder, another worker) is read again.
    """
    conn = cols.conn
    got = conn.call(
        "read tool-call turns to repair",
        partial(
            collection.get,
            where_document={"$contains": PLACEHOLDER},
            include=["embeddings", "documents", "metadatas"],
        ),
    )
    chosen = [
        n
        for n, (document, meta) in enumerate(zip(got["documents"], got["metadatas"], strict=True))
        if is_placeholder(document, dict(meta or {}))
    ]
    for start in range(0, len(chosen), cols.batch):
        part = chosen[start : start + cols.batch]
        update = partial(
            collection.update,
            ids=[got["ids"][n] for n in part],
            embeddings=[[float(x) for x in got["embeddings"][n]] for n in part],  # kept as is
            documents=[""] * len(part),
            metadatas=[{"tokens": "{}"} for _ in part],  # the counts were the placeholder's
        )
        rows = [(got["ids"][n], "", dict(got["metadatas"][n] or {})) for n in part]
        sessions.touched(rows, wrote="; nothing was repaired")
        conn.call("repair tool-call turns", update, wrote=_UNSURE, unsure=_UNSURE)
    return len(chosen)


def is_placeholder(document: str | None, meta: dict[str, Any]) -> bool:
    """Whether a stored row is a tool-call-only turn with layout 1's placeholder text.

    >>> is_placeholder("(tool call)", {"kind": "message", "tool_calls": '["c1"]'})
    True
    """
    calls = meta.get("tool_calls")
    return (
        document == PLACEHOLDER
        and meta.get("kind") == "message"
        and isinstance(calls, str)
        and calls not in ("", "[]")
    )


def _upsert(cols: Collections, data: dict[str, Any], collection: Any) -> None:
    partial_upsert = partial(collection.upsert, **data)
    cols.conn.call("migrate records", partial_upsert, wrote=_UNSURE, unsure=_UNSURE)


def _moved(
    document: str | None, meta: dict[str, Any] | None, record: Record
) -> tuple[str, dict[str, Any], bool]:
    """A layout-2 row as layout 3 stores it, and whether it was a placeholder (now repaired).

    Its metadata gains the selective keys of layout 3 (`ctxbudget.store.keys`).
    """
    keys = key_fields(
        record.namespace,
        scope_of(record),
        record.kind,
        record.session_id,
        record.user_id,
        record.seq,
    )
    moved = {**dict(meta or {}), **keys}
    if is_placeholder(document, moved):
        return "", {**moved, "tokens": "{}"}, True  # the counts were the placeholder's
    return document or "", moved, False


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
