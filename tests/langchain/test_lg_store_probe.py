"""`CtxBudgetStore` probed as a demanding user would, beside LangGraph's `InMemoryStore`.

- an empty index path (``index={"fields": [""]}`` or ``put(..., index=[""])``) is the whole
  value, as LangGraph's stores read it: once accepted by the store and then refused on every
  put, blamed on the put;
- a bad label at the ``user_at`` position (a lone surrogate) is refused as the namespace label
  it is (`InvalidNamespaceError`, naming the namespace), not as a ``user_id`` the caller never
  passed, and nothing is written;
- a misspelled option (``pth=``, LangGraph's ``embeddings=``) is refused as a
  `ConfigurationTypeError` naming it and the options there are, before any memory is opened
  (it was ``ContextMemory.__init__``'s bare TypeError, outside ctxbudget's errors);
- ``start_ttl_sweeper`` after a ``stop_ttl_sweeper`` that timed out (a sweep was running)
  starts a sweeper: it returned the stopped one's future and nothing swept again, silently;
- a search with a query and an offset past 2**32 answers ``[]`` as `InMemoryStore` and a
  search without a query do (it raised Chroma's bare ``OverflowError``);
- the puts of one batch are timed in the batch's order, the last the newest, as each put of
  LangGraph's stores is: they shared one ``updated_at`` (one per user), so a search without
  a query listed them by namespace and key (what `lg_store_machine` caught now and then).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langgraph.store import base as lg
from langgraph.store.base import GetOp, PutOp
from langgraph.store.memory import InMemoryStore

from ctxbudget.errors import ConfigurationError, ConfigurationTypeError
from ctxbudget.memory.context import ContextMemory
from langchain_ctxbudget.store import CtxBudgetStore, InvalidNamespaceError


# -- 1. an empty index path is the whole value -------------------------------------------------
def test_an_empty_index_path_is_the_whole_value_as_in_langgraph(memory: ContextMemory) -> None:
    reference = InMemoryStore(
        index={"dims": 8, "embed": DeterministicFakeEmbedding(size=8), "fields": [""]}
    )
    store = CtxBudgetStore(memory, index={"fields": [""]})
    for each in (reference, store):
        each.put(("notes",), "tea", {"text": "Ana drinks green tea every morning"})
        each.put(("notes",), "bike", {"text": "Bo rides a bike to work"}, index=[""])
        each.put(("notes",), "both", {"text": "Cy sings in a choir"}, index=["text", ""])
    for each in (reference, store):
        found = each.search(("notes",), query="green tea in the morning")
        assert sorted(item.key for item in found) == ["bike", "both", "tea"]
        assert all(item.score is not None for item in found)  # every one was embedded
    assert store.search(("notes",), query="green tea in the morning")[0].key == "tea"


# -- 2. a bad label at the user's place is a namespace label -----------------------------------
BAD_USER = ("memories", "\ud800")

CALLS: dict[str, Callable[[CtxBudgetStore], Any]] = {
    "put": lambda s: s.put(BAD_USER, "diet", {"text": "vegetarian"}),
    "get": lambda s: s.get(BAD_USER, "diet"),
    "delete": lambda s: s.delete(BAD_USER, "diet"),
    "search": lambda s: s.search(BAD_USER, query="food"),
    "batch": lambda s: s.batch(
        [PutOp(("memories", "ana"), "trip", {"text": "Porto"}), GetOp(BAD_USER, "diet")]
    ),
}


@pytest.mark.parametrize("call", sorted(CALLS))
def test_a_bad_label_at_the_users_place_is_refused_as_a_namespace_label(
    memory: ContextMemory, call: str
) -> None:
    store = CtxBudgetStore(memory, user_at=1)
    store.put(("memories", "ana"), "diet", {"text": "vegetarian"})
    with pytest.raises(InvalidNamespaceError, match=r"namespace label '\\ud800'") as caught:
        CALLS[call](store)
    assert isinstance(caught.value, lg.InvalidNamespaceError)  # what LangGraph code catches
    assert "user_id" not in str(caught.value)  # the caller passed a namespace, not a user_id
    assert "lone surrogate" in str(caught.value)
    kept = store.get(("memories", "ana"), "diet")
    assert kept is not None and kept.value == {"text": "vegetarian"}
    assert store.get(("memories", "ana"), "trip") is None  # the batch wrote nothing
    assert store.list_namespaces() == [("memories", "ana")]


# -- 3. a misspelled option is named ---------------------------------------------------------
@pytest.mark.parametrize("option", ["pth", "embeddings", "user"])
def test_a_misspelled_option_is_refused_with_the_options_there_are(
    tmp_path: Path, option: str
) -> None:
    where = tmp_path / "memory"
    with pytest.raises(ConfigurationTypeError, match=f"no option '{option}'") as caught:
        CtxBudgetStore(path=where, **{option: "x"})
    assert isinstance(caught.value, TypeError)  # as Python's own for a bad keyword
    assert "'path'" in str(caught.value) and "'user_at'" in str(caught.value)
    assert not where.exists()  # refused before any memory was opened


def test_a_path_given_as_the_memory_says_how_to_open_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"CtxBudgetStore\(path="):
        CtxBudgetStore(str(tmp_path))  # type: ignore[arg-type]


# -- 4. a sweeper starts again after a stop that timed out -------------------------------------
def test_a_sweeper_starts_again_after_a_stop_that_timed_out(
    memory: ContextMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = CtxBudgetStore(memory)
    sweeping, release, swept = threading.Event(), threading.Event(), threading.Semaphore(0)

    def sweep() -> int:
        sweeping.set()
        assert release.wait(60)
        swept.release()
        return 0

    monkeypatch.setattr(memory, "sweep_values", sweep)
    first = store.start_ttl_sweeper(sweep_interval_minutes=0.0005)
    assert sweeping.wait(60)
    assert not store.stop_ttl_sweeper(timeout=0)  # a sweep is running: not stopped in time
    release.set()
    assert first.exception(timeout=60) is None  # the first sweeper then ends, as told
    assert swept.acquire(timeout=60)
    second = store.start_ttl_sweeper(sweep_interval_minutes=0.0005)
    assert second is not first and not second.done()  # a running sweeper, not the ended one
    assert swept.acquire(timeout=60)  # and it sweeps
    assert store.start_ttl_sweeper() is second  # the running one, while it runs
    assert store.stop_ttl_sweeper(timeout=60)
    assert second.exception(timeout=60) is None


# -- 5. a huge offset with a query -----------------------------------------------------------
@pytest.mark.parametrize("offset", [2**32, 2**63, 10**30])
def test_a_query_search_past_every_item_answers_nothing(memory: ContextMemory, offset: int) -> None:
    # (InMemoryStore answers [] here too, but for its unembedded items, which it appends to
    # every page of a query search whatever the offset: a bug of its own.)
    store = CtxBudgetStore(memory, user_at=1, index={"fields": ["text"]})
    store.put(("memories", "ana"), "diet", {"text": "vegetarian", "n": 1})
    store.put(("memories", "bo"), "diet", {"text": "nuts", "n": 2}, index=False)
    for prefix in (("memories",), ("memories", "ana")):
        for wanted in (None, {"n": 1}, {"n": 2}):
            assert store.search(prefix, query="food", filter=wanted, offset=offset) == []
            assert store.search(prefix, filter=wanted, offset=offset) == []
    found = store.search(("memories",), query="food", offset=1)
    assert [item.namespace for item in found] == [("memories", "bo")]  # offsets still page


# -- 6. the puts of a batch are timed in its order ---------------------------------------------
@pytest.mark.parametrize("user_at", [None, 1])
def test_the_puts_of_a_batch_are_newest_last(memory: ContextMemory, user_at: int | None) -> None:
    store = CtxBudgetStore(memory, user_at=user_at)
    store.put(("memories", "ana", "x"), "k0", {"n": 0})  # a key put again below
    written = [
        (("memories", "ana", "x"), "k1"),
        (("docs",), "k1"),  # shared with user_at=1: between two writes of ana
        (("memories", "ana", "x"), "k0"),
        (("docs", "bo"), "k2"),
        (("memories", "ana", "x"), "k1"),  # put again: its last put counts
        (("a",), "k9"),
    ]
    store.batch([PutOp(ns, key, {"n": n}) for n, (ns, key) in enumerate(written)])
    newest_first = [(("a",), "k9"), (("memories", "ana", "x"), "k1"), (("docs", "bo"), "k2")]
    newest_first += [(("memories", "ana", "x"), "k0"), (("docs",), "k1")]
    found = store.search((), limit=20)
    assert [(item.namespace, item.key) for item in found] == newest_first
    times = [item.updated_at for item in found]
    assert times == sorted(set(times), reverse=True)  # no two the same
    for n in range(1, 4):  # pages of one order
        assert store.search((), limit=2, offset=n) == found[n : n + 2]
    again = store.get(("memories", "ana", "x"), "k0")
    assert again is not None and again.value == {"n": 2} and again.created_at < again.updated_at
