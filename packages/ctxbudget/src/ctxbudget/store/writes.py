"""Adding records: check everything, embed, plan under the lock, number messages, write.

Everything is checked before anything is written, and a failure says what may have been
written: re-adding a record whose content is stored is a no-op, so repeating a failed ``add`` is
always safe. Embedding is the slow part: it runs before the store's lock is taken; under the
lock the stored records are read again, and only what they now call for is embedded.

Embedded Chroma's Rust bindings hold the interpreter lock for the whole of a write call, so every
other thread of the process, an event loop's too, waits for it to end. `EMBEDDED_WRITE_BATCH`
can cap the records of one call on an embedded store; measured, it does not pay (issue 40).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any

from ctxbudget.errors import MemoryClosedError, StoreError, StoreInputError
from ctxbudget.store.layout import Collections
from ctxbudget.store.migration import LayoutVersion
from ctxbudget.store.records import Record, encode_record, record_key, same_content, scope_of
from ctxbudget.store.sequences import COUNTER_LAG, Sequences
from ctxbudget.store.sessions import Session, SessionEntry, Sessions, partition_owner
from ctxbudget.store.validate import bad_record, check_record, same_write
from ctxbudget.store.vectors import Vectors

__all__ = ["EMBEDDED_WRITE_BATCH", "Vanished", "Writer", "check_batch", "first_users", "unwritten"]

EMBEDDED_WRITE_BATCH: int | None = None
"""At most this many records per Chroma call of a write on an embedded store (None: Chroma's
maximum, as on a server).

Off: each call also holds the lock for a fixed part (its commit: 5 ms alone, 18 ms at load 5),
so 16 records a call halved the longest stall of an ingest (360 to 180 ms) but stalled the loop
1.5 to 2 times as long in all (docs/benchmarks.md, issue 40; ``bench_async.py --ingest``)."""


def first_users(records: Sequence[Record]) -> dict[Session, str | None]:
    """Each session's first user named in ``records`` (None: none): a new one's home and owner."""
    firsts: dict[Session, str | None] = {}
    for record in records:
        if record.session_id is not None:
            session = (record.namespace, record.session_id)
            if firsts.get(session) is None:
                firsts[session] = record.user_id
    return firsts


def check_batch(records: Sequence[Record]) -> None:
    """Validate records as `ChromaStore.add` does, writing nothing.

    Raises:
        StoreInputError: naming the record (its index in ``records``) and what is wrong.
    """
    for index, record in enumerate(records):
        check_record(index, record)
    keys = [record_key(r.namespace, scope_of(r), r.id) for r in records]
    if len(set(keys)) != len(keys):
        counts = Counter(keys)
        twice = sorted({r.id for r, k in zip(records, keys, strict=True) if counts[k] > 1})
        msg = (
            f"ids {twice} appear more than once in one add(), in one scope; give each record "
            "its own id"
        )
        raise StoreInputError(msg + "; nothing was written")


@contextmanager
def unwritten() -> Iterator[None]:
    """Add "nothing was written" to a `StoreError` raised inside (input errors say it already)."""
    try:
        yield
    except (StoreInputError, MemoryClosedError):  # they say "nothing was done" already
        raise
    except StoreError as exc:
        msg = f"{exc}; nothing was written"
        raise StoreError(msg) from exc.__cause__


class Vanished(StoreInputError):
    """`Writer.add` with ``existing=True``: a record to replace is no longer stored."""


class Writer:
    """Adds checked records to one store (`ChromaStore.add` after `check_batch`)."""

    def __init__(
        self,
        collections: Collections,
        vectors: Vectors,
        sessions: Sessions,
        sequences: Sequences,
        layout: LayoutVersion,
    ) -> None:
        self._collections = collections
        self._vectors = vectors
        self._sessions = sessions
        self._sequences = sequences
        self._layout = layout

    def claim(self, namespace: str, session_id: str, user_id: str) -> SessionEntry:
        """The session's entry, created with ``user_id`` as owner if it has none (first wins).

        See `ChromaStore.claim_session`: the entry is added as a write of a message would add
        it (Chroma's ``add`` keeps an id's first write), then read back.
        """
        with self._collections.conn.lock, unwritten():
            if self._layout.pending:
                self._layout.record()
            session = (namespace, session_id)
            return self._sessions.open({session: user_id})[session]

    def add(self, batch: list[Record], *, replace: bool, existing: bool = False) -> list[Record]:
        """Store a checked, non-empty batch; see `ChromaStore.add`.

        ``existing``: only replace stored records; one that is not stored (deleted since its
        caller read it) raises `Vanished` and nothing is written.
        """
        cols, vectors_of = self._collections, self._vectors
        keys = [record_key(r.namespace, scope_of(r), r.id) for r in batch]
        firsts = first_users(batch)
        # Embedding is the slow part: do it before taking the lock, then plan again under it.
        vectors: dict[str, list[float]] = {}
        with unwritten():
            stored = self._stored(batch, keys, self._sessions.entries(firsts))
            vectors_of.embed_needed(batch, keys, stored, vectors, replace=replace)
        with cols.conn.lock:
            with unwritten():
                known, noted = self._sessions.entries_and_members(firsts, batch)
                stored = self._stored(batch, keys, known)
                if existing and any(key not in stored for key in keys):
                    msg = "a record to replace is no longer stored; nothing was written"
                    raise Vanished(msg)
                actions = _plan(batch, keys, stored, replace=replace)
                vectors_of.embed_needed(batch, keys, stored, vectors, replace=replace)
                dimensions = {len(v) for v in vectors.values()}
                if len(dimensions) > 1:
                    msg = (
                        f"embedder {vectors_of.embedder.name!r} returned vectors of "
                        f"{sorted(dimensions)} dimensions"
                    )
                    raise StoreInputError(msg + "; nothing was written")
                if dimensions:
                    vectors_of.check_dimension(dimensions.pop())
                if self._layout.pending:
                    self._layout.record()
                entries = self._sessions.open(firsts, known)  # read just above, locked
            return self._write(batch, keys, stored, actions, vectors, entries, noted, replace)

    def _stored(
        self, batch: list[Record], keys: list[str], entries: dict[Session, SessionEntry]
    ) -> dict[str, Record]:
        """The stored records with these keys (a new session's records: none yet)."""
        by_partition: dict[str, list[str]] = {}
        for record, key in zip(batch, keys, strict=True):
            if record.session_id is None or (record.namespace, record.session_id) in entries:
                by_partition.setdefault(self._sessions.partition_of(record, entries), []).append(
                    key
                )
        stored: dict[str, Record] = {}
        for partition, wanted in by_partition.items():
            stored.update(self._collections.fetch(partition, wanted))
        return stored

    def _write(
        self,
        batch: list[Record],
        keys: list[str],
        stored: dict[str, Record],
        actions: list[str],
        vectors: dict[str, list[float]],
        entries: dict[Session, SessionEntry],
        noted: frozenset[str],
        replace: bool,
    ) -> list[Record]:
        results: dict[str, Record] = {}
        pending: list[str] = []
        partitions: dict[str, str] = {}
        numbering: dict[Session, list[str]] = {}
        replaced: list[tuple[str, str, dict[str, object]]] = []
        for record, key, action in zip(batch, keys, actions, strict=True):
            old = stored.get(key)
            if action == "same" and old is not None:
                results[key] = old
                continue
            seq: int | None = None
            if record.kind == "message" and record.session_id is not None:
                if (
                    old is not None
                    and old.kind == "message"
                    and old.session_id == record.session_id
                ):
                    seq = old.seq
                else:
                    numbering.setdefault((record.namespace, record.session_id), []).append(key)
            if old is not None:  # copies of its session, user or documents hold the old one
                given = (("sid", old.session_id), ("uid", old.user_id))
                scope = {k: v for k, v in given if v is not None}
                replaced.append((key, "", {"ns": old.namespace, **scope}))
            results[key] = dataclasses.replace(record, seq=seq)
            partitions[key] = self._sessions.partition_of(record, entries)
            pending.append(key)
        if not pending:
            return [results[key] for key in keys]
        with unwritten():
            for (ns, sid), session_keys in sorted(numbering.items()):
                seqs = self._sequences.take(ns, sid, entries[(ns, sid)], len(session_keys))
                for seq, key in zip(seqs, session_keys, strict=True):
                    results[key] = dataclasses.replace(results[key], seq=seq)
            others = {
                partitions[k]: partition_owner(results[k])
                for k in pending
                if results[k].session_id is None
            }
            self._collections.register(others)
        if replaced:  # a process keeping the session in memory reads it again
            self._sessions.touched(replaced, wrote="; nothing was written")
        first_wins = self._collections.conn.shared and not replace
        self._upsert_records(pending, results, vectors, partitions, stored, first_wins)
        lost = self._kept_first(pending, results, partitions, stored) if first_wins else set()
        pending = [key for key in pending if key not in lost]
        self._sessions.removed(replaced)
        lasts: dict[Session, int] = {}
        for key in pending:
            record = results[key]
            if (
                record.kind == "message"
                and record.session_id is not None
                and record.seq is not None
            ):
                session = (record.namespace, record.session_id)
                lasts[session] = max(lasts.get(session, -1), record.seq)
        moved = {
            session: dataclasses.replace(entry, last=last)
            for session, last in lasts.items()
            if (entry := entries[session]).last < 0 or last - entry.last >= COUNTER_LAG
        }
        self._sessions.save(moved, wrote="; the records were written", fields=("last",))
        self._sessions.note_members(((results[k], partitions[k]) for k in pending), noted)
        if lost:
            names = [
                f"{r.namespace}/{' '.join(scope_of(r))}/{r.id}" for r in (results[k] for k in lost)
            ]
            msg = (
                f"{len(lost)} record(s) are already stored with different content: {names[:10]}; "
                "another writer stored them under these ids at the same moment, and the first "
                "write wins, so these were not stored; the other records were written: use new "
                "ids, or add them again with replace=True to overwrite"
            )
            raise StoreInputError(msg)
        return [results[key] for key in keys]

    def _kept_first(
        self,
        pending: list[str],
        results: dict[str, Record],
        partitions: dict[str, str],
        stored: dict[str, Record],
    ) -> set[str]:
        """On a server: the new records Chroma's ``add`` did not store (another writer's first).

        Read back in one read per partition. A record another writer stored first with the same
        content (the same message sent twice) is theirs in ``results``; one with other content
        is returned. An embedded store needs no read: its writes run under one lock.
        """
        by_partition: dict[str, list[str]] = {}
        for key in pending:
            if key not in stored:
                by_partition.setdefault(partitions[key], []).append(key)
        lost: set[str] = set()
        for partition, keys in by_partition.items():
            back = self._collections.fetch(partition, keys)
            for key in keys:
                found = back.get(key)
                if found is None or found == results[key]:
                    continue  # ours (or deleted since, by a delete that came after it)
                if same_write(dataclasses.replace(results[key], seq=None), found):
                    results[key] = found
                else:
                    lost.add(key)
        return lost

    def _upsert_records(
        self,
        pending: list[str],
        results: dict[str, Record],
        vectors: dict[str, list[float]],
        partitions: dict[str, str],
        stored: dict[str, Record],
        first_wins: bool,
    ) -> None:
        cols = self._collections
        name = self._vectors.embedder.name
        metadatas = {
            k: _replacing(encode_record(results[k], name), stored.get(k), name) for k in pending
        }
        total = len(pending)
        bound = None if cols.conn.shared else EMBEDDED_WRITE_BATCH
        size = cols.batch if bound is None else max(1, min(cols.batch, bound))
        # On a server, a record new to this writer is written with Chroma's add, which keeps an
        # id's first write: another process storing the same id at the same moment is not
        # overwritten (`_kept_first` finds which writer that was). replace=True overwrites.

        def method(key: str) -> str:
            return "add" if first_wins and key not in stored else "upsert"

        order = sorted(pending, key=lambda k: (partitions[k], method(k)))  # together
        chunks = [
            (partition, verb, chunk[start : start + size])
            for partition, verb in dict.fromkeys((partitions[k], method(k)) for k in order)
            for chunk in [[k for k in order if (partitions[k], method(k)) == (partition, verb)]]
            for start in range(0, len(chunk), size)
        ]
        written: list[str] = []
        for partition, verb, chunk in chunks:
            start = len(written)
            if start:
                done = _some([results[k].id for k in written])
                before = f"; {start} of the {total} records were written ({done})"
                wrote = f"{before}, the others not: add() them all again (it is idempotent)"
                unsure = (
                    f"{before} and Chroma may have stored some of the others before failing: "
                    "add() them all again (it is idempotent)"
                )
            else:
                wrote = "; nothing was written"
                unsure = (
                    f"; Chroma may have stored some of these {total} records before failing "
                    "(they can show up once it recovers): add() them again (it is idempotent)"
                )
            upsert = partial(
                _upsert,
                cols,
                verb=verb,
                ids=chunk,
                embeddings=[vectors[k] for k in chunk],
                documents=[results[k].text for k in chunk],
                metadatas=[metadatas[k] for k in chunk],
                wrote=wrote,
                unsure=unsure,
            )
            cols.run(partition, upsert, create=True)
            written += chunk


def _replacing(meta: dict[str, Any], old: Record | None, embedder: str) -> dict[str, Any]:
    """``meta`` for an upsert over ``old``: Chroma merges metadata, so old keys are set to None.

    Without this, a replaced message would keep its predecessor's name, tool calls, date and
    metadata fields wherever the new one has none.
    """
    if old is None:
        return meta
    gone = set(encode_record(old, embedder)) - set(meta)
    return {**meta, **dict.fromkeys(gone)} if gone else meta


def _upsert(
    cols: Collections, collection: Any, *, verb: str, wrote: str, unsure: str, **data: Any
) -> None:
    call = partial(getattr(collection, verb), **data)
    cols.conn.call("write records", call, wrote=wrote, unsure=unsure)


def _plan(
    batch: list[Record], keys: list[str], stored: dict[str, Record], *, replace: bool
) -> list[str]:
    # What to do with each record: "new", "same" (stored already), "replace" or "conflict";
    # any conflict refuses the whole batch.
    actions: list[str] = []
    conflicts: list[str] = []
    for index, (record, key) in enumerate(zip(batch, keys, strict=True)):
        old = stored.get(key)
        if old is None:
            if record.seq is not None:
                raise bad_record(index, record, "seq is assigned by the store; pass seq=None")
            actions.append("new")
        elif same_content(record, old) or (not replace and same_write(record, old)):
            actions.append("same")  # a message sent again keeps its first timestamp
        elif not replace:
            kind, name = scope_of(record)
            conflicts.append(f"{record.namespace}/{kind} {name}/{record.id}")
            actions.append("conflict")
        else:
            if record.seq is not None and record.seq != old.seq:
                raise bad_record(
                    index, record, f"seq {record.seq} differs from the stored {old.seq}"
                )
            actions.append("replace")
    if conflicts:
        msg = (
            f"{len(conflicts)} record(s) are already stored with different content: "
            f"{conflicts[:10]}; pass replace=True to overwrite them or use new ids; "
            "nothing was written"
        )
        raise StoreInputError(msg)
    return actions


def _some(ids: Sequence[str]) -> str:
    shown = ", ".join(repr(i) for i in ids[:3])
    return f"{shown}, ... {ids[-1]!r}" if len(ids) > 3 else shown
