"""`CtxBudgetStore`: what LangGraph's own store tests expect, on the real embedder and Chroma.

Values round-trip exactly, namespaces are refused as LangGraph refuses them (its
``InvalidNamespaceError``, and ours), a batch answers in order with reads before puts,
``created_at`` is kept and ``updated_at`` moves, ``index`` fields and ``index=False``, the
store's options are checked, and a closed store says so. Users, TTL and async:
`test_store_users.py`, `test_store_ttl.py`, `test_store_async.py`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    PutOp,
    SearchOp,
)

from ctxbudget.errors import (
    ConfigurationError,
    CtxBudgetError,
    InvalidValueError,
    MemoryClosedError,
)
from ctxbudget.memory.context import ContextMemory
from langchain_ctxbudget.store import CtxBudgetStore


@pytest.fixture
def store(memory: ContextMemory) -> CtxBudgetStore:
    return CtxBudgetStore(memory)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(exclude_categories=("Cs",)), max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.text(st.characters(exclude_categories=("Cs",)), max_size=6), inner, max_size=4
        )
    ),
    max_leaves=20,
)


def _exact(value: Any) -> str:
    """JSON with types: 1 and 1.0 and True differ, as they must after a round trip."""
    return json.dumps(value, sort_keys=True, default=repr) + repr(_types(value))


def _types(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _types(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_types(v) for v in value]
    return type(value).__name__


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    value=st.dictionaries(
        st.text(st.characters(exclude_categories=("Cs",)), max_size=8), json_values, max_size=5
    )
)
def test_values_round_trip_exactly(store: CtxBudgetStore, value: dict[str, Any]) -> None:
    store.put(("docs", "rt"), "k", value)
    got = store.get(("docs", "rt"), "k")
    assert got is not None
    assert _exact(got.value) == _exact(value)
    assert list(got.value) == list(value)  # key order kept
    [found] = store.search(("docs", "rt"))
    assert _exact(found.value) == _exact(value)


def test_numpy_numbers_become_python_numbers(store: CtxBudgetStore) -> None:
    store.put(("docs",), "np", {"i": np.int64(3), "f": np.float32(0.5), "a": np.arange(2)})
    got = store.get(("docs",), "np")
    assert got is not None and _exact(got.value) == _exact({"i": 3, "f": 0.5, "a": [0, 1]})


@pytest.mark.parametrize(
    "value",
    [{"x": math.nan}, {"x": math.inf}, {"x": "caf\ud800e"}, {"x": {1, 2}}, {1: "int key"}],
    ids=["nan", "inf", "lone-surrogate", "set", "int-key"],
)
def test_a_value_that_is_not_json_is_refused_and_nothing_is_lost(
    store: CtxBudgetStore, value: dict[Any, Any]
) -> None:
    store.put(("docs",), "k", {"kept": True})
    with pytest.raises(InvalidValueError) as refused:
        store.put(("docs",), "k", value)
    assert isinstance(refused.value, ValueError)
    assert "'k'" in str(refused.value)
    got = store.get(("docs",), "k")
    assert got is not None and got.value == {"kept": True}


BAD_NAMESPACES = [(), ("the", "thing.about"), ("some", "fun", ""), ("a", 1), ("nul\x00",)]


@pytest.mark.parametrize(
    "namespace", BAD_NAMESPACES, ids=["empty", "period", "empty-label", "int", "nul"]
)
async def test_namespaces_are_refused_as_langgraph_refuses_them(
    store: CtxBudgetStore, namespace: tuple[Any, ...]
) -> None:
    doc = {"foo": "bar"}
    calls = [
        lambda: store.put(namespace, "foo", doc),
        lambda: store.get(namespace, "foo"),
        lambda: store.delete(namespace, "foo"),
        lambda: store.batch([PutOp(namespace, "foo", doc)]),
    ]
    if namespace:  # an empty prefix is every namespace, not an error
        calls += [
            lambda: store.search(namespace),
            lambda: store.list_namespaces(prefix=namespace),
            lambda: store.list_namespaces(suffix=namespace),
        ]
    for call in calls:
        with pytest.raises(InvalidNamespaceError) as refused:
            call()
        assert isinstance(refused.value, CtxBudgetError)
    with pytest.raises(InvalidNamespaceError):
        await store.aput(namespace, "foo", doc)
    assert store.list_namespaces() == []


async def test_langgraph_is_no_root_label_through_put_but_is_through_batch(
    store: CtxBudgetStore,
) -> None:
    doc = {"foo": "bar"}
    with pytest.raises(InvalidNamespaceError):
        store.put(("langgraph", "foo"), "bar", doc)
    with pytest.raises(InvalidNamespaceError):
        await store.aput(("langgraph", "foo"), "bar", doc)
    store.put(("foo", "langgraph", "foo"), "bar", doc)
    assert store.search(("foo", "langgraph", "foo"), query="bar")[0].value == doc
    store.batch([PutOp(("langgraph", "foo"), "bar", doc)])  # as LangGraph's own stores
    got = store.get(("langgraph", "foo"), "bar")
    assert got is not None and got.value == doc


def test_a_batch_answers_in_order_with_reads_before_puts(store: CtxBudgetStore) -> None:
    store.put(("test", "foo"), "key1", {"data": "value1"})
    store.put(("test", "bar"), "key2", {"data": "value2"})
    results = store.batch(
        [
            GetOp(("test", "foo"), "key1"),
            PutOp(("test", "bar"), "key2", {"data": "value2"}),
            SearchOp(("test",), {"data": "value1"}, 10, 0),
            ListNamespacesOp(None, None, 10, 0),
            GetOp(("test",), "key3"),
            PutOp(("test",), "key3", {"data": "value3"}),
            GetOp(("test",), "key3"),
        ]
    )
    assert isinstance(results[0], Item) and results[0].value == {"data": "value1"}
    assert results[1] is None
    assert [i.key for i in results[2]] == ["key1"]  # type: ignore[union-attr]
    assert results[3] == [("test", "bar"), ("test", "foo")]
    assert results[4] is None and results[6] is None  # the put came after the reads
    assert store.get(("test",), "key3") is not None


def test_the_last_put_of_a_key_in_a_batch_wins(store: CtxBudgetStore) -> None:
    store.batch(
        [PutOp(("a",), "k", {"v": 1}), PutOp(("a",), "k", None), PutOp(("a",), "k", {"v": 3})]
    )
    got = store.get(("a",), "k")
    assert got is not None and got.value == {"v": 3}


def test_created_at_is_kept_and_updated_at_moves(store: CtxBudgetStore) -> None:
    store.put(("test", "documents"), "doc1", {"title": "Test"})
    first = store.get(("test", "documents"), "doc1")
    store.put(("test", "documents"), "doc1", {"title": "Updated"})
    second = store.get(("test", "documents"), "doc1")
    assert first is not None and second is not None
    assert second.created_at == first.created_at
    assert second.updated_at > first.updated_at
    assert first.created_at.tzinfo is not None
    assert second.value == {"title": "Updated"}
    store.delete(("test", "documents"), "doc1")
    assert store.get(("test", "documents"), "doc1") is None
    store.put(("test", "documents"), "doc1", {"title": "Again"})
    third = store.get(("test", "documents"), "doc1")
    assert third is not None and third.created_at > first.created_at


def test_search_stops_at_label_boundaries(store: CtxBudgetStore) -> None:
    for namespace in [("foo",), ("foo", "child"), ("foobar",), ("foo2",), ("user_1",), ("a%b",)]:
        store.put(namespace, "k", {"v": 1})

    def spaces(prefix: tuple[str, ...]) -> set[tuple[str, ...]]:
        return {i.namespace for i in store.search(prefix, limit=100)}

    assert spaces(("foo",)) == {("foo",), ("foo", "child")}
    assert spaces(("fo",)) == set()
    assert spaces(("user_1",)) == {("user_1",)}
    assert len(spaces(())) == 6
    assert set(store.list_namespaces(suffix=("child",))) == {("foo", "child")}


def test_query_ranks_indexed_fields_and_unindexed_items_follow(memory: ContextMemory) -> None:
    store = CtxBudgetStore(memory, index={"fields": ["text"]})
    store.put(("docs",), "lisbon", {"text": "I moved to Lisbon last spring", "other": "cello"})
    store.put(("docs",), "cello", {"text": "I play the cello on Sundays"})
    store.put(("docs",), "hidden", {"text": "Lisbon again"}, index=False)
    store.put(("docs",), "paths", {"note": "Lisbon trams", "text": "nothing"}, index=["note"])
    found = store.search(("docs",), query="where did I move to? Lisbon")
    assert found[0].key in ("lisbon", "paths")
    assert found[-1].key == "hidden" and found[-1].score is None
    assert all(i.score is not None and 0 <= i.score <= 1 for i in found[:-1])
    assert [
        i.key for i in store.search(("docs",), query="Lisbon", filter={"text": "Lisbon again"})
    ] == ["hidden"]


def test_non_ascii_values_are_found_by_their_own_text(store: CtxBudgetStore) -> None:
    texts = {"1": "这是中文", "2": "これは日本語です", "3": "이건 한국어야", "4": "Это русский"}
    for key, text in texts.items():
        store.put(("user_123", "memories"), key, {"text": text})
    for key, text in texts.items():
        assert store.search(("user_123", "memories"), query=text)[0].key == key


@pytest.mark.parametrize(
    "options",
    [
        {"index": {"embed": "openai:text-embedding-3-small", "fields": ["text"]}},
        {"index": {"dims": 384}},
        {"index": {"fields": "text"}},
        {"index": {"feilds": ["text"]}},
        {"ttl": {"omit_expired": False}},
        {"ttl": {"default_ttl": math.nan}},
        {"ttl": {"refresh_on_read": "yes"}},
        {"ttl": {"defualt_ttl": 5}},
        {"user_at": -1},
        {"user_at": True},
        {"user_at": "1"},
    ],
)
def test_options_are_checked(memory: ContextMemory, options: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        CtxBudgetStore(memory, **options)


def test_memory_and_its_arguments_are_not_both_given(memory: ContextMemory, tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="either"):
        CtxBudgetStore(memory, path=tmp_path)


def test_search_arguments_are_checked_by_the_core(store: CtxBudgetStore) -> None:
    for bad in [
        {"limit": -1},
        {"limit": True},
        {"limit": "3"},
        {"offset": -1},
        {"query": "caf\ud800"},
    ]:
        with pytest.raises(CtxBudgetError):
            store.search(("docs",), **bad)
    assert store.search(("docs",), limit=np.int64(3)) == []
    assert store.search(("docs",), limit=0) == []  # as LangGraph's InMemoryStore answers


def test_a_closed_store_says_so_and_a_memory_passed_in_stays_open(memory: ContextMemory) -> None:
    store = CtxBudgetStore(memory)
    store.close()
    store.close()  # again: nothing
    for call in (
        lambda: store.get(("a",), "k"),
        lambda: store.put(("a",), "k", {}),
        lambda: store.search(("a",)),
    ):
        with pytest.raises(MemoryClosedError, match="closed"):
            call()
    memory.put_value(("a",), "k", {"still": "open"})


def test_a_store_that_opened_its_memory_closes_it(tmp_path: Path, embedder: object) -> None:
    with CtxBudgetStore(path=tmp_path / "chroma", embedder=embedder) as store:
        store.put(("a",), "k", {"v": 1})
    with pytest.raises(MemoryClosedError):
        store.memory.get_value(("a",), "k")
    with pytest.raises(MemoryClosedError):
        store.get(("a",), "k")
    with CtxBudgetStore(path=tmp_path / "chroma", embedder=embedder) as again:
        got = again.get(("a",), "k")
        assert got is not None and got.value == {"v": 1}


def test_the_store_without_langgraph_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    import langchain_ctxbudget
    from ctxbudget import MissingDependencyError

    monkeypatch.delitem(sys.modules, "langchain_ctxbudget.store", raising=False)
    monkeypatch.setitem(sys.modules, "langgraph.store.base", None)  # as if not installed
    with pytest.raises(MissingDependencyError, match=r"langchain-ctxbudget\[agents\]"):
        langchain_ctxbudget.CtxBudgetStore  # noqa: B018
