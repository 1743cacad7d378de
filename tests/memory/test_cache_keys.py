"""Copies kept beside the store are keyed by what never comes back (docs/architecture.md, "Caches").

Each test uses two memories (or stores) on one location, embedded and on a server, the way an
app and an admin task share a folder: what one changes, the other's next call must see, however
the changed session or user is reused after.
"""

from __future__ import annotations

import pytest

from ctxbudget import ContextMemory, MemoryConfig
from ctxbudget.memory.reading.held_indexes import SessionIndexes
from ctxbudget.memory.reading.session_index import SessionIndex
from ctxbudget.memory.reading.session_state import read_session
from ctxbudget.store.chroma_store import ChromaStore, Record
from ctxbudget.store.sessions import Stamp
from tests.conftest import StoreFactory

NS = "default"


@pytest.fixture
def two_memories(open_store: StoreFactory) -> tuple[ContextMemory, ContextMemory]:
    return (
        ContextMemory(store=open_store(), write_behind=False),
        ContextMemory(store=open_store(), write_behind=False),
    )


def _sent(memory: ContextMemory, session_id: str, query: str = "anything?") -> list[str]:
    ctx = memory.assemble(session_id, query, budget=4000)
    return [str(m.get("content")) for m in ctx.to_messages()]


def test_a_generation_is_new_with_every_entry_and_every_change(open_store: StoreFactory) -> None:
    store = open_store()
    store.add([Record(id="m1", kind="message", text="one", session_id="s", user_id="u")])
    first = store._sessions.entry(NS, "s")
    assert first is not None and first.generation
    store.delete(["m1"], namespace=NS, session_id="s")
    second = store._sessions.entry(NS, "s")
    assert second is not None and second.generation != first.generation
    store.delete_session(namespace=NS, session_id="s")
    store.add([Record(id="m1", kind="message", text="one", session_id="s", user_id="u")])
    third = store._sessions.entry(NS, "s")
    assert third is not None
    assert third.generation not in {first.generation, second.generation}
    # The counters restarted: only the generation tells the new session from the old one.
    assert (third.last, third.version) == (first.last, first.version)


def test_a_partition_dropped_by_another_store_is_registered_again(
    open_store: StoreFactory,
) -> None:
    # Two stores on one location: B's delete_user drops alice's partition; A writes there again
    # and every reader of the namespace must count what A wrote.
    a, b = open_store(), open_store()
    pin = Record(id="p1", kind="pinned", text="alice likes tea", user_id="alice")
    a.add([pin])
    assert b.delete_user(namespace=NS, user_id="alice") == 1
    a.add([Record(id="p2", kind="pinned", text="alice likes coffee", user_id="alice")])
    for store in (a, b):
        assert store.stats()["records"] == 1
        found = store.find(namespace=NS, kinds=["pinned"])
        assert [r.text for r in found] == ["alice likes coffee"]


def test_a_deleted_and_restarted_session_is_read_again_not_served_from_the_copy(
    two_memories: tuple[ContextMemory, ContextMemory],
) -> None:
    a, b = two_memories
    a.add_message("s1", "user", "alice: my PIN is 4321", id="m1", user_id="alice")
    a.add_message("s1", "assistant", "noted, alice", id="m2", user_id="alice")
    assert any("4321" in text for text in _sent(a, "s1"))
    b.delete_session("s1")
    b.add_message("s1", "user", "bob: hello", id="m1", user_id="bob")
    b.flush()
    sent = _sent(a, "s1")
    assert not any("4321" in t or "alice" in t for t in sent)
    assert any("bob: hello" in t for t in sent)
    assert a.history("s1")[0].text == "bob: hello"


def test_a_late_lower_seq_makes_the_session_copy_read_again(store: ChromaStore) -> None:
    # On a server, seqs are claimed in one order and may be stored in another. The copy was
    # extended past seq 2; seq 1 arrives later: the window read shows it, and the copy is
    # read again rather than searched without it.
    indexes = SessionIndexes()
    records = [
        Record(id=f"m{i}", kind="message", text=f"turn {i}", session_id="s") for i in range(3)
    ]
    store.add(records)
    state = read_session(store, NS, "s", query="q", user_id=None, recent_messages=5)

    def current() -> SessionIndex | None:
        return indexes.current(
            store,
            NS,
            "s",
            state.last_seq,
            state.stamp,
            episode_gap=3600.0,
            counter_name="cl100k_base",
            newest=state.newest,
        )

    index = current()
    assert index is not None and index.ids == ["m0", "m1", "m2"]
    # Take m1 out of the copy, as if the copy had been extended before m1 was stored.
    index.position.pop("m1")
    again = current()
    assert again is not index
    assert again is not None and again.ids == ["m0", "m1", "m2"]


def test_stamps_of_two_lives_of_a_session_are_never_the_same_session() -> None:
    old = Stamp("a" * 32, 3, 0)
    assert old.same_session(Stamp("a" * 32, 7, 0))
    assert not old.same_session(Stamp("b" * 32, 3, 0))
    assert not old.same_session(None)


def test_access_counts_kept_for_scoring_follow_the_session_generation(
    open_store: StoreFactory,
) -> None:
    config = MemoryConfig(access_salience=0.3)
    a = ContextMemory(store=open_store(), write_behind=False, config=config)
    b = ContextMemory(store=open_store(), write_behind=False, config=config)
    a.add_message("s1", "user", "alice: my PIN is 4321", id="m1", user_id="alice")
    a.add_message("s1", "assistant", "noted", id="m2", user_id="alice")
    for _ in range(2):
        a.assemble("s1", "what is my PIN?", budget=4000)
    a.flush()
    b.delete_session("s1")
    b.add_message("s1", "user", "bob: hi", id="m3", user_id="bob")
    b.flush()
    a.assemble("s1", "hello?", budget=4000)
    kept = a.inclusion_log.access._copies["s1"]  # the copy scoring used in the last call
    assert "m1" not in kept.counts and "m2" not in kept.counts
    assert a.access_counts("s1") == {"m3": 1}
