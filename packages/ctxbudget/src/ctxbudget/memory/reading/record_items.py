"""Stored records as context items: history turns, retrieved memories, pins, summaries, tools.

What a record's metadata keeps (``_tool_calls``, ``_name``, task fields) becomes the `ContextItem`
fields the core renders and counts; `ctxbudget.memory.reading.candidates` offers the items.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxbudget.core.ids import internal_id, is_internal
from ctxbudget.core.items import ContextItem, Shrink, Tier
from ctxbudget.core.numbers import shown
from ctxbudget.core.stored import Row, stored_items
from ctxbudget.core.tool_schemas import tool_schema_json
from ctxbudget.core.toolcalls import normalize_tool_calls, tool_call
from ctxbudget.errors import InvalidItemError
from ctxbudget.store.records import Record, scope_of, scoped_item_id
from ctxbudget.tokens.counter import TokenCounter

__all__ = [
    "STAND_IN",
    "TaskNode",
    "history_item",
    "item_id",
    "pinned_items",
    "prime",
    "retrieved_item",
    "retrieved_items",
    "stored_calls",
    "summary_items",
    "task_items",
    "task_node",
    "tool_items",
    "value_item",
    "with_tokens",
]

logger = logging.getLogger(__name__)


def item_id(record: Record, session_id: str | None) -> str:
    """The id a stored record's item gets in an assembly for ``session_id``.

    Ids are unique per scope, not across scopes, and the core treats equal ids as one item. So
    the current session's records keep their own ids (``included_ids`` shows a message as it
    was stored), and every other record's id is qualified with its scope, in ctxbudget's own id
    space where no caller id can be: ``ctxbudget:user:["u1","diet"]`` for a user-wide pin,
    ``ctxbudget:session:["s2","m4"]`` for another session's message or summary,
    ``ctxbudget:collection:["kb","guide#0"]`` for a document chunk.

    >>> item_id(Record(id="diet", kind="pinned", text="x", user_id="u1"), "s1")
    'ctxbudget:user:["u1","diet"]'
    """
    if session_id is not None and record.session_id == session_id:
        return record.id
    return scoped_item_id(scope_of(record), record.id)


def stored_calls(record: Record) -> list[dict[str, Any]] | None:
    """The canonical tool calls kept in ``metadata["_tool_calls"]`` (None: none kept).

    Written by `ContextMemory.add_messages` as a JSON list of canonical calls; data written
    before that was canonical is normalized here, and what cannot be read is logged and
    skipped rather than breaking the session's reads.
    """
    raw = record.metadata.get("_tool_calls")
    if not isinstance(raw, str):
        return None
    try:
        return normalize_tool_calls(json.loads(raw), f"stored message {record.id!r}")
    except (ValueError, InvalidItemError) as exc:
        logger.warning("stored tool calls of message %r cannot be read (%s)", record.id, exc)
        return None


def with_tokens(record: Record, tokens: dict[str, int]) -> Record:

    return dataclasses.replace(record, tokens={**record.tokens, **tokens})


def prime(counter: TokenCounter, records: Sequence[Record]) -> None:
    """Put stored token counts into the counter's cache: nothing is re-tokenized on read."""
    name = counter.name
    known = [(r.text, r.tokens[name]) for r in records if name in r.tokens]
    if known:
        counter.remember(known)


STAND_IN = "unknown_tool"
"""The name a call stored as a plain id is sent with (its name and arguments were never given)."""


def history_item(record: Record) -> ContextItem:
    # Calls only on an assistant turn (stored before writes refused them elsewhere: not sent).
    caller = record.role == "assistant"
    calls = stored_calls(record) if caller else None
    metadata: dict[str, Any] = {}
    known = {str(c.get("id")) for c in calls or ()}
    missing = [c for c in record.tool_calls if c not in known] if caller else []
    if missing:  # plain ids: a provider takes no assistant turn whose calls are only ids
        calls = [*(calls or ()), *(tool_call(c, STAND_IN, "{}") for c in missing)]
    if calls is not None:
        metadata["tool_calls"] = calls
    name = record.metadata.get("_name")
    return ContextItem(
        record.id,
        record.text,
        tier=Tier.RECENT,
        role=record.role,
        timestamp=record.timestamp,
        tool_calls=record.tool_calls if caller else (),
        tool_call_id=record.tool_call_id,
        name=str(name) if name else None,
        source="history",
        metadata=metadata,
        record_id=record.id,
        scope=scope_of(record),
    )


def retrieved_item(record: Record, score: float, session_id: str | None) -> ContextItem:
    """A stored record offered by a search, scored ``score``, in an assembly for ``session_id``."""
    return retrieved_items([record], [score], session_id)[0]


def retrieved_items(
    records: Sequence[Record], scores: Sequence[float], session_id: str | None
) -> list[ContextItem]:
    """`retrieved_item` of each record with its score (hundreds a call: one loop)."""
    # One scope tuple for them all, and each row gone once its item is made: a pool's hundreds
    # of objects fewer for the garbage collector, whose runs a turn waits for.
    own = None if session_id is None else ("session", session_id)
    return stored_items(
        _retrieved_row(r, score, own) for r, score in zip(records, scores, strict=True)
    )


def _retrieved_row(record: Record, score: float, own: tuple[str, str] | None) -> Row:
    name = record.metadata.get("_name")
    kind = record.kind
    if own is not None and record.session_id == own[1]:  # the session's own
        scope: tuple[str, str] = own
        key, covers = record.id, record.summary_of
    else:
        scope = scope_of(record)
        key = scoped_item_id(scope, record.id)
        covers = tuple(scoped_item_id(scope, i) for i in record.summary_of)
    return (
        key,
        record.text,
        Tier.SUMMARY if kind == "summary" else Tier.RETRIEVED,
        score,
        record.role if kind == "message" else None,
        record.timestamp,
        covers,
        kind if kind != "document" else (record.source or "document"),
        str(name) if name else None,
        record.id,
        scope,
    )


def value_item(
    item_id: str,
    namespace: tuple[str, ...],
    key: str,
    text: str,
    score: float,
    updated: float,
    expires: float | None = None,
) -> ContextItem:
    """A keyed value offered as context (`ctxbudget.memory.values`): ``<key>: <text>``.

    ``updated`` and ``expires`` are epoch seconds; ``metadata["expires"]`` says when a copy of
    the item (kept by an adapter between calls) stops being true.
    """
    metadata: dict[str, Any] = {"namespace": list(namespace), "key": key}
    if expires is not None:
        metadata["expires"] = expires
    return ContextItem(
        item_id,
        f"{key}: {text}",
        tier=Tier.SAVED,
        score=score,
        timestamp=updated,
        source="value",
        metadata=metadata,
    )


def tool_items(tools: Sequence[Mapping[str, Any] | str]) -> list[ContextItem]:
    given: object = tools
    if isinstance(given, str | bytes | Mapping) or not isinstance(given, Sequence):
        msg = f"tools must be a list of tool schemas (dicts or JSON text), got {shown(given)}"
        raise InvalidItemError(msg)
    items: list[ContextItem] = []
    for index, tool in enumerate(tools):
        if isinstance(tool, str):
            text, name = tool, internal_id("tool", index)
        else:
            if not isinstance(tool, Mapping):
                msg = f"tool {index} must be a schema dict or JSON text, got {shown(tool)}"
                raise InvalidItemError(msg)
            try:
                text = tool_schema_json(tool)
            except (TypeError, ValueError) as exc:  # non-str keys, a circular reference
                msg = f"tool {index} cannot be rendered as JSON ({exc})"
                raise InvalidItemError(msg) from exc
            inner = tool.get("function")
            function: Mapping[str, Any] = inner if isinstance(inner, Mapping) else tool
            name = internal_id("tool", str(function.get("name", index)))
        # Tool schemas travel with the call whatever happens: never pruned.
        items.append(ContextItem(name, text, tier=Tier.TOOLS, shrink=Shrink.NEVER, source="tools"))
    return items


def pinned_items(records: Sequence[Record], session_id: str) -> list[ContextItem]:
    """Pinned facts (session and user-wide, oldest first), then the task stack's items.

    A record is taken once per item id (see `item_id`); a task record (``metadata["_task"]``)
    joins the task stack (see `ctxbudget.memory.upkeep.tasks.task_items`).
    """
    seen: set[str] = set()
    facts: list[ContextItem] = []
    tasks: list[TaskNode] = []
    for record in sorted(records, key=lambda r: (r.timestamp or 0.0, r.id)):
        key = item_id(record, session_id)
        if key in seen:
            continue
        seen.add(key)
        state = record.metadata.get("_task")
        if state is not None:
            tasks.append(task_node(record))
            continue
        # Never pruned: user content (however large or hostile) must not displace a pin.
        facts.append(
            ContextItem(
                key,
                record.text,
                tier=Tier.PINNED,
                score=1.0,
                source="pinned",
                shrink=Shrink.NEVER,
                record_id=record.id,
                scope=scope_of(record),
            )
        )
    return facts + task_items(tasks)


def summary_items(records: Sequence[Record]) -> list[ContextItem]:
    """A session's stored summaries, in the order of the stretches they cover."""
    return [
        ContextItem(
            r.id,
            r.text,
            tier=Tier.SUMMARY,
            score=1.0,
            summary_of=r.summary_of,
            timestamp=r.timestamp,
            source="summary",
            record_id=r.id,
            scope=scope_of(r),
        )
        for r in sorted(records, key=lambda r: (int(r.metadata.get("_first_seq", 0)), r.id))
    ]


# -- the task stack (stored by ctxbudget.memory.upkeep.tasks) ------------------------------
@dataclass(frozen=True, slots=True)
class TaskNode:
    """One task: its goal, its parent, and its result once popped."""

    id: str
    goal: str
    parent: str | None
    order: int
    result: str | None = None

    @property
    def done(self) -> bool:
        """Whether the task was popped."""
        return self.result is not None


def task_node(record: Record) -> TaskNode:
    """The task a stored task record holds."""
    result = record.metadata.get("_result")
    parent = record.metadata.get("_parent")
    return TaskNode(
        id=record.id,
        goal=record.text,
        parent=str(parent) if parent else None,
        order=int(record.metadata.get("_order", 0)),
        result=str(result) if record.metadata.get("_task") == "done" else None,
    )


def task_items(tasks: Sequence[TaskNode]) -> list[ContextItem]:
    """Context items for a task stack.

    The open path (root goal to current task) is pinned: an agent must never lose what it is
    doing and why. Finished tasks whose parent is on the open path come with their results as
    high-value retrieved items; deeper finished subtrees are summarized by their own parents'
    results and left out. Items have ids in ctxbudget's own space (``ctxbudget:task:<n>``), so
    no caller id can displace them.
    """
    by_id = {t.id: t for t in tasks}
    open_tasks = sorted((t for t in tasks if not t.done), key=lambda t: t.order)
    if not open_tasks:
        return []
    current = open_tasks[-1]
    path: list[TaskNode] = []
    node: TaskNode | None = current
    while node is not None:
        path.append(node)
        node = by_id.get(node.parent) if node.parent else None
    path.reverse()
    on_path = {t.id for t in path}
    items: list[ContextItem] = []
    for depth, task in enumerate(path):
        if depth == 0:
            label = "Overall goal"
        elif task is current:
            label = "Current task"
        else:
            label = f"Open sub-task (level {depth})"
        items.append(
            ContextItem(
                id=_item_id(task),
                text=f"{label}: {task.goal}",
                tier=Tier.PINNED,
                score=10.0 - depth,
                source="task",
            )
        )
    finished = [t for t in tasks if t.done and t.parent in on_path]
    for task in sorted(finished, key=lambda t: t.order):
        items.append(
            ContextItem(
                id=_item_id(task),
                text=f"Done: {task.goal} -> {task.result}",
                tier=Tier.RETRIEVED,
                score=2.0,
                source="task",
            )
        )
    return items


def _item_id(task: TaskNode) -> str:
    # Tasks stored before ids were scoped have ids like "task:s1:0", in the callers' space.
    return task.id if is_internal(task.id) else internal_id("task", task.id)
