"""The values reads `bench_values.py --before` times against: ValueStore's before issue 43's speedups.

`nearest` queried Chroma with the prefix's key as its where clause every time; `newest` read the
prefix's ids (a where clause) to size it and started its bands from ``now``. Bound to a
`ValueStore` in place of its own methods for the "before" timings, interleaved with the current
ones in one run.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from ctxbudget.store.value_rows import KEY_DEPTH, ValueRow, decode_row, prefix_key

__all__ = ["nearest", "newest"]

_SMALL = 500


def newest(
    self: Any,
    namespace: str,
    user_id: str | None,
    prefix: tuple[str, ...],
    now: int,
    needed: int,
    keep: Callable[[ValueRow], bool],
) -> list[ValueRow]:
    """At least the ``needed`` newest live values under ``prefix`` that ``keep`` keeps.

    Newest first. Reading a row's metadata is what costs (ids alone are cheap), so a large
    prefix is read in bands of ``updated`` time going back from ``now`` (1 s, then 8x
    wider each time) until enough rows pass: every row of a band read is newer than every
    row of the next, so the newest ``needed`` are exact.
    """
    cols = self._collections
    partition = self.partition(namespace, user_id)
    depth = min(len(prefix), KEY_DEPTH)
    scope = {f"vp{depth}": prefix_key(namespace, user_id or "", prefix)}
    ids = cols.run(
        partition,
        lambda c: cols.conn.call("read", partial(c.get, where=scope, include=[])),
    )
    total = 0 if ids is None else len(ids["ids"])
    found: list[ValueRow] = []
    upper: int | None = None
    span = 1_000_000
    while total:
        lower = now - span if total > max(4 * needed, _SMALL) and span < now else None
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
        upper, span = lower, span * 8
    return sorted(found, key=lambda r: (-r.updated, r.namespace, r.key))


def nearest(
    self: Any,
    namespace: str,
    user_id: str | None,
    prefix: tuple[str, ...],
    vector: list[float],
    n: int,
    now: int,
) -> tuple[list[tuple[ValueRow, float]], bool]:
    """The ``n`` embedded values nearest ``vector`` under ``prefix``, with similarities.

    Also whether the prefix may hold more (False: every embedded value was returned). Rows
    past the prefix's 8th element or expired are left out after the read.
    """
    cols = self._collections
    depth = min(len(prefix), KEY_DEPTH)
    where = {f"vq{depth}": prefix_key(namespace, user_id or "", prefix)}

    def query(collection: Any) -> Any:
        return cols.conn.call(
            "search values",
            partial(
                collection.query,
                query_embeddings=[vector],
                n_results=n,
                where=where,
                include=["documents", "metadatas", "distances"],
            ),
        )

    got = cols.run(self.partition(namespace, user_id), query)
    if got is None:
        return [], False
    hits: list[tuple[ValueRow, float]] = []
    for doc, meta, distance in zip(
        got["documents"][0], got["metadatas"][0], got["distances"][0], strict=True
    ):
        row = decode_row(doc or "", dict(meta or {}))
        if row.namespace[: len(prefix)] == prefix and row.live(now):
            hits.append((row, max(-1.0, min(1.0, 1.0 - float(distance)))))
    return hits, len(got["ids"][0]) >= n


# -- upkeep ------------------------------------------------------------------------------
