"""What a queued context-log record is built from, off the assembly's call path.

`InclusionLog.log` (`ctxbudget.memory.log.api`) takes what it needs of an assembly and queues a
function building the record (`success_later`); the store's log writer calls it in its own
thread (`ctxbudget.store.context_log`), so building the pruned entries, counting the included
items' tokens and encoding the document cost the call nothing.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable
from typing import Any

from ctxbudget.core.ids import internal_id
from ctxbudget.core.report import AssembledContext, PrunedItem
from ctxbudget.memory.log.entries import ContextRecord, encode_record, success_record

__all__ = ["content_of", "document_of", "record_key", "success_later", "without_text"]


_QUERY = internal_id("query")


def content_of(result: AssembledContext) -> tuple[str | None, str | list[dict[str, Any]]]:
    """The query's text and the context as sent (`InclusionLogConfig.keep_context`)."""
    query = next((it.text for it in result.included if it.id == _QUERY), None)
    return query, result.to_messages() if result.format == "messages" else result.render()


def success_later(
    pruned: Callable[[], list[PrunedItem]], keep: bool, **fields: Any
) -> ContextRecord:
    """`success_record` with the pruned entries built now, in the log's writer thread."""
    entries = pruned()
    return success_record(pruned=tuple(entries if keep else map(without_text, entries)), **fields)


def without_text(pruned: PrunedItem) -> PrunedItem:
    """``pruned`` with a detail that quotes no text (a duplicate's names the kept item only)."""
    kept = pruned.duplicate_of
    quoted = "" if kept is None else f": {kept.text.replace(chr(10), ' ')[:40]!r}"
    if not quoted or not pruned.detail.endswith(quoted):  # what `Duplicate.detail` appends
        return pruned
    return dataclasses.replace(pruned, detail=pruned.detail[: -len(quoted)])


def record_key() -> tuple[str, float]:
    """A record id that sorts by time (then at random within a nanosecond), and the time."""
    now = time.time_ns()
    return f"{now:020d}-{uuid.uuid4().hex[:8]}", now / 1e9


def document_of(build: Callable[[], ContextRecord]) -> str:
    """The stored document of the record ``build`` makes."""
    return encode_record(build())
