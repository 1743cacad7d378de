"""Adding records: check everything, embed, plan under the lock, number messages, write.

Everything is checked before anything is written, and a failure says what may have been
written: re-adding a record whose content is stored is a no-op, so repeating a failed ``add`` is
always safe. Embedding is the slow part: it runs before the store's lock is taken; under the
lock the stored records are read again, and only what they now call for is embedded.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import partial

from ctxbudget.errors import StoreError, StoreInputError
from ctxbudget.store.layout import Collections
from ctxbudget.store.migration import LayoutVersion
from ctxbudget.store.records import Record, encode_record, record_key, same_content, scope_of
from ctxbudget.store.sequences import Sequences
from ctxbudget.store.validate import bad_record, check_record
from ctxbudget.store.vectors import Vectors

__all__ = ["Writer", "check_batch", "unwritten"]


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
    except StoreInputError:
        raise
    except StoreError as exc:
        msg = f"{exc}; nothing was written"
        raise StoreError(msg) from exc.__cause__


class Writer:
    """Adds checked records to one store (`ChromaStore.add` after `check_batch`)."""

    def __init__(
        self,
        collections: Collections,
        vectors: Vectors,
        sequences: Sequences,
        layout: LayoutVersion,
    ) -> None:
        self._collections = collections
        self._vectors = vectors
        self._sequences = sequences
        self._layout = layout

    def add(self, batch: list[Record], *, replace: bool) -> list[Record]:
        """Store a checked, non-empty batch; see `ChromaStore.add`."""
        cols, vectors_of = self._collections, self._vectors
        keys = [record_key(r.namespace, scope_of(r), r.id) for r in batch]
        # Embedding is the slow part: do it before taking the lock, then plan again under it.
        vectors: dict[str, list[float]] = {}
        with unwritten():
            vectors_of.embed_needed(batch, keys, cols.fetch(keys), vectors, replace=replace)
        with cols.conn.lock:
            with unwritten():
                stored = cols.fetch(keys)
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
            return self._write(batch, keys, stored, actions, vectors)

    def _write(
        self,
        batch: list[Record],
        keys: list[str],
        stored: dict[str, Record],
        actions: list[str],
        vectors: dict[str, list[float]],
    ) -> list[Record]:
        results: dict[str, Record] = {}
        pending: list[str] = []
        numbering: dict[tuple[str, str], list[str]] = {}
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
            results[key] = dataclasses.replace(record, seq=seq)
            pending.append(key)
        if not pending:
            return [results[key] for key in keys]
        sessions = {
            (r.namespace, r.session_id) for k in pending if (r := results[k]).session_id is not None
        }
        with unwritten():
            counters = self._sequences.counters(sessions)
            for (ns, sid), session_keys in sorted(numbering.items()):
                counter = counters.get((ns, sid), -1)
                seqs = self._sequences.take(ns, sid, counter, len(session_keys))
                for seq, key in zip(seqs, session_keys, strict=True):
                    results[key] = dataclasses.replace(results[key], seq=seq)
        self._upsert_records(pending, results, vectors)
        self._sequences.update(pending, results, counters)
        return [results[key] for key in keys]

    def _upsert_records(
        self, pending: list[str], results: dict[str, Record], vectors: dict[str, list[float]]
    ) -> None:
        cols = self._collections
        name = self._vectors.embedder.name
        total = len(pending)
        for start in range(0, total, cols.batch):
            chunk = pending[start : start + cols.batch]
            if start:
                done = _some([results[k].id for k in pending[:start]])
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
            cols.conn.call(
                "write records",
                partial(
                    cols.records.upsert,
                    ids=chunk,
                    embeddings=[vectors[k] for k in chunk],
                    documents=[results[k].text for k in chunk],
                    metadatas=[encode_record(results[k], name) for k in chunk],
                ),
                wrote=wrote,
                unsure=unsure,
            )


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
        elif same_content(record, old):
            actions.append("same")
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
