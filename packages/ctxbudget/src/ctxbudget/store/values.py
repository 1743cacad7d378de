"""Keyed values in Chroma: `ContextMemory.put_value` and friends, as rows of their own partitions.

A value (`ctxbudget.memory.values`) is JSON under a namespace tuple and a key. The values of a
user live in that user's values partition, the values put without a user in the namespace's
shared one (`ctxbudget.store.partitions.values_partition`): a read for one user never opens another
user's collection, and `delete_user` drops the user's. Values partitions hold no `Record` s, so
no record read, count or migration visits them; their names are listed in ``meta`` (type
``vpart``, with their owner) for `ValueStore.sweep` and `ValueStore.owners`.

A row's Chroma id is a digest of (memory namespace, owner, namespace tuple, key): a put of the
same key replaces it (upsert), keeping its first ``created`` (read by id first, under the
store's lock). Its document is the value's JSON text; its metadata (all prefixed ``v``) holds
the namespace tuple (JSON), the key, the times (epoch microseconds: exact), the ttl, the index
paths, and its **selective keys** (`ctxbudget.store.keys` says why reads filter on keys unique
to what they read): ``vp<d>`` for each prefix of the namespace tuple of length d = 0..8 (a
digest of memory namespace, owner and prefix), ``vq<d>`` as well for a value that was embedded
and ``vn<d>`` for one that was not (it gets a placeholder vector no query reaches), ``vek`` (a
digest of the partition) for one with a ttl. A read filters on one such key and checks the
rest in Python (a prefix deeper than 8 elements too).

Every write draws the owner's stamp anew (`ctxbudget.store.stamps`: the user's, or the shared
values partition's), so copies keyed by stamps are never current after a value changed.

This module holds the writes: puts and deletes, ttl refreshes, stamping, and the upkeep (the
sweep of expired values, the owners' registry, dropping a user's values); the reads are
`ctxbudget.store.value_reads` (`ValueReads`, a base of `ValueStore`), the row codec
`ctxbudget.store.value_rows`.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from ctxbudget.store.layout import Collections
from ctxbudget.store.partitions import user_partition
from ctxbudget.store.records import json_key
from ctxbudget.store.stamps import new_generation, stamp_key
from ctxbudget.store.value_reads import ValueReads
from ctxbudget.store.value_rows import (
    KEY_DEPTH,
    ValueRow,
    ValueWrite,
    decode_row,
    expiring_key,
    micros,
    row_id,
    row_meta,
    with_expiry,
)
from ctxbudget.store.vectors import Vectors

__all__ = ["KEY_DEPTH", "ValueRow", "ValueStore", "ValueWrite"]


class ValueStore(ValueReads):
    """The keyed values of one store (`ChromaStore.values`).

    Writes, ttl refreshes, the sweep of expired values and the owners' registry are here; the
    reads (`read`, `scan`, `newest`, `nearest`) and `partition` come from `ValueReads`.
    """

    def __init__(self, collections: Collections, vectors: Vectors) -> None:
        self._collections = collections
        self._vectors = vectors

    # -- writing -----------------------------------------------------------------------------
    def write(
        self, namespace: str, user_id: str | None, writes: Sequence[ValueWrite], now: int
    ) -> list[ValueRow | None]:
        """Put or delete these values (the last write of a key wins); the rows as stored.

        One embed call for the texts, one read by id and one upsert (and delete) of the
        partition; expired values of the partition are removed in the same step.
        """
        owner = user_id or ""
        ids = [row_id(namespace, owner, w.namespace, w.key) for w in writes]
        last = {rid: n for n, rid in enumerate(ids)}
        puts = [n for rid, n in last.items() if writes[n].document is not None]
        texts = [writes[n].text for n in puts if writes[n].text is not None]
        vectors = iter(self._vectors.embed([t for t in texts if t is not None]) if texts else [])
        filler: list[float] | None = None
        embedded: dict[int, list[float]] = {}
        for n in puts:
            if writes[n].text is not None:
                embedded[n] = next(vectors)
        if embedded:
            self._vectors.check_dimension(len(next(iter(embedded.values()))))
        if len(embedded) < len(puts):
            filler = self._filler()
        cols = self._collections
        partition = self.partition(namespace, user_id)
        out: list[ValueRow | None] = [None] * len(writes)
        with cols.conn.lock:
            stored = {
                k: decode_row(d, m)
                for k, d, m in cols.part_rows(partition, ids=list(dict.fromkeys(ids)))
            }
            rows: dict[str, tuple[ValueRow, list[float]]] = {}
            latest = max((r.updated for r in stored.values()), default=now - len(puts))
            now = max(now, latest + len(puts))  # after another writer's, though it read later
            # Each put its own microsecond in the batch's order, the last at now (newest last).
            for at, n in enumerate(sorted(puts), start=now - len(puts) + 1):
                w = writes[n]
                before = stored.get(ids[n])
                created = before.created if before is not None and before.live(now) else at
                expires = None if w.ttl is None else now + micros(w.ttl)
                row = ValueRow(
                    w.namespace, w.key, w.document or "", created, at, expires, w.ttl, w.index
                )
                rows[ids[n]] = (row, embedded.get(n) or filler or [])
            gone = [rid for rid, n in last.items() if writes[n].document is None and rid in stored]
            if rows:
                self._upsert(partition, namespace, owner, rows)
            cols.delete_in(partition, gone)
            self._sweep_partition(partition, now)
            self._stamp(namespace, user_id, partition, now)
        for n, rid in enumerate(ids):
            if last[rid] == n and rid in rows:
                out[n] = rows[rid][0]
        return out

    def _filler(self) -> list[float]:
        # A value that is not embedded still needs a vector in Chroma: a unit placeholder of the
        # collection's dimension, which no query reaches (queries filter on ``vq`` keys).
        info = self._vectors.info()
        dimension = info[1] if info is not None else len(self._vectors.embed(["value"])[0])
        if info is None:
            self._vectors.check_dimension(dimension)
        return [1.0] + [0.0] * (dimension - 1)

    def _upsert(
        self,
        partition: str,
        namespace: str,
        owner: str,
        rows: dict[str, tuple[ValueRow, list[float]]],
    ) -> None:
        cols = self._collections
        keys = list(rows)
        metas = [row_meta(namespace, owner, partition, rows[k][0]) for k in keys]

        def upsert(collection: Any) -> None:
            for start in range(0, len(keys), cols.batch):
                end = start + cols.batch
                cols.conn.call(
                    "write values",
                    partial(
                        collection.upsert,
                        ids=keys[start:end],
                        embeddings=[rows[k][1] for k in keys[start:end]],
                        documents=[rows[k][0].document for k in keys[start:end]],
                        metadatas=metas[start:end],
                    ),
                    wrote="; some values may be written: put them again",
                )

        cols.run(partition, upsert, create=True)

    def _stamp(self, namespace: str, user_id: str | None, partition: str, now: int) -> None:
        cols = self._collections
        scope = partition if user_id is None else user_partition(cols.name, namespace, user_id)
        entries: dict[str, dict[str, Any]] = {
            json_key("vpart", partition): {
                "type": "vpart",
                "part": partition,
                "ns": namespace,
                "uid": user_id or "",
                "at": now,
            },
            stamp_key(scope): {"type": "stamp", "ns": namespace, "gen": new_generation()},
        }
        cols.upsert_meta(
            entries,
            action="record a values write",
            wrote="; the values were written, but copies kept elsewhere may be stale: repeat it",
        )

    def refresh(
        self, namespace: str, user_id: str | None, rows: Sequence[ValueRow], now: int
    ) -> list[ValueRow]:
        """Push the expiry of these rows (those with a ttl) forward from ``now``; the rows."""
        owner = user_id or ""
        timed = {row_id(namespace, owner, r.namespace, r.key): r for r in rows if r.ttl is not None}
        if not timed:
            return list(rows)
        new = {k: now + micros(r.ttl or 0.0) for k, r in timed.items()}
        cols = self._collections
        keys = list(new)

        def update(collection: Any) -> None:
            metas = [{"vex": new[k]} for k in keys]
            cols.conn.call(
                "refresh value ttls",
                partial(collection.update, ids=keys, metadatas=metas),
                wrote="",
            )

        with cols.conn.lock:
            cols.run(self.partition(namespace, user_id), update)
        out: list[ValueRow] = []
        for r in rows:
            k = row_id(namespace, owner, r.namespace, r.key)
            out.append(r if k not in new else with_expiry(r, new[k]))
        return out

    # -- upkeep ------------------------------------------------------------------------------
    def _sweep_partition(self, partition: str, now: int) -> int:
        cols = self._collections
        where = {"$and": [{"vek": expiring_key(partition)}, {"vex": {"$lte": now}}]}
        rows = cols.part_rows(partition, where=where, documents=False)
        cols.delete_in(partition, [k for k, _, _ in rows])
        return len(rows)

    def sweep(self, namespace: str, now: int) -> int:
        """Delete the expired values of every values partition of ``namespace``; how many."""
        cols = self._collections
        parts = cols.rows(cols.meta, where={"type": "vpart"}, documents=False)
        removed = 0
        with cols.conn.lock:
            for _, _, meta in parts:
                if meta.get("ns") == namespace:
                    removed += self._sweep_partition(str(meta["part"]), now)
        return removed

    def owners(self, namespace: str) -> list[str | None]:
        """The owners of every values partition of ``namespace`` (None: the shared one), sorted.

        From the ``vpart`` entries of ``meta`` (one read); an administrative read: as many as
        users who put values.
        """
        cols = self._collections
        parts = cols.rows(cols.meta, where={"type": "vpart"}, documents=False)
        found = {str(m.get("uid", "")) for _, _, m in parts if m.get("ns") == namespace}
        return [None if not uid else uid for uid in sorted(found)]

    def drop_user(self, namespace: str, user_id: str) -> None:
        """Delete every value of a user (`ChromaStore.delete_user`), with its registry entry."""
        cols = self._collections
        partition = self.partition(namespace, user_id)
        cols.drop(partition)
        cols.delete(cols.meta, [json_key("vpart", partition)])
