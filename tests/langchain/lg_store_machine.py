"""`CtxBudgetStore` side by side with LangGraph's `InMemoryStore`: same operations, same answers.

A hypothesis state machine draws puts (``index`` None, False or paths), deletes, gets,
searches (prefix, filters with LangGraph's operators, limit/offset, with and without a query),
namespace listings (prefix, suffix, ``*``, ``max_depth``, limit/offset) and mixed batches, and
sends each to one of several actors (`CtxBudgetStore` objects, in this process or in worker
processes on one Chroma server) and to an `InMemoryStore`. What must agree:

- get: the value (namespace, key, value); ``created_at`` is kept by later puts of the key and
  ``updated_at`` moves forward with each put.
- search without a query: the items, in order: the newest put first (InMemoryStore orders by
  insertion, so its full answer is put in that order by the model's put counter), then
  offset/limit.
- search with a query: the same set when the page covers every match; a page of the right
  size of matching items otherwise; scores in [0, 1] and falling, then None (``index=False``
  items always None). Ranking is ours (InMemoryStore has no embedder here).
- list_namespaces: exactly, in order (InMemoryStore's namespaces that hold no item any more
  are left out first: it keeps an emptied or only-read namespace, Postgres does not).

With ``user_at=1`` too: searches and listings that name a user read that user's items, and
those that do not (a shorter prefix, ``"*"`` at the user, no prefix) every user's and the
shared ones (the administrative reads), with the same answers.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any, ClassVar

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule
from langgraph.store.base import PutOp
from langgraph.store.memory import InMemoryStore
from lg_store_commands import ops_of, run

__all__ = ["Actor", "SideBySide", "machine_settings"]

Actor = Callable[[list[dict[str, Any]], bool], Any]
"""Runs a command (a batch) on one `CtxBudgetStore`, async or not; its JSON answer."""

ROOTS = ["docs", "memories"]
USERS = ["alice", "bob"]
SUBS = ["x", "y"]
KEYS = ["k1", "k2", "k3"]
WORDS = "lisbon cat miso cello garden train coffee piano winter river bread".split()

labels = st.sampled_from(ROOTS), st.sampled_from(USERS), st.sampled_from(SUBS)
namespaces = st.integers(1, 3).flatmap(lambda n: st.tuples(*labels[:n]))
extra_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
values = st.fixed_dictionaries(
    {
        "text": st.lists(st.sampled_from(WORDS), min_size=1, max_size=5).map(" ".join),
        "n": st.integers(-3, 3),
        "tag": st.sampled_from(["red", "blue"]),
        "flag": st.booleans(),
    },
    optional={
        "nested": st.fixed_dictionaries({"a": st.integers(0, 2)}),
        "list": st.lists(st.integers(0, 2), max_size=2),
        "extra": extra_json,
    },
)
indexes = st.sampled_from([None, False, ["text"], ["tag", "nested.a"], ["list[*]"], ["missing"]])
numbers = st.integers(-3, 3)
filters = st.none() | st.one_of(
    st.builds(lambda t: {"tag": t}, st.sampled_from(["red", "blue"])),
    st.builds(lambda b: {"flag": b}, st.booleans()),
    st.builds(lambda o, k: {"n": {o: k}}, st.sampled_from(["$gt", "$gte", "$lt", "$lte"]), numbers),
    st.builds(lambda o, k: {"n": {o: k}}, st.sampled_from(["$eq", "$ne"]), numbers),
    st.builds(lambda a: {"nested": {"a": a}}, st.integers(0, 2)),
    st.builds(lambda xs: {"list": xs}, st.lists(st.integers(0, 2), max_size=2)),
    st.builds(lambda t, k: {"tag": t, "n": {"$gte": k}}, st.sampled_from(["red", "blue"]), numbers),
)
queries = st.none() | st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join)
pattern = st.sampled_from([*ROOTS, *USERS, *SUBS, "*", "nope"])


def machine_settings(examples: int, steps: int) -> settings:
    """Settings for a run: few examples, no shrinking of slow steps."""
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        phases=[Phase.explicit, Phase.reuse, Phase.generate],
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


def _row(item: dict[str, Any]) -> str:
    return json.dumps([item["ns"], item["key"], item["value"]], sort_keys=True)


class SideBySide(RuleBasedStateMachine):
    """Actors (`CtxBudgetStore`) and the reference (`InMemoryStore`) answer the same commands."""

    open_actors: ClassVar[Callable[[], tuple[list[Actor], Callable[[], None]]]]
    user_at: ClassVar[int | None] = None

    def __init__(self) -> None:
        super().__init__()
        self.actors, self._close = type(self).open_actors()
        self.ref = InMemoryStore()
        self.clock = itertools.count()
        self.put_at: dict[tuple[tuple[str, ...], str], int] = {}
        self.unindexed: set[tuple[tuple[str, ...], str]] = set()
        self.seen: dict[tuple[tuple[str, ...], str], tuple[str, str]] = {}  # created, updated

    def teardown(self) -> None:
        self._close()

    # -- draws ------------------------------------------------------------------------------
    def _prefixes(self) -> st.SearchStrategy[tuple[str, ...]]:
        return st.integers(0, 3).flatmap(lambda n: st.tuples(*labels[:n]))

    # -- rules ------------------------------------------------------------------------------
    @rule(data=st.data(), value=values, index=indexes, actor=st.integers(0, 1))
    def put(self, data: st.DataObject, value: dict[str, Any], index: Any, actor: int) -> None:
        ns, key = data.draw(namespaces), data.draw(st.sampled_from(KEYS))
        self._batch(
            actor, [{"op": "put", "ns": list(ns), "key": key, "value": value, "index": index}]
        )

    @rule(ns=namespaces, key=st.sampled_from(KEYS), actor=st.integers(0, 1))
    def delete(self, ns: tuple[str, ...], key: str, actor: int) -> None:
        self._batch(actor, [{"op": "put", "ns": list(ns), "key": key, "value": None}])

    @rule(
        ns=namespaces, key=st.sampled_from(KEYS), actor=st.integers(0, 1), use_async=st.booleans()
    )
    def get(self, ns: tuple[str, ...], key: str, actor: int, use_async: bool) -> None:
        self._batch(actor, [{"op": "get", "ns": list(ns), "key": key}], use_async)

    @rule(data=st.data(), actor=st.integers(0, 1), use_async=st.booleans())
    def search(self, data: st.DataObject, actor: int, use_async: bool) -> None:
        self._batch(actor, [self._draw_search(data)], use_async)

    @rule(data=st.data(), actor=st.integers(0, 1))
    def list_namespaces(self, data: st.DataObject, actor: int) -> None:
        self._batch(actor, [self._draw_list(data)])

    @rule(data=st.data(), actor=st.integers(0, 1), use_async=st.booleans())
    def mixed_batch(self, data: st.DataObject, actor: int, use_async: bool) -> None:
        command = []
        for kind in data.draw(
            st.lists(st.sampled_from(["put", "get", "search", "list"]), min_size=2, max_size=4)
        ):
            if kind == "put":
                ns, key = data.draw(namespaces), data.draw(st.sampled_from(KEYS))
                value = data.draw(st.none() | values)
                command.append(
                    {"op": "put", "ns": list(ns), "key": key, "value": value, "index": None}
                )
            elif kind == "get":
                ns, key = data.draw(namespaces), data.draw(st.sampled_from(KEYS))
                command.append({"op": "get", "ns": list(ns), "key": key})
            elif kind == "search":
                command.append(self._draw_search(data))
            else:
                command.append(self._draw_list(data))
        self._batch(actor, command, use_async)

    def _draw_search(self, data: st.DataObject) -> dict[str, Any]:
        return {
            "op": "search",
            "prefix": list(data.draw(self._prefixes())),
            "query": data.draw(queries),
            "filter": data.draw(filters),
            "limit": data.draw(st.integers(1, 12)),
            "offset": data.draw(st.integers(0, 4)),
        }

    def _draw_list(self, data: st.DataObject) -> dict[str, Any]:
        prefix = data.draw(st.none() | st.lists(pattern, min_size=1, max_size=3))
        return {
            "op": "list",
            "prefix": prefix,
            "suffix": data.draw(st.none() | st.lists(pattern, min_size=1, max_size=2)),
            "max_depth": data.draw(st.none() | st.integers(1, 3)),
            "limit": data.draw(st.integers(1, 12)),
            "offset": data.draw(st.integers(0, 3)),
        }

    # -- running and judging ----------------------------------------------------------------
    def _batch(self, actor: int, command: list[dict[str, Any]], use_async: bool = False) -> None:
        wanted = [self._expect(op) for op in command]
        got = self.actors[actor](command, use_async)
        assert not isinstance(got, dict), f"{command} refused: {got}"
        assert len(got) == len(command)
        for op, want, answer in zip(command, wanted, got, strict=True):
            self._judge(op, want, answer)
        self.ref.batch([op for op in ops_of(command) if isinstance(op, PutOp)])
        for op in command:
            if op["op"] == "put":
                where = (tuple(op["ns"]), op["key"])
                self.put_at[where] = next(self.clock)
                self.unindexed.discard(where)
                if op["value"] is None:
                    self.put_at.pop(where)
                    self.seen.pop(where, None)
                elif op.get("index") is False:
                    self.unindexed.add(where)

    def _prune(self) -> None:
        # InMemoryStore keeps a namespace once emptied (or only read); stores of a database don't.
        for ns in [ns for ns, items in self.ref._data.items() if not items]:
            del self.ref._data[ns]

    def _expect(self, op: dict[str, Any]) -> Any:
        self._prune()  # an InMemoryStore get leaves its namespace behind, empty
        if op["op"] == "get":
            return run(self.ref, [op])[0]
        if op["op"] == "search":
            full = run(self.ref, [{**op, "query": None, "limit": 10_000, "offset": 0}])[0]
            return sorted(full, key=lambda i: -self.put_at[(tuple(i["ns"]), i["key"])])
        if op["op"] == "list":
            return run(self.ref, [op])[0]
        return None

    def _judge(self, op: dict[str, Any], want: Any, got: Any) -> None:
        kind = op["op"]
        if kind == "put":
            assert got is None
        elif kind == "get":
            assert (got is None) == (want is None), (op, got, want)
            if got is not None:
                assert _row(got) == _row(want), (got, want)
                self._times(got)
        elif kind == "list":
            assert [tuple(ns) for ns in got] == [tuple(ns) for ns in want], (op, got, want)
        else:
            self._judge_search(op, want, got)

    def _judge_search(
        self, op: dict[str, Any], ordered: list[dict[str, Any]], got: list[Any]
    ) -> None:
        page = ordered[op["offset"] : op["offset"] + op["limit"]]
        rows = [_row(i) for i in got]
        assert len(rows) == len(set(rows)) == len(page), (op, rows, page)
        for item in got:
            self._times(item)
        if op["query"] is None:
            assert rows == [_row(i) for i in page], (op, rows, [_row(i) for i in page])
            assert all(i["score"] is None for i in got)
            return
        full = {_row(i) for i in ordered}
        assert set(rows) <= full, (op, rows, full)
        if op["offset"] == 0 and op["limit"] >= len(ordered):
            assert set(rows) == full
        scores = [i["score"] for i in got]
        ranked = [s for s in scores if s is not None]
        assert scores[: len(ranked)] == ranked, f"scored items come first: {scores}"
        assert all(0.0 <= s <= 1.0 for s in ranked), scores
        assert ranked == sorted(ranked, reverse=True), scores
        for item in got:
            if (tuple(item["ns"]), item["key"]) in self.unindexed:
                assert item["score"] is None, item

    def _times(self, item: dict[str, Any]) -> None:
        where = (tuple(item["ns"]), item["key"])
        created, updated = item["created_at"], item["updated_at"]
        assert created <= updated, item
        before = self.seen.get(where)
        if before is not None:
            assert created == before[0], (item, before)
            assert updated >= before[1], (item, before)
        self.seen[where] = (created, updated)
