"""The task stack of an agent, kept as pinned records of its session: pushed and popped here.

`push_task` and `pop_task` store it (`ContextMemory.push_task`, `ContextMemory.pop_task`);
`ctxbudget.memory.reading.record_items.task_items` offers it: the root goal, the open path,
finished siblings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctxbudget.core.ids import internal_id
from ctxbudget.errors import StoreInputError
from ctxbudget.memory.reading.record_items import task_node
from ctxbudget.memory.reading.session_state import session_pins
from ctxbudget.store.records import Record

if TYPE_CHECKING:
    from ctxbudget.store.chroma_store import ChromaStore

__all__ = ["pop_task", "push_task", "task_records"]


def task_records(store: ChromaStore, namespace: str, session_id: str) -> list[Record]:
    """The session's stored tasks (pinned records with ``metadata["_task"]``)."""
    return [r for r in session_pins(store, namespace, session_id) if "_task" in r.metadata]


def push_task(store: ChromaStore, namespace: str, session_id: str, goal: str) -> str:
    """Store a (sub-)task under the session's current one; returns its id."""
    if not goal.strip():
        msg = "push_task needs a goal"
        raise StoreInputError(msg)
    nodes = [task_node(r) for r in task_records(store, namespace, session_id)]
    open_nodes = sorted((n for n in nodes if not n.done), key=lambda n: n.order)
    parent = open_nodes[-1].id if open_nodes else ""
    order = max((n.order for n in nodes), default=-1) + 1
    record = Record(
        id=internal_id("task", order),
        kind="pinned",
        text=goal,
        namespace=namespace,
        session_id=session_id,
        metadata={"_task": "open", "_parent": parent, "_order": order, "_scope": "session"},
    )
    return store.add([record])[0].id


def pop_task(store: ChromaStore, namespace: str, session_id: str, result: str) -> str:
    """Store the session's current task as done with ``result``; returns its id."""
    records = task_records(store, namespace, session_id)
    open_records = [r for r in records if r.metadata.get("_task") == "open"]
    if not open_records:
        msg = f"session {session_id!r} has no open task; push_task first"
        raise StoreInputError(msg)
    current = max(open_records, key=lambda r: int(r.metadata.get("_order", 0)))
    done = Record(
        id=current.id,
        kind="pinned",
        text=current.text,
        namespace=namespace,
        session_id=session_id,
        metadata={**current.metadata, "_task": "done", "_result": result},
    )
    store.add([done], replace=True)
    return current.id
