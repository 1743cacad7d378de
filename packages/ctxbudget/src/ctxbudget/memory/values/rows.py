"""Stored rows as `StoredValue` s, puts as the writes they make, and a row's filter check.

`ContextMemory`'s values methods (`ctxbudget.memory.values.api`) read and write through these:
a row's expiry past what a datetime holds reads as none (`ctxbudget.memory.values.model.expiry`),
and the layout record (`ctxbudget.memory.values.layout`) passes no filter.
"""

from __future__ import annotations

import json
from typing import Any

from ctxbudget.memory.values.layout import is_layout
from ctxbudget.memory.values.matching import passes
from ctxbudget.memory.values.model import (
    StoredValue,
    ValuePut,
    check_key,
    check_namespace,
    expiry,
    index_arg,
    index_text,
    json_text,
    ttl_arg,
    utc,
)
from ctxbudget.store.values import ValueRow, ValueWrite

__all__ = ["passes_row", "stored_value", "value_write"]


def passes_row(row: ValueRow, *, wanted: dict[str, Any] | None) -> bool:
    """Whether a row passes a search's filter (the layout record never does)."""
    return not is_layout(row) and passes(json.loads(row.document), wanted)


def stored_value(row: ValueRow, score: float | None = None) -> StoredValue:
    """A stored row as the `StoredValue` callers get (its value a fresh copy)."""
    return StoredValue(
        row.namespace,
        row.key,
        json.loads(row.document),
        utc(row.created),
        utc(row.updated),
        score,
        expiry(row.expires),
    )


def value_write(put: ValuePut) -> ValueWrite:
    """What a put writes, after every check of it (`InvalidValueError`: nothing written)."""
    space = check_namespace(put.namespace)
    key = check_key(put.key, space)
    if put.value is None:
        return ValueWrite(space, key, None)
    where = f"namespace {space!r}, key {key!r}"
    document = json_text(put.value, space, key)
    paths = index_arg(put.index, where)
    text = index_text(json.loads(document), paths)
    index = None if text is None else json.dumps(paths)
    return ValueWrite(space, key, document, text, index, ttl_arg(put.ttl, where))
