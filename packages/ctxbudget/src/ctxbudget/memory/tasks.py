"""The task stack of an agent, as context: the root goal, the open path, finished siblings."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ctxbudget.core.ids import internal_id, is_internal
from ctxbudget.core.items import ContextItem, Tier

__all__ = ["TaskNode", "task_items"]


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
