"""The task stack of an agent: kept as pinned records of its session, offered as context.

`push_task` and `pop_task` store it (`ContextMemory.push_task`, `ContextMemory.pop_task`);
`task_items` offers it: the root goal, the open path, finished siblings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ctxbudget.core.ids import internal_id, is_internal
from ctxbudget.core.items import ContextItem, Tier
from ctxbudget.errors import StoreInputError
from ctxbudget.memory.session_state import session_pins
from ctxbudget.store.records import Record

if TYPE_CHECKING:
    from ctxbudget.store.chroma_store import ChromaStore

__all__ = ["TaskNode", "pop_task", "push_task", "task_items", "task_node", "task_records"]


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
