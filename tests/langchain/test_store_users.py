"""`CtxBudgetStore(user_at=)`: one user's items are never read through another's namespace.

With ``user_at=1`` (LangMem's ``("memories", "{langgraph_user_id}")``), each item lives in its
user's partition: a property over random puts of several users (labels that share leading
characters included) checks that every read through a user's namespace returns exactly that
user's items; ``delete_user`` removes a user's items and no one else's; a search or listing
that names no user reads every user's items and the shared ones, as LangGraph's InMemoryStore
answers. TTL: `test_store_ttl.py`.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.memory import InMemoryStore

from ctxbudget.errors import ConfigurationError, InvalidValueError
from ctxbudget.memory.context import ContextMemory
from langchain_ctxbudget.store import CtxBudgetStore

USERS = ["alice", "alice2", "bob", "a"]

puts = st.lists(
    st.tuples(st.sampled_from(USERS), st.sampled_from(["k1", "k2"]), st.sampled_from([(), ("x",)])),
    min_size=1,
    max_size=8,
)


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(writes=puts)
def test_a_users_namespace_reads_only_that_users_items(
    memory: ContextMemory, writes: list[tuple[str, str, tuple[str, ...]]]
) -> None:
    store = CtxBudgetStore(memory, user_at=1)
    run = f"r{time.monotonic_ns()}"
    model: dict[str, set[tuple[tuple[str, ...], str]]] = {u: set() for u in USERS}
    for user, key, sub in writes:
        namespace = (run, user, *sub)
        store.put(namespace, key, {"owner": user, "text": f"{user} likes lisbon"})
        model[user].add((namespace, key))
    for user in USERS:
        found = store.search((run, user), limit=100)
        assert {(i.namespace, i.key) for i in found} == model[user]
        assert all(i.value["owner"] == user for i in found)
        ranked = store.search((run, user), query="who likes lisbon?", limit=100)
        assert {(i.namespace, i.key) for i in ranked} == model[user]
        listed = store.list_namespaces(prefix=(run, user))
        assert set(listed) == {ns for ns, _ in model[user]}
        for other in USERS:
            got = store.get((run, other), "k1")
            assert got is None or got.value["owner"] == other


def test_the_user_is_the_partition_not_the_namespace_text(memory: ContextMemory) -> None:
    alice = CtxBudgetStore(memory, user_at=1)
    shared = CtxBudgetStore(memory)  # no user_at: would look in the shared values only
    alice.put(("memories", "alice"), "diet", {"text": "vegetarian"})
    with pytest.raises(ConfigurationError, match=r"put by CtxBudgetStore\(user_at=1\)"):
        shared.get(("memories", "alice"), "diet")  # refused: not a silent None (test_store_edges)
    assert memory.get_value(("memories", "alice"), "diet", user_id="alice") is not None
    assert memory.get_value(("memories", "alice"), "diet", user_id="bob") is None


def test_delete_user_removes_that_users_items_only(memory: ContextMemory) -> None:
    store = CtxBudgetStore(memory, user_at=1)
    store.put(("memories", "alice"), "k", {"text": "alice's"})
    store.put(("memories", "alice", "deep"), "k", {"text": "alice's too"})
    store.put(("memories", "bob"), "k", {"text": "bob's"})
    store.put(("memories",), "shared", {"text": "everyone's"})
    memory.delete_user("alice")
    assert store.get(("memories", "alice"), "k") is None
    assert store.search(("memories", "alice")) == []
    assert store.list_namespaces(prefix=("memories", "alice")) == []
    bob = store.get(("memories", "bob"), "k")
    assert bob is not None and bob.value == {"text": "bob's"}
    assert store.get(("memories",), "shared") is not None


def test_a_search_or_listing_that_names_no_user_reads_every_users_items(
    memory: ContextMemory,
) -> None:
    # Administrative reads (LangGraph Studio browsing a store): the same answers as
    # LangGraph's InMemoryStore, every user's partition and the shared items visited.
    store, reference = CtxBudgetStore(memory, user_at=1), InMemoryStore()
    for namespace, key, text in [
        (("memories", "alice"), "k", "alice likes lisbon"),
        (("memories", "alice", "deep"), "k2", "alice's cat"),
        (("memories", "bob"), "k", "bob likes porto"),
        (("memories",), "shared", "everyone likes coffee"),
        (("docs",), "d", "a shared document"),
    ]:
        for target in (store, reference):
            target.put(namespace, key, {"text": text})
            time.sleep(0.002)  # distinct updated_at: the newest-first order is exact
    for prefix in [("memories",), ()]:
        want = [(i.namespace, i.key) for i in reference.search(prefix, limit=100)]
        got = [(i.namespace, i.key) for i in store.search(prefix, limit=100)]
        assert got == want[::-1]  # InMemoryStore lists in put order; ours newest first
        ranked = store.search(prefix, query="who likes lisbon?", limit=100)
        assert {(i.namespace, i.key) for i in ranked} == set(want)
        assert ranked[0].key == "k" and ranked[0].namespace == ("memories", "alice")
    assert [(i.namespace, i.key) for i in store.search(("memories",), limit=2, offset=1)] == [
        (("memories", "bob"), "k"),
        (("memories", "alice", "deep"), "k2"),
    ]
    listings: list[dict[str, Any]] = [
        {},
        {"prefix": ("memories", "*")},
        {"suffix": ("alice",)},
        {"prefix": ("memories",), "max_depth": 2},
        {"prefix": ("*", "alice")},
    ]
    for kwargs in listings:
        assert store.list_namespaces(**kwargs) == reference.list_namespaces(**kwargs), kwargs
    memory.delete_user("alice")
    assert ("memories", "alice") not in store.list_namespaces()
    assert {i.key for i in store.search(())} == {"k", "shared", "d"}  # bob's and the shared
    with pytest.raises(InvalidValueError, match="drop user_id='bob'"):
        memory.search_values(("memories",), user_id="bob", all_users=True)


def test_a_batch_for_several_users_writes_nothing_if_one_put_is_refused(
    memory: ContextMemory,
) -> None:
    from langgraph.store.base import PutOp

    from ctxbudget.errors import InvalidValueError

    store = CtxBudgetStore(memory, user_at=1)
    store.put(("memories", "alice"), "k", {"v": "before"})
    batch = [
        PutOp(("memories", "alice"), "k", {"v": "after"}),
        PutOp(("memories", "bob"), "k", {"v": float("nan")}),
    ]
    with pytest.raises(InvalidValueError, match="bob"):
        store.batch(batch)
    got = store.get(("memories", "alice"), "k")
    assert got is not None and got.value == {"v": "before"}
    assert store.get(("memories", "bob"), "k") is None
