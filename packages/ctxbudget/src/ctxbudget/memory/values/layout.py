"""The rule a memory namespace's values were laid out by: `ContextMemory.value_layout`.

A door may place values by a rule the values do not carry: `CtxBudgetStore`'s ``user_at``
decides which values live in a user's partition (their namespace names the user) and which are
shared. Opened again with another rule, a store would look for a value in the wrong partition:
a get misses it, a put stores a second copy beside it, a delete leaves it behind. So the first
write through such a door records its rule (a string the door chooses), and every door object
compares its own rule with the recorded one before its first read or write.

The record is a value of the namespace's shared values partition, under `LAYOUT_SPACE`: a
namespace no put, get or search can name (its label holds a period, which every namespace
check refuses), and which every read leaves out (`is_layout`). Clearing the memory's values
partitions removes it with them. Two processes that write the first value of a namespace at
the same moment with different rules are not told apart (the check and the record are atomic
within one process only).
"""

from __future__ import annotations

import json
import threading

from ctxbudget.store.values import ValueRow, ValueStore, ValueWrite

__all__ = ["LAYOUT_KEY", "LAYOUT_SPACE", "is_layout", "value_layout"]

LAYOUT_SPACE = ("ctxbudget.layout",)
"""The namespace of the layout record (a period: no caller's namespace can equal it)."""

LAYOUT_KEY = "values"
"""The key of the layout record."""

_lock = threading.Lock()  # a check and its record, atomic within the process


def is_layout(row: ValueRow) -> bool:
    """Whether ``row`` is the layout record (left out of every read)."""
    return row.namespace == LAYOUT_SPACE


def value_layout(values: ValueStore, namespace: str, layout: str | None, now: int) -> str | None:
    """The layout recorded for ``namespace`` (None: none); ``layout`` is recorded if none was."""
    with _lock:
        row = values.read(namespace, None, [(LAYOUT_SPACE, LAYOUT_KEY)], now)[0]
        if row is not None:
            recorded = json.loads(row.document).get("layout")
            return None if recorded is None else str(recorded)
        if layout is None:
            return None
        document = json.dumps({"layout": layout}, ensure_ascii=False)
        values.write(namespace, None, [ValueWrite(LAYOUT_SPACE, LAYOUT_KEY, document)], now)
        return layout
