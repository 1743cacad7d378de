"""`CtxBudgetStore` at its edges: what once failed late, silently, or unlike `InMemoryStore`.

- a ttl (or ``default_ttl``) whose expiry no date can hold is refused before anything is
  written; an expiry stored before that was refused reads as never expiring; a sweep interval
  past a year is refused, and a sweeper that fails says so in its future;
- ``offset``/``limit`` page one ranking: the pages of a query search, put end to end, are the
  search of them all (keys, order and scores), as LangGraph's ``InMemoryStore`` pages;
- numpy numbers and bools in a filter compare as Python ones (as ``InMemoryStore`` compares
  them); NaN in a filter is refused;
- a blank query is no query; ``limit=0`` answers nothing; ``max_depth=0`` answers as
  ``InMemoryStore``; a str prefix of ``list_namespaces`` and a ``refresh_ttl`` that is not a
  bool are refused;
- a memory namespace whose items were put with one ``user_at`` is refused to a store opened
  with another (it would hide items, duplicate keys and un-delete them).
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.base import GetOp, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore

from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.errors import ConfigurationError, InvalidValueError
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.values.model import MAX_TTL_MINUTES
from ctxbudget.store.chroma_store import ChromaStore
from ctxbudget.store.values import ValueWrite
from langchain_ctxbudget.store import CtxBudgetStore, InvalidNamespaceError

WORDS = "lisbon cat miso cello garden train coffee piano winter river bread ocean jazz".split()
SETTINGS = settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _keys(found: list[Any]) -> list[str]:
    return [item.key for item in found]


# -- 1. ttl ---------------------------------------------------------------------------------
@SETTINGS
@given(ttl=st.floats(min_value=MAX_TTL_MINUTES, exclude_min=True, allow_infinity=False))
def test_a_ttl_no_date_can_hold_is_refused_before_anything_is_written(
    memory: ContextMemory, ttl: float
) -> None:
    store = CtxBudgetStore(memory, user_at=1)
    store.put(("memories", "ana"), "diet", {"text": "vegetarian"}, ttl=MAX_TTL_MINUTES)
    with pytest.raises(InvalidValueError, match="ttl=None"):
        store.put(("memories", "ana"), "trip", {"text": "Porto"}, ttl=ttl)
    with pytest.raises(InvalidValueError, match="1,000,000,000"):  # one user's put refused: none
        store.batch(
            [
                PutOp(("memories", "bo"), "ok", {"v": 1}),
                PutOp(("memories", "ana"), "diet", {"v": 2}, ttl=ttl),
            ]
        )
    got = store.get(("memories", "ana"), "diet")
    assert got is not None and got.value == {"text": "vegetarian"}
    assert _keys(store.search(("memories", "ana"), query="food")) == ["diet"]
    assert store.get(("memories", "ana"), "trip") is None
    assert store.get(("memories", "bo"), "ok") is None
    assert store.list_namespaces() == [("memories", "ana")]


def test_a_default_ttl_or_sweep_interval_too_long_is_refused(memory: ContextMemory) -> None:
    for ttl in ({"default_ttl": 1e10}, {"sweep_interval_minutes": 1e12}):
        with pytest.raises(ConfigurationError, match="more than"):
            CtxBudgetStore(memory, ttl=ttl)  # type: ignore[arg-type]
    store = CtxBudgetStore(memory, ttl={"default_ttl": MAX_TTL_MINUTES})
    with pytest.raises(ConfigurationError, match="a year"):
        store.start_ttl_sweeper(sweep_interval_minutes=1e12)
    store.put(("t",), "k", {"v": 1})  # the longest default ttl: dated and read back
    found = memory.get_value(("t",), "k")
    assert found is not None and found.expires_at is not None
    assert found.expires_at.year < 9999


def test_an_expiry_stored_past_what_a_date_holds_never_expires(memory: ContextMemory) -> None:
    # Written as a store before the bound would have written it (the checks bypassed).
    store = CtxBudgetStore(memory)
    store.put(("t",), "plain", {"text": "plain"})
    document = json.dumps({"text": "kept for ever"})
    huge = ValueWrite(("t",), "old", document, document, json.dumps(None), 1e14)
    memory.store.values.write(memory.namespace, None, [huge], 1_700_000_000_000_000)
    got = store.get(("t",), "old")  # refreshed on read: left as it is
    assert got is not None and got.value == {"text": "kept for ever"}
    value = memory.get_value(("t",), "old")
    assert value is not None and value.expires_at is None
    assert sorted(_keys(store.search(("t",)))) == ["old", "plain"]
    assert "old" in _keys(store.search(("t",), query="kept for ever"))
    store.delete(("t",), "old")
    assert _keys(store.search(("t",))) == ["plain"]


def test_a_sweeper_that_fails_says_so_in_its_future(memory: ContextMemory) -> None:
    store = CtxBudgetStore(memory)

    def broken() -> int:
        raise RuntimeError("sweep broke")

    memory.sweep_values = broken  # type: ignore[method-assign]
    try:
        done = store.start_ttl_sweeper(sweep_interval_minutes=0.0005)
        assert isinstance(done.exception(timeout=60), RuntimeError)
        assert store.stop_ttl_sweeper(timeout=5)
    finally:
        del memory.sweep_values


# -- 2. paging ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def paged(
    tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder
) -> Iterator[tuple[CtxBudgetStore, InMemoryStore]]:
    folder: Path = tmp_path_factory.mktemp("paged") / "chroma"
    store = CtxBudgetStore(ContextMemory(path=folder, embedder=embedder), user_at=1)
    reference = InMemoryStore(
        index={"dims": 384, "embed": embedder.embed_documents, "fields": ["text"]}
    )
    rng = random.Random(7)
    ops = [
        PutOp(
            ("docs", rng.choice(["ana", "bo"])),
            f"k{n:03d}",
            {"text": " ".join(rng.choice(WORDS) for _ in range(5)), "n": n % 7},
            index=False if n % 17 == 0 else ["text"],
        )
        for n in range(140)
    ]
    store.batch(ops)
    reference.batch(ops)
    yield store, reference
    store.close()
    store.memory.close()


@settings(max_examples=10, deadline=None)
@given(
    words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
    size=st.integers(4, 30),
    prefix=st.sampled_from([("docs",), ("docs", "ana")]),
    wanted=st.sampled_from([None, {"n": {"$gte": 3}}, {"n": 0}]),
)
def test_pages_of_a_query_search_are_one_ranking(
    paged: tuple[CtxBudgetStore, InMemoryStore],
    words: list[str],
    size: int,
    prefix: tuple[str, ...],
    wanted: dict[str, Any] | None,
) -> None:
    # Unembedded items (index=False) follow the ranked ones, and are paged too (InMemoryStore
    # pages its ranked items as one ranking, but not those: it is compared on the whole set).
    store, reference = paged
    query = " and ".join(words)
    whole = store.search(prefix, query=query, filter=wanted, limit=150)
    pages = [
        item
        for offset in range(0, len(whole) + size, size)
        for item in store.search(prefix, query=query, filter=wanted, limit=size, offset=offset)
    ]
    assert _keys(pages) == _keys(whole)
    assert [i.score for i in pages] == [i.score for i in whole]
    first = store.search(prefix, query=query, filter=wanted, limit=size)
    assert [(i.key, i.score) for i in first] == [(i.key, i.score) for i in whole[:size]]
    theirs = reference.search(prefix, query=query, filter=wanted, limit=150)
    assert sorted(_keys(whole)) == sorted(_keys(theirs))
    ranked = [i for i in whole if i.score is not None]
    assert whole[: len(ranked)] == ranked  # the unembedded follow, as InMemoryStore lists them


# -- 3. numpy in filters ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def numbers(
    tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder
) -> Iterator[tuple[CtxBudgetStore, InMemoryStore]]:
    folder = tmp_path_factory.mktemp("numbers") / "chroma"
    store = CtxBudgetStore(ContextMemory(path=folder, embedder=embedder))
    reference = InMemoryStore()
    for n in range(-4, 5):
        for st_ in (store, reference):
            st_.put(("nums",), f"k{n}", {"n": n, "x": n / 2, "b": n % 2 == 0}, index=False)
    yield store, reference
    store.close()
    store.memory.close()


numpy_numbers = st.tuples(
    st.integers(-5, 5),
    st.sampled_from([np.int8, np.int32, np.int64, np.float32, np.float64, int, float]),
).map(lambda p: p[1](p[0]))


@SETTINGS
@given(
    field=st.sampled_from(["n", "x"]),
    op=st.sampled_from([None, "$eq", "$ne", "$gt", "$gte", "$lt", "$lte"]),
    operand=numpy_numbers,
    half=st.booleans(),
)
def test_numpy_numbers_in_a_filter_compare_as_in_memory_store(
    numbers: tuple[CtxBudgetStore, InMemoryStore],
    field: str,
    op: str | None,
    operand: Any,
    half: bool,
) -> None:
    if half and isinstance(operand, np.floating | float):
        operand = type(operand)(operand / 2)  # halves: exact in float32 too
    wanted = {field: operand if op is None else {op: operand}}
    ours, theirs = (sorted(_keys(s.search(("nums",), filter=wanted, limit=50))) for s in numbers)
    assert ours == theirs, wanted


def test_numpy_bools_filter_and_nan_is_refused(
    numbers: tuple[CtxBudgetStore, InMemoryStore],
) -> None:
    store, reference = numbers
    for wanted in ({"b": np.bool_(True)}, {"b": {"$ne": np.bool_(True)}}, {"n": np.array(2)}):
        ours, theirs = (
            sorted(_keys(s.search(("nums",), filter=wanted, limit=50))) for s in numbers
        )
        assert ours == theirs and ours, wanted
    for nan in (float("nan"), np.float32("nan"), np.float64("nan")):
        with pytest.raises(InvalidValueError, match="NaN"):
            store.search(("nums",), filter={"x": {"$gt": nan}})


# -- 4 and 5. blank queries, limit=0, max_depth=0, bad arguments ------------------------------
@SETTINGS
@given(query=st.text(alphabet=string.whitespace, max_size=6))
def test_a_blank_query_is_no_query(memory: ContextMemory, query: str) -> None:
    store = CtxBudgetStore(memory)
    store.put(("memories", "ana"), "city", {"text": "Ana lives in Porto"})
    for st_ in (store, InMemoryStore()):
        st_.put(("memories", "ana"), "diet", {"text": "Ana is vegetarian"})
        found = st_.search(("memories", "ana"), query=query)
        assert "diet" in _keys(found) and all(i.score is None for i in found)
    assert _keys(store.search(("memories", "ana"), query=query)) == _keys(
        store.search(("memories", "ana"))
    )


def test_limit_zero_and_max_depth_zero_answer_as_in_memory_store(memory: ContextMemory) -> None:
    store, reference = CtxBudgetStore(memory, user_at=1), InMemoryStore()
    for st_ in (store, reference):
        st_.put(("a", "u", "c"), "k", {"v": 1})
        st_.put(("b",), "k", {"v": 1})
    for kwargs in (
        {"max_depth": 0},
        {"max_depth": 0, "offset": 1},
        {"limit": 0},
        {"prefix": ("a", "u"), "max_depth": 0},
        {"prefix": ("z",), "max_depth": 0},
    ):
        assert store.list_namespaces(**kwargs) == reference.list_namespaces(**kwargs), kwargs
    for prefix in [("a",), ("a", "u"), ()]:
        assert store.search(prefix, limit=0) == reference.search(prefix, limit=0) == []
        assert store.search(prefix, query="v", limit=0) == []
    with pytest.raises(InvalidValueError, match="limit"):
        store.search(("a",), limit=-1)


def test_bad_listing_prefixes_and_refresh_flags_are_refused(memory: ContextMemory) -> None:
    store = CtxBudgetStore(memory, user_at=1)
    store.put(("memories", "ana"), "k", {"v": 1})
    store.put(("m",), "k", {"v": 1})
    for kwargs in ({"prefix": "memories"}, {"prefix": "m"}, {"suffix": "ana"}):
        with pytest.raises(InvalidNamespaceError, match="tuple of str labels"):
            store.list_namespaces(**kwargs)  # type: ignore[arg-type]
    for refresh in ("no", 0, "false"):
        with pytest.raises(InvalidValueError, match="refresh_ttl must be True or False"):
            store.search(("memories",), refresh_ttl=refresh)  # type: ignore[arg-type]
        with pytest.raises(InvalidValueError, match="refresh_ttl"):
            store.get(("m",), "k", refresh_ttl=refresh)  # type: ignore[arg-type]
        with pytest.raises(InvalidValueError, match="refresh_ttl"):  # checked before any op runs
            store.batch([PutOp(("m",), "k2", {"v": 2}), GetOp(("m",), "k", refresh)])  # type: ignore[arg-type]
        with pytest.raises(InvalidValueError, match="refresh_ttl"):
            store.batch([PutOp(("m",), "k2", {"v": 2}), SearchOp(("m",), refresh_ttl=refresh)])  # type: ignore[arg-type]
    assert store.get(("m",), "k2") is None
    assert store.list_namespaces() == [("m",), ("memories", "ana")]


# -- 6. user_at -------------------------------------------------------------------------------
@pytest.mark.parametrize(("first", "then"), [(None, 1), (1, None), (1, 2)])
def test_a_store_opened_with_another_user_at_is_refused(
    tmp_path: Path, embedder: OnnxEmbedder, first: int | None, then: int | None
) -> None:
    folder = tmp_path / "chroma"
    memory = ContextMemory(path=folder, embedder=embedder)
    before = CtxBudgetStore(memory, user_at=first)
    before.put(("memories", "ana", "x"), "diet", {"text": "vegetarian"})
    memory.close()
    memory = ContextMemory(store=ChromaStore(folder, embedder=embedder))
    after = CtxBudgetStore(memory, user_at=then)
    calls = [
        lambda: after.get(("memories", "ana", "x"), "diet"),
        lambda: after.search(("memories",)),
        lambda: after.put(("memories", "ana", "x"), "diet", {"text": "vegan"}),
        lambda: after.delete(("memories", "ana", "x"), "diet"),
        lambda: after.list_namespaces(),
    ]
    for call in calls:
        with pytest.raises(ConfigurationError, match=f"put by CtxBudgetStore\\(user_at={first}\\)"):
            call()
    again = CtxBudgetStore(memory, user_at=first)  # the same user_at: its items, once each
    got = again.get(("memories", "ana", "x"), "diet")
    assert got is not None and got.value == {"text": "vegetarian"}
    assert [(i.namespace, i.key) for i in again.search(("memories",))] == [
        (("memories", "ana", "x"), "diet")
    ]
    assert again.list_namespaces() == [("memories", "ana", "x")]  # the record is never listed
    assert memory.list_value_namespaces(all_users=True) == [("memories", "ana", "x")]
    again.delete(("memories", "ana", "x"), "diet")
    assert again.search(("memories",)) == [] and again.list_namespaces() == []
    memory.close()


def test_another_memory_namespace_may_use_another_user_at(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    chroma = ChromaStore(tmp_path / "chroma", embedder=embedder)
    shared = CtxBudgetStore(ContextMemory(store=chroma, namespace="team"))
    users = CtxBudgetStore(ContextMemory(store=chroma, namespace="people"), user_at=1)
    shared.put(("notes",), "k", {"v": 1})
    users.put(("memories", "ana"), "k", {"v": 2})
    assert _keys(shared.search(("notes",))) == ["k"]
    assert _keys(users.search(("memories", "ana"))) == ["k"]
    chroma.close()
