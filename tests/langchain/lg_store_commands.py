"""LangGraph store operations as JSON commands, and answers as JSON: one form for every actor.

The side-by-side machine (`lg_store_machine`) sends the same command to `CtxBudgetStore` (in
this process, or in a worker process on a Chroma server: `lg_store_worker`) and to LangGraph's
`InMemoryStore`, and compares the answers. A command is a list of operations run as one batch:

- ``{"op": "put", "ns": [...], "key": k, "value": {...} | None, "index": None | False | [...]}``
- ``{"op": "get", "ns": [...], "key": k}``
- ``{"op": "search", "prefix": [...], "query": q | None, "filter": {...} | None, "limit": n,
  "offset": n}``
- ``{"op": "list", "prefix": [...] | None, "suffix": [...] | None, "max_depth": n | None,
  "limit": n, "offset": n}``

An answer per operation: None (put), an item ``{"ns", "key", "value", "created_at",
"updated_at"}`` or None (get), a list of items with ``score`` (search), a list of namespaces
(list); an error as ``{"error": class name, "message": ...}`` for the whole batch.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    SearchItem,
    SearchOp,
)

__all__ = ["answer", "ops_of", "run"]


def ops_of(command: list[dict[str, Any]]) -> list[Op]:
    """LangGraph operations of a command."""
    ops: list[Op] = []
    for each in command:
        kind = each["op"]
        if kind == "put":
            ops.append(PutOp(tuple(each["ns"]), each["key"], each["value"], each.get("index")))
        elif kind == "get":
            ops.append(GetOp(tuple(each["ns"]), each["key"]))
        elif kind == "search":
            ops.append(
                SearchOp(
                    tuple(each["prefix"]),
                    each.get("filter"),
                    each.get("limit", 10),
                    each.get("offset", 0),
                    each.get("query"),
                )
            )
        else:
            conditions = [
                MatchCondition(match_type=side, path=tuple(each[side]))
                for side in ("prefix", "suffix")
                if each.get(side) is not None
            ]
            ops.append(
                ListNamespacesOp(
                    tuple(conditions), each.get("max_depth"), each["limit"], each["offset"]
                )
            )
    return ops


def _item(item: Item) -> dict[str, Any]:
    shown: dict[str, Any] = {
        "ns": list(item.namespace),
        "key": item.key,
        "value": item.value,
        "created_at": item.created_at.isoformat(),
        "updated_at": item.updated_at.isoformat(),
    }
    if isinstance(item, SearchItem):
        shown["score"] = item.score
    return shown


def answer(results: list[Any]) -> list[Any]:
    """The JSON form of a batch's results."""
    shown: list[Any] = []
    for result in results:
        if isinstance(result, Item):
            shown.append(_item(result))
        elif isinstance(result, list):
            shown.append([_item(r) if isinstance(r, Item) else list(r) for r in result])
        else:
            shown.append(result)
    return shown


def run(store: BaseStore, command: list[dict[str, Any]], *, use_async: bool = False) -> Any:
    """Run ``command`` as one batch (``abatch`` on a fresh loop when ``use_async``)."""
    ops = ops_of(command)
    try:
        results = asyncio.run(store.abatch(ops)) if use_async else store.batch(ops)
    except ValueError as exc:
        return {"error": type(exc).__name__, "message": str(exc)}
    return answer(results)
