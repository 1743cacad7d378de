"""Stored records as context items: history turns, retrieved memories, tools and tasks.

Private helpers of `ctxbudget.memory`; what a record's metadata keeps (``_tool_calls``,
``_name``, task fields) becomes the `ContextItem` fields the core renders and counts.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ctxbudget.errors import InvalidItemError
from ctxbudget.items import ContextItem, Shrink, Tier
from ctxbudget.records import Record
from ctxbudget.tasks import TaskNode
from ctxbudget.tokens import TokenCounter

__all__ = [
    "history_item",
    "prime",
    "retrieved_item",
    "task_node",
    "tool_items",
    "with_tokens",
]


def with_tokens(record: Record, tokens: dict[str, int]) -> Record:

    return dataclasses.replace(record, tokens={**record.tokens, **tokens})


def prime(counter: TokenCounter, records: Sequence[Record]) -> None:
    """Put stored token counts into the counter's cache: nothing is re-tokenized on read."""
    known = [(r.text, r.tokens[counter.name]) for r in records if counter.name in r.tokens]
    if known:
        counter.remember(known)


def history_item(record: Record) -> ContextItem:
    calls = record.metadata.get("_tool_calls")
    metadata: dict[str, Any] = {}
    if isinstance(calls, str):
        metadata["tool_calls"] = json.loads(calls)
    name = record.metadata.get("_name")
    return ContextItem(
        record.id,
        record.text,
        tier=Tier.RECENT,
        role=record.role,
        timestamp=record.timestamp,
        tool_calls=record.tool_calls,
        tool_call_id=record.tool_call_id,
        name=str(name) if name else None,
        source="history",
        metadata=metadata,
    )


def retrieved_item(record: Record, score: float) -> ContextItem:
    name = record.metadata.get("_name")
    return ContextItem(
        record.id,
        record.text,
        tier=Tier.SUMMARY if record.kind == "summary" else Tier.RETRIEVED,
        score=score,
        role=record.role if record.kind == "message" else None,
        name=str(name) if name else None,
        timestamp=record.timestamp,
        summary_of=record.summary_of,
        source=record.kind if record.kind != "document" else (record.source or "document"),
    )


def tool_items(tools: Sequence[Mapping[str, Any] | str]) -> list[ContextItem]:
    given: object = tools
    if isinstance(given, str | bytes | Mapping) or not isinstance(given, Sequence):
        msg = f"tools must be a list of tool schemas (dicts or JSON text), got {given!r:.80}"
        raise InvalidItemError(msg)
    items: list[ContextItem] = []
    for index, tool in enumerate(tools):
        if isinstance(tool, str):
            text, name = tool, f"tool:{index}"
        else:
            if not isinstance(tool, Mapping):
                msg = f"tool {index} must be a schema dict or JSON text, got {tool!r:.80}"
                raise InvalidItemError(msg)
            try:
                text = json.dumps(tool, sort_keys=True, ensure_ascii=False, default=str)
            except (TypeError, ValueError) as exc:  # non-str keys, a circular reference
                msg = f"tool {index} cannot be rendered as JSON ({exc})"
                raise InvalidItemError(msg) from exc
            inner = tool.get("function")
            function: Mapping[str, Any] = inner if isinstance(inner, Mapping) else tool
            name = f"tool:{function.get('name', index)}"
        # Tool schemas travel with the call whatever happens: never pruned.
        items.append(ContextItem(name, text, tier=Tier.TOOLS, shrink=Shrink.NEVER, source="tools"))
    return items


def task_node(record: Record) -> TaskNode:
    result = record.metadata.get("_result")
    parent = record.metadata.get("_parent")
    return TaskNode(
        id=record.id,
        goal=record.text,
        parent=str(parent) if parent else None,
        order=int(record.metadata.get("_order", 0)),
        result=str(result) if record.metadata.get("_task") == "done" else None,
    )
