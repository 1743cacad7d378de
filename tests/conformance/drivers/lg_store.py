"""The LangGraph door `CtxBudgetStore`: LangGraph's long-term memory store over the memory's values.

A store keeps keyed JSON values, not a conversation: the suite's turns become values, one per
turn, in the namespace ``("memories", user, session)`` (``user_at=1``, LangMem's layout: the
user is the partition), keyed by the turn's id, valued ``{"text", "role"}``.

- ``add``: one ``put`` per turn (each acknowledged when it returns; one put each, so
  ``created_at`` orders them).
- ``send``: ``search(("memories", user, session), query=query, limit=LIMIT)``. A store takes
  no budget (its ``limit`` counts items): ``available`` is the budget it was given and nothing
  is sent as a prompt (``takes`` has no ``budget``: the fits promise is not the store's).
  ``got``: the `SearchItem`s LangGraph's caller receives, (key, ``value["text"]``) in order;
  ``chosen``: what the core chose for that call (`ContextMemory.search_values`' answer, read
  from inside: a store keeps no report), mapped the same way; ``texts``: each item's value as
  JSON.
- ``kept``: the session's values as another object (``memory``) reads them through a store of
  its own, oldest ``created_at`` first. Of the admin's removals only ``delete_user`` concerns
  values (a session, a message or a pin of the conversation is not a value):
  ``removed_user_only``.
- ``cancel_delete``: an ``abatch`` of deletes (``PutOp(..., value=None)``) of the session's
  values, cancelled as soon as it started. Its keys are the ones put so far, so even a late
  delete could not remove the turn the suite adds after it (a new key): on this door the
  cancelled promise checks that the batch is all or nothing and the new turn is kept.
- ``bad``: ``query`` is a search's query (``store.search(ns, query=value)``); any other name is
  an unknown argument of ``search``. A store's ``limit`` is LangGraph's, not the suite's ``k``
  (its refusals: tests/langchain/test_store_basics.py), and a value's text is a JSON value
  checked as one (its refusals name the JSON path, not a message): neither is in ``takes``.
- ``close``: closes the store, which opened its own memory (``CtxBudgetStore(store=...,
  namespace=...)``) and closes it too; ``after_close_each``: every operation, sync and async.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine, Sequence
from typing import Any
from unittest.mock import patch

from langgraph.store.base import GetOp, PutOp

from ctxbudget.memory.values import StoredValue
from ctxbudget.store.chroma_store import ChromaStore
from langchain_ctxbudget.store import CtxBudgetStore

from .base import Place, Received, Refusal, Turn
from .common import attempt, cancelled, raised, raised_each

__all__ = ["StoreDriver", "make"]

NS = ("memories", "conformance")
LIMIT = 100
"""Items a ``send`` asks for: more than a session of the suite holds, so nothing is cut."""


def namespace(session: str, user: str) -> tuple[str, str, str]:
    """Where the turns of ``session`` live: the user at element 1 (``user_at=1``)."""
    return ("memories", user, session)


class StoreDriver:
    """`CtxBudgetStore` (``user_at=1``) over a memory of its own on ``place``."""

    name = "lg_store"
    can = frozenset(
        {
            "add",
            "send",
            "chosen",
            "removal",
            "removed_user_only",
            "kept",
            "bad",
            "kinds",
            "close",
            "close_each",
            "cancel",
        }
    )
    takes = frozenset({"query"})

    def __init__(self, place: Place) -> None:
        chroma = ChromaStore(
            place.folder, url=place.url, embedder=place.embedder, collection=place.collection
        )
        self.store = CtxBudgetStore(
            store=chroma, namespace=place.namespace, write_behind=False, user_at=1
        )
        self.store.put(NS, "fact", {"text": "I live in Lisbon."})
        self._keys: dict[str, tuple[str, list[str]]] = {}  # session -> (user, keys put)

    def add(self, session: str, user: str, turns: Sequence[Turn]) -> None:
        """One put per turn: key the turn's id, value its text and role."""
        user_keys = self._keys.setdefault(session, (user, []))[1]
        for turn in turns:
            self.store.put(
                namespace(session, user), turn.id, {"text": turn.text, "role": turn.role}
            )
            user_keys.append(turn.id)

    def send(self, session: str, user: str, query: str, budget: int) -> Received:
        """One search of the session's namespace for ``query``."""
        return self.received(
            lambda: self.store.search(namespace(session, user), query=query, limit=LIMIT), budget
        )

    def received(self, search: Callable[[], list[Any]], budget: int) -> Received:
        """What ``search`` returned, and what the core chose for it (`search_values`)."""
        memory = self.store.memory
        answers: list[list[StoredValue]] = []
        original = memory.search_values

        def spy(*args: Any, **kwargs: Any) -> list[StoredValue]:
            found: list[StoredValue] = original(*args, **kwargs)
            answers.append(found)
            return found

        with patch.object(memory, "search_values", spy):
            items = search()
        chosen = [(v.key, str(v.value["text"])) for answer in answers for v in answer]
        return Received(
            got=[(item.key, str(item.value["text"])) for item in items],
            chosen=chosen,
            available=budget,
            texts=[json.dumps(item.value, ensure_ascii=False) for item in items],
        )

    def kept(self, memory: Any, session: str, user: str) -> list[str]:
        """The texts of the session's values as ``memory`` reads them, oldest first."""
        items = CtxBudgetStore(memory, user_at=1).search(namespace(session, user), limit=1000)
        return [str(i.value["text"]) for i in sorted(items, key=lambda i: i.created_at)]

    def cancel_delete(self, session: str) -> None:
        """Start an ``abatch`` deleting the session's values, and cancel it at once."""
        user, keys = self._keys.get(session, ("nobody", []))
        deletes = [PutOp(namespace(session, user), key, None) for key in keys]
        cancelled(lambda: self.store.abatch(deletes))

    def bad(self, argument: str, value: object) -> Refusal | None:
        """One search with ``argument=value``."""
        if argument == "query":
            return attempt(lambda: self.store.search(NS, query=value))  # type: ignore[arg-type]
        return attempt(lambda: self.store.search(NS, query="Where?", **{argument: value}))

    def close(self) -> None:
        """Close the store (and the memory it opened)."""
        self.store.close()

    def after_close(self) -> BaseException | None:
        """One get after `close`."""
        return raised(lambda: self.store.get(NS, "fact"))

    def after_close_each(self) -> dict[str, BaseException | None]:
        """Every operation of the closed store, sync and async."""
        store = self.store

        def ran(start: Callable[[], Coroutine[Any, Any, object]]) -> Callable[[], object]:
            return lambda: asyncio.run(start())

        calls: dict[str, Callable[[], object]] = {
            "get": lambda: store.get(NS, "fact"),
            "put": lambda: store.put(NS, "fact", {"text": "again"}),
            "delete": lambda: store.delete(NS, "fact"),
            "search": lambda: store.search(NS, query="Where?"),
            "list_namespaces": lambda: store.list_namespaces(prefix=NS),
            "batch": lambda: store.batch([GetOp(NS, "fact")]),
            "sweep_ttl": store.sweep_ttl,
            "aget": ran(lambda: store.aget(NS, "fact")),
            "aput": ran(lambda: store.aput(NS, "fact", {"text": "again"})),
            "adelete": ran(lambda: store.adelete(NS, "fact")),
            "asearch": ran(lambda: store.asearch(NS, query="Where?")),
            "alist_namespaces": ran(lambda: store.alist_namespaces(prefix=NS)),
            "abatch": ran(lambda: store.abatch([GetOp(NS, "fact")])),
        }
        return raised_each(calls)


def make(place: Place) -> StoreDriver:
    """The driver."""
    return StoreDriver(place)
