"""`ValueStore`'s reads of keyed values: by key, by prefix, newest first, nearest a vector.

One of `ValueStore`'s bases (`ctxbudget.store.values` describes the rows, their partitions and
the selective keys these reads filter on). Every read opens one values partition, the one of
its user (or the namespace's shared one), filters on one selective key where it can and checks
the rest in Python; expired rows are left out (deleting them is `ValueStore`'s upkeep).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from ctxbudget.store.layout import Collections
from ctxbudget.store.partitions import values_partition
from ctxbudget.store.records import json_key
from ctxbudget.store.replies import get_reply, query_reply
from ctxbudget.store.value_rows import (
    KEY_DEPTH,
    ValueRow,
    decode_row,
    live_under,
    prefix_key,
    row_id,
)

__all__ = ["ValueReads"]

_SMALL = 500  # a prefix of at most this many values is read at once
_EXACT = 300  # a partition of at most this many values is searched exactly (see `nearest`)
_ASKED = 128  # the fewest rows a query of the index asks for (see `_asked`)


class ValueReads:
    """`ValueStore`'s reads (one of its bases): rows of one values partition, live at ``now``."""

    _collections: Collections

    def partition(self, namespace: str, user_id: str | None) -> str:
        """The collection of the values of ``user_id`` (None: the shared ones) in ``namespace``."""
        return values_partition(self._collections.name, namespace, user_id)

    def read(
        self,
        namespace: str,
        user_id: str | None,
        pairs: Sequence[tuple[tuple[str, ...], str]],
        now: int,
    ) -> list[ValueRow | None]:
        """The live values at these (namespace tuple, key) pairs (None: none), by one read."""
        owner = user_id or ""
        ids = [row_id(namespace, owner, space, key) for space, key in pairs]
        if not ids:
            return []
        got = self._collections.part_rows(
            self.partition(namespace, user_id), ids=list(dict.fromkeys(ids))
        )
        found = {k: decode_row(d, m) for k, d, m in got}
        return [r if (r := found.get(k)) is not None and r.live(now) else None for k in ids]

    def scan(
        self,
        namespace: str,
        user_id: str | None,
        prefix: tuple[str, ...],
        now: int,
        *,
        embedded: bool | None = None,
        documents: bool = True,
    ) -> list[ValueRow]:
        """The live values under ``prefix`` (``embedded``: only those that were / were not)."""
        field = {None: "vp", True: "vq", False: "vn"}[embedded]
        depth = min(len(prefix), KEY_DEPTH)
        where = {f"{field}{depth}": prefix_key(namespace, user_id or "", prefix)}
        got = self._collections.part_rows(
            self.partition(namespace, user_id), where=where, documents=documents
        )
        rows = (decode_row(d or "", m) for _, d, m in got)
        return [r for r in rows if r.namespace[: len(prefix)] == prefix and r.live(now)]

    def newest(
        self,
        namespace: str,
        user_id: str | None,
        prefix: tuple[str, ...],
        now: int,
        needed: int,
        keep: Callable[[ValueRow], bool],
    ) -> list[ValueRow]:
        """At least the ``needed`` newest live values under ``prefix`` that ``keep`` keeps.

        Newest first. Reading a row's metadata is what costs, so a large partition is read in
        bands of ``updated`` time going back from its last write (the ``vpart`` entry's
        ``at``; else ``now``): 1 s, then 8x wider each time, until enough rows pass: every row
        of a band read is newer than every row of the next, so the newest ``needed`` are
        exact. The partition's size is Chroma's count (cheap; a where clause is not); the
        prefix's own size is read (ids only) once the first band falls short, so a small
        prefix of a large partition is read at once after it.
        """
        cols = self._collections
        partition = self.partition(namespace, user_id)
        depth = min(len(prefix), KEY_DEPTH)
        scope = {f"vp{depth}": prefix_key(namespace, user_id or "", prefix)}
        total = cols.run(partition, lambda c: int(cols.conn.call("count", c.count))) or 0
        last = now
        if total > max(4 * needed, _SMALL):  # read in bands: from the last write
            entry = cols.rows(cols.meta, ids=[json_key("vpart", partition)], documents=False)
            at = entry[0][2].get("at") if entry else None
            last = now if at is None else min(int(at), now)  # a row newer: in the first band
        found: list[ValueRow] = []
        upper: int | None = None
        span, sized = 1_000_000, False
        while total:
            big = total > max(4 * needed, _SMALL) and span < last
            lower = last - span if big else None
            band: list[dict[str, Any]] = [scope]
            band += [] if lower is None else [{"vua": {"$gte": lower}}]
            band += [] if upper is None else [{"vua": {"$lt": upper}}]
            where = band[0] if len(band) == 1 else {"$and": band}
            rows = (decode_row(d, m) for _, d, m in cols.part_rows(partition, where=where))
            found += [
                r for r in rows if r.namespace[: len(prefix)] == prefix and r.live(now) and keep(r)
            ]
            if lower is None or len(found) >= needed:
                break
            if not sized:  # the first band fell short: the prefix's own size (ids only)
                sized = True
                ids = cols.run(
                    partition,
                    lambda c: cols.conn.call("read", partial(c.get, where=scope, include=[])),
                )
                total = 0 if ids is None else len(ids["ids"])
            upper, span = lower, span * 8
        return sorted(found, key=lambda r: (-r.updated, r.namespace, r.key))

    def nearest(
        self,
        namespace: str,
        user_id: str | None,
        prefix: tuple[str, ...],
        vector: list[float],
        n: int,
        now: int,
    ) -> tuple[list[tuple[ValueRow, float]], bool]:
        """The ``n`` embedded values nearest ``vector`` under ``prefix``, with similarities.

        Also whether the prefix may hold more (False: every embedded value was returned). Rows
        past the prefix's 8th element or expired are left out after the read. Ties (one same
        text) go to the newest, then by namespace and key, as `ranking` orders them.

        A partition of at most `_EXACT` values is searched exactly: its vectors are read and
        compared in numpy (as fast as a query at that size). Chroma's HNSW graph links
        identical vectors to each other and can leave a distinct value unreachable: in a
        fresh partition, one value among 200 with one same text was not found by a query for
        it even at 100 results, nor by a query filtered on its own prefix among 1,000.

        A larger partition is queried: a where clause is most of a query's time (Chroma
        evaluates it over the partition: ~60 ms at 10,000 values, ~5 without) and a partition
        mostly holds one prefix, so the ``n + n / 4 + 1`` nearest of the partition are read
        first, kept when ``n`` are the prefix's embedded values and the read does not end in
        a tie (identical vectors: where the graph strands values, and a tie read partly
        cannot be ordered). Else the prefix's own embedded values are searched: exactly when
        they are at most `_EXACT`, by a query filtered on the prefix's key when it returns
        more than ``n`` rows not ending in a tie, and exactly otherwise (a prefix with many
        identical values costs a read of its vectors).
        """
        partition = self.partition(namespace, user_id)
        depth = min(len(prefix), KEY_DEPTH)
        field = f"vq{depth}"
        key = prefix_key(namespace, user_id or "", prefix)
        cols = self._collections
        total = cols.run(partition, lambda c: int(cols.conn.call("count", c.count))) or 0
        if total <= _EXACT:
            got = self._vectors_of(partition, None, None)
            return self._exact(partition, got, vector, n, field, key, prefix, now)
        wide = _asked(n)
        found = self._query(partition, vector, wide, None)
        if found is not None:
            rows, read = found
            hits = sorted(((r, s) for r, s, meta in rows if meta.get(field) == key), key=_best)
            if (len(hits) >= n or read < wide) and not (read == wide and _tied_end(rows)):
                # Sorted first: Chroma returns a tie in any order, and a cut inside one must
                # keep the same rows whatever ``n`` (pages put end to end are one search).
                return live_under(hits[:n], prefix, now), len(hits) >= n
        where = {field: key}
        got = self._vectors_of(partition, where, _EXACT + 1)
        if got is None or len(got[0]) <= _EXACT:
            return self._exact(partition, got, vector, n, field, key, prefix, now)
        found = self._query(partition, vector, n + 1, where)
        if found is not None and found[1] > n and not _tied_end(found[0]):
            return live_under(
                sorted(((r, s) for r, s, _ in found[0][:n]), key=_best), prefix, now
            ), True
        got = self._vectors_of(partition, where, None)
        return self._exact(partition, got, vector, n, field, key, prefix, now)

    def _vectors_of(
        self, partition: str, where: dict[str, Any] | None, limit: int | None
    ) -> tuple[list[str], Any] | None:
        """The ids and vectors of a partition's rows passing ``where`` (at most ``limit``)."""
        cols = self._collections

        def vectors(collection: Any) -> Any:
            def read() -> Any:
                got = collection.get(where=where, limit=limit, include=["embeddings"])
                return get_reply(got, asked=None, include=["embeddings"])

            return cols.conn.call("read", read)

        got = cols.run(partition, vectors)
        if got is None or not got["ids"]:
            return None
        return list(got["ids"]), np.asarray(got["embeddings"], dtype=np.float64)

    def _exact(
        self,
        partition: str,
        got: tuple[list[str], Any] | None,
        vector: list[float],
        n: int,
        field: str,
        key: str,
        prefix: tuple[str, ...],
        now: int,
    ) -> tuple[list[tuple[ValueRow, float]], bool]:
        """`nearest` among the vectors ``got`` (no metadata read: that is what costs).

        The rows are then read best first, in growing chunks, until ``n`` of the prefix's
        embedded values and every row tied with the ``n``-th are in hand; ties go to the
        newest, then by namespace and key.
        """
        if got is None:
            return [], False
        cols = self._collections
        ids, matrix = got
        query = np.asarray(vector, dtype=np.float64)
        norms = np.linalg.norm(matrix, axis=1) * float(np.linalg.norm(query))
        dots = (matrix * query).sum(axis=1)  # by row: a BLAS product differs at the last bit
        sims = np.clip(np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0), -1, 1)
        order = [int(i) for i in np.argsort(-sims, kind="stable")]
        hits: list[tuple[ValueRow, float]] = []
        start, step = 0, n + n // 4 + 1
        while start < len(order) and (len(hits) < n or sims[order[start]] >= hits[n - 1][1]):
            chunk = order[start : start + step]
            start, step = start + step, step * 4
            rows = {k: (d, m) for k, d, m in cols.part_rows(partition, ids=[ids[i] for i in chunk])}
            for i in chunk:
                doc, meta = rows.get(ids[i], ("", {}))
                if meta.get(field) == key:
                    hits.append((decode_row(doc, meta), float(sims[i])))
            hits.sort(key=_best)  # the n-th is the n-th best read so far
        return live_under(hits[:n], prefix, now), len(hits) > n or start < len(order)

    def _query(
        self, partition: str, vector: list[float], n: int, where: dict[str, Any] | None
    ) -> tuple[list[tuple[ValueRow, float, dict[str, Any]]], int] | None:
        """The ``n`` rows nearest ``vector`` (passing ``where``), and how many were read."""
        cols = self._collections

        def query(collection: Any) -> Any:
            return cols.conn.call(
                "search values",
                lambda: query_reply(
                    collection.query(
                        query_embeddings=[vector],
                        n_results=n,
                        where=where,
                        include=["documents", "metadatas", "distances"],
                    ),
                    queries=1,
                    k=n,
                ),
            )

        got = cols.run(partition, query)
        if got is None:
            return None
        rows = [
            (decode_row(doc or "", m), max(-1.0, min(1.0, 1.0 - float(distance))), m)
            for doc, meta, distance in zip(
                got["documents"][0], got["metadatas"][0], got["distances"][0], strict=True
            )
            for m in [dict(meta or {})]
        ]
        return rows, len(got["ids"][0])


def _best(hit: tuple[ValueRow, float]) -> tuple[float, int, tuple[str, ...], str]:
    """Most similar first; a tie (one same text) to the newest, then by namespace and key."""
    row, similarity = hit
    return (-similarity, -row.updated, row.namespace, row.key)


def _tied_end(rows: Sequence[tuple[ValueRow, float, dict[str, Any]]]) -> bool:
    """Whether a read ends inside a tie: the rows past it may tie with its last (or strand)."""
    return len(rows) >= 2 and rows[-1][1] == rows[-2][1]


def _asked(n: int) -> int:
    """How many rows a search of the index asks for, to keep ``n``: the same for many ``n``.

    Chroma's HNSW search explores ``max(ef, k)`` candidates (ef: 100) and the answers of two
    explorations differ where the graph is approximate: asked ``n + n / 4 + 1`` rows, pages
    put end to end were not one search (an item on two pages, another on none, one fresh
    store in three at 420 values, until 2026-12-01). Asked a power of two, at least `_ASKED`,
    every page within the first 100 results explores the same candidates, and so does each
    larger page with its neighbours.
    """
    return max(_ASKED, 1 << (n + n // 4).bit_length())
