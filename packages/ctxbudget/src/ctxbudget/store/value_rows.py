"""Keyed values as Chroma rows: `ValueWrite`, `ValueRow`, their ids, selective keys and metadata.

The codec of `ctxbudget.store.values` (its docstring describes the layout): what a value's row
holds and how it is read back. Times are epoch microseconds (ints: exact through Chroma).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "KEY_DEPTH",
    "ValueRow",
    "ValueWrite",
    "decode_row",
    "expiring_key",
    "live_under",
    "micros",
    "prefix_key",
    "row_id",
    "row_meta",
    "with_expiry",
]

KEY_DEPTH = 8
"""Namespace prefixes up to this length have a selective key; deeper ones are checked in Python."""

_MICROS_PER_MINUTE = 60_000_000


@dataclass(frozen=True, slots=True)
class ValueWrite:
    """One put (``document`` the value's JSON text) or delete (``document`` None) of a value.

    ``text`` is what is embedded (None: not embedded); ``index`` the index paths as JSON (kept
    so the text can be rebuilt for word search); ``ttl`` minutes or None.
    """

    namespace: tuple[str, ...]
    key: str
    document: str | None
    text: str | None = None
    index: str | None = None
    ttl: float | None = None


@dataclass(frozen=True, slots=True)
class ValueRow:
    """A stored value as read back (times in epoch microseconds; ``index`` None: not embedded)."""

    namespace: tuple[str, ...]
    key: str
    document: str
    created: int
    updated: int
    expires: int | None
    ttl: float | None
    index: str | None

    def live(self, now: int) -> bool:
        """Whether the value has not expired at ``now``."""
        return self.expires is None or self.expires > now


def live_under(
    hits: list[tuple[ValueRow, float]], prefix: tuple[str, ...], now: int
) -> list[tuple[ValueRow, float]]:
    """The hits under namespace ``prefix`` that have not expired at ``now``, in order."""
    return [(r, s) for r, s in hits if r.namespace[: len(prefix)] == prefix and r.live(now)]


def _digest(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode()).hexdigest()


def prefix_key(namespace: str, owner: str, prefix: Sequence[str]) -> str:
    """The selective key of a namespace prefix (at most `KEY_DEPTH` elements are used)."""
    return _digest("vp", namespace, owner, list(prefix[:KEY_DEPTH]))[:32]


def row_id(namespace: str, owner: str, space: Sequence[str], key: str) -> str:
    """The Chroma id of a value."""
    return _digest("value", namespace, owner, list(space), key)[:48]


def decode_row(document: str, meta: dict[str, Any]) -> ValueRow:
    """A row read back from Chroma (an expiry without a ttl is none: a refresh racing a put)."""
    ttl = meta.get("vttl")
    expires = None if ttl is None else meta.get("vex")
    index = meta.get("vix")
    return ValueRow(
        tuple(json.loads(str(meta["vns"]))),
        str(meta["vkey"]),
        document,
        int(meta["vca"]),
        int(meta["vua"]),
        None if expires is None else int(expires),
        None if ttl is None else float(ttl),
        None if index is None else str(index),
    )


def _keys(namespace: str, owner: str, space: tuple[str, ...], embedded: bool) -> dict[str, str]:
    keys: dict[str, str] = {}
    other = "vq" if embedded else "vn"
    for depth in range(min(len(space), KEY_DEPTH) + 1):
        key = prefix_key(namespace, owner, space[:depth])
        keys[f"vp{depth}"] = key
        keys[f"{other}{depth}"] = key
    return keys


OPTIONAL_KEYS = (
    *(f"{kind}{depth}" for kind in ("vp", "vq", "vn") for depth in range(KEY_DEPTH + 1)),
    "vix",
    "vttl",
    "vex",
    "vek",
)
"""Keys a row may or may not have: a put that replaces a row sets those it lacks to None (Chroma
merges an upsert's metadata into the stored one: a key left out would keep its old value)."""


def row_meta(namespace: str, owner: str, partition: str, row: ValueRow) -> dict[str, Any]:
    """The metadata a row is stored with (its fields and selective keys; None: removed)."""
    meta: dict[str, Any] = {
        **dict.fromkeys(OPTIONAL_KEYS),
        "vns": json.dumps(list(row.namespace), ensure_ascii=False),
        "vkey": row.key,
        "vca": row.created,
        "vua": row.updated,
        **_keys(namespace, owner, row.namespace, row.index is not None),
    }
    if row.index is not None:
        meta["vix"] = row.index
    if row.ttl is not None and row.expires is not None:
        meta["vttl"] = row.ttl
        meta["vex"] = row.expires
        meta["vek"] = expiring_key(partition)
    return meta


def expiring_key(partition: str) -> str:
    """The key of a partition's values that have a ttl (selective: unique to the partition)."""
    return _digest("expiring", partition)[:32]


def micros(minutes: float) -> int:
    """Minutes as microseconds (at least 1)."""
    return max(1, round(minutes * _MICROS_PER_MINUTE))


def with_expiry(row: ValueRow, expires: int) -> ValueRow:
    """``row`` expiring at ``expires`` instead."""
    return ValueRow(
        row.namespace,
        row.key,
        row.document,
        row.created,
        row.updated,
        expires,
        row.ttl,
        row.index,
    )
