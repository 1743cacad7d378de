"""Keyed values (`ContextMemory.put_value`...): round trip, isolation, delete_user, ttl, search."""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime

import numpy as np
import pytest

from ctxbudget.core.items import Tier
from ctxbudget.errors import InvalidValueError
from ctxbudget.memory import ContextMemory, StoredValue, ValuePut, ValueQuery
from ctxbudget.store.chroma_store import ChromaStore
from ctxbudget.store.partitions import values_partition


@pytest.fixture
def mem(store: ChromaStore) -> Iterator[ContextMemory]:
    memory = ContextMemory(store=store, write_behind=False, inclusion_log=False)
    yield memory
    memory.close()


def test_a_value_round_trips_and_keeps_created_at(mem: ContextMemory) -> None:
    value = {"text": "vegetarian", "n": 3, "x": 1.5, "big": 2**80, "deep": {"a": [1, None, True]}}
    first = mem.put_value(("notes", "alice"), "diet", value)
    assert first.value == value and first.created_at == first.updated_at
    assert first.created_at.tzinfo == UTC
    time.sleep(0.01)
    second = mem.put_value(("notes", "alice"), "diet", {"text": "vegan"})
    got = mem.get_value(("notes", "alice"), "diet")
    assert got is not None and got.value == {"text": "vegan"}
    assert got.created_at == first.created_at  # kept by the later put
    assert got.updated_at == second.updated_at > first.updated_at
    assert mem.get_value(("notes", "alice"), "other") is None
    assert mem.get_value(("notes",), "diet") is None


def test_values_of_one_user_are_never_read_through_another(mem: ContextMemory) -> None:
    mem.put_value(("memories",), "food", {"text": "alice likes ramen"}, user_id="alice")
    mem.put_value(("memories",), "food", {"text": "bob likes pizza"}, user_id="bob")
    alice = mem.get_value(("memories",), "food", user_id="alice")
    bob = mem.get_value(("memories",), "food", user_id="bob")
    assert alice is not None and alice.value["text"] == "alice likes ramen"
    assert bob is not None and bob.value["text"] == "bob likes pizza"
    assert mem.get_value(("memories",), "food") is None  # the shared values: none
    found = mem.search_values(("memories",), query="ramen", user_id="bob")
    assert [v.value["text"] for v in found] == ["bob likes pizza"]
    assert mem.list_value_namespaces(user_id="carol") == []
    assert mem.delete_value(("memories",), "food", user_id="carol") is False
    assert mem.get_value(("memories",), "food", user_id="alice") is not None


def test_delete_user_removes_the_users_values_and_draws_its_stamp(mem: ContextMemory) -> None:
    store = mem.store
    mem.put_value(("m",), "k", {"a": 1}, user_id="alice")
    mem.put_value(("m",), "k", {"a": 2}, user_id="bob")
    before = store.stamps(namespace=mem.namespace, session_id="none", user_id="alice").user
    mem.put_value(("m",), "k", {"a": 3}, user_id="alice")  # a replace draws it anew
    replaced = store.stamps(namespace=mem.namespace, session_id="none", user_id="alice").user
    assert replaced != before
    mem.delete_user("alice")
    after = store.stamps(namespace=mem.namespace, session_id="none", user_id="alice").user
    assert after != replaced
    assert mem.get_value(("m",), "k", user_id="alice") is None
    assert mem.search_values((), user_id="alice") == []
    partition = values_partition(store.collection, mem.namespace, "alice")
    assert store._client.list_collections() is not None  # the client still answers
    assert partition not in {c.name for c in store._client.list_collections()}
    bob = mem.get_value(("m",), "k", user_id="bob")
    assert bob is not None and bob.value == {"a": 2}


def test_a_refused_value_stores_nothing_and_keeps_the_old_one(mem: ContextMemory) -> None:
    mem.put_value(("ns",), "k", {"ok": 1})
    deep: dict[str, object] = {}
    node = deep
    for _ in range(101):
        node["d"] = {}
        node = node["d"]  # type: ignore[assignment]
    bad = [
        {"x": math.nan},
        {"x": math.inf},
        {"x": "caf\ud800e"},
        {"x": {1, 2}},
        {1: "non-str key"},
        deep,
        {"x": "y" * 1_000_001},
        ["not", "a", "dict"],
    ]
    for value in bad:
        with pytest.raises(InvalidValueError) as info:
            mem.put_value(("ns",), "k", value)  # type: ignore[arg-type]
        assert isinstance(info.value, ValueError)
        assert "('ns',)" in str(info.value)
    for space in [(), ("a.b",), ("",), "ns", ("a", 1)]:
        with pytest.raises(InvalidValueError):
            mem.put_value(space, "k", {"a": 1})  # type: ignore[arg-type]
    for limit in [0, True, math.nan, "3", 10_001]:
        with pytest.raises(InvalidValueError):
            mem.search_values(("ns",), limit=limit)  # type: ignore[arg-type]
    with pytest.raises(InvalidValueError):
        mem.put_value(("ns",), "k", {"a": 1}, ttl=0)
    with pytest.raises(InvalidValueError):
        mem.search_values(("ns",), filter={"a": {"$regex": "x"}})
    got = mem.get_value(("ns",), "k")
    assert got is not None and got.value == {"ok": 1}


def test_numpy_values_become_python_numbers(mem: ContextMemory) -> None:
    put = mem.put_value(("ns",), "np", {"i": np.int64(3), "f": np.float32(0.5), "a": np.arange(3)})
    assert put.value == {"i": 3, "f": 0.5, "a": [0, 1, 2]}
    assert type(put.value["i"]) is int and type(put.value["f"]) is float


def test_search_ranks_by_meaning_and_words_and_filters(mem: ContextMemory) -> None:
    mem.put_value(("docs", "a"), "1", {"text": "The cat sat on the warm mat", "n": 1})
    mem.put_value(("docs", "a"), "2", {"text": "Quarterly revenue grew by ten percent", "n": 2})
    mem.put_value(("docs", "b"), "3", {"text": "A kitten naps in the sun", "n": 3}, index=["text"])
    mem.put_value(("docs", "b"), "4", {"text": "cats, not embedded", "n": 4}, index=False)
    mem.put_value(("other",), "5", {"text": "cats elsewhere", "n": 5})
    found = mem.search_values(("docs",), query="a cat on a mat", limit=10)
    assert [v.key for v in found][:1] == ["1"]
    assert found[-1].key == "4" and found[-1].score is None
    scores = [v.score for v in found if v.score is not None]
    assert scores == sorted(scores, reverse=True) and all(0.0 <= s <= 1.0 for s in scores)
    assert {v.key for v in found} == {"1", "2", "3", "4"}
    newest = mem.search_values(("docs",))
    assert [v.key for v in newest] == ["4", "3", "2", "1"]  # newest first without a query
    assert [v.key for v in mem.search_values(("docs",), limit=2, offset=1)] == ["3", "2"]
    kept = mem.search_values(("docs",), query="cat", filter={"n": {"$gte": 3}})
    assert {v.key for v in kept} == {"3", "4"}
    assert [v.key for v in mem.search_values(("docs", "b"), filter={"n": 3})] == ["3"]


def test_a_namespace_deeper_than_the_keys_is_matched_exactly(mem: ContextMemory) -> None:
    deep = tuple(f"l{n}" for n in range(11))
    mem.put_value(deep, "k", {"a": 1})
    mem.put_value((*deep[:9], "x", "y"), "k", {"a": 2})
    assert [v.value for v in mem.search_values(deep)] == [{"a": 1}]
    assert len(mem.search_values(deep[:9])) == 2
    assert mem.list_value_namespaces(prefix=deep[:10]) == [deep]


def test_list_namespaces_with_wildcards_and_depth(mem: ContextMemory) -> None:
    for space in [("a", "b", "c"), ("a", "x", "c"), ("a", "b", "d"), ("z",)]:
        mem.put_value(space, "k", {"v": 1})
    assert mem.list_value_namespaces() == [
        ("a", "b", "c"),
        ("a", "b", "d"),
        ("a", "x", "c"),
        ("z",),
    ]
    assert mem.list_value_namespaces(prefix=("a", "*", "c")) == [("a", "b", "c"), ("a", "x", "c")]
    assert mem.list_value_namespaces(suffix=("c",)) == [("a", "b", "c"), ("a", "x", "c")]
    assert mem.list_value_namespaces(max_depth=2) == [("a", "b"), ("a", "x"), ("z",)]
    assert mem.list_value_namespaces(limit=1, offset=1) == [("a", "b", "d")]


def test_batches_keep_the_last_put_and_delete_with_none(mem: ContextMemory) -> None:
    out = mem.put_values(
        [
            ValuePut(("b",), "k", {"v": 1}),
            ValuePut(("b",), "k", {"v": 2}),
            ValuePut(("b",), "gone", {"v": 3}),
        ]
    )
    assert out[0] is None and out[1] is not None and out[1].value == {"v": 2}
    assert mem.put_values([ValuePut(("b",), "gone", None)]) == [None]
    got = mem.get_values([(("b",), "k"), (("b",), "gone")])
    assert [g.value if g else None for g in got] == [{"v": 2}, None]


def test_expired_values_are_invisible_and_swept(mem: ContextMemory) -> None:
    mem.put_value(("t",), "short", {"v": 1}, ttl=0.002)  # 0.12 s
    long = mem.put_value(("t",), "long", {"v": 2}, ttl=10)
    assert long.expires_at is not None and long.expires_at > long.updated_at
    time.sleep(0.3)
    assert mem.get_value(("t",), "short") is None
    assert [v.key for v in mem.search_values(("t",))] == ["long"]
    assert mem.list_value_namespaces() == [("t",)]
    refreshed = mem.get_value(("t",), "long")
    assert refreshed is not None and refreshed.expires_at is not None
    assert refreshed.expires_at > long.expires_at  # refresh_ttl pushed it forward
    unrefreshed = mem.get_value(("t",), "long", refresh_ttl=False)
    assert unrefreshed is not None and unrefreshed.expires_at == refreshed.expires_at
    mem.put_value(("t",), "short2", {"v": 3}, ttl=0.002)
    time.sleep(0.3)
    assert mem.sweep_values() == 1  # "short" went with the write of "short2"
    assert mem.sweep_values() == 0


def test_candidates_offer_saved_values(mem: ContextMemory) -> None:
    mem.add_message("s1", "user", "hello", user_id="carol")
    mem.put_value(("mem", "carol"), "food", {"text": "carol loves ramen"}, user_id="carol")
    mem.put_value(
        ("mem", "carol"), "pet", {"text": "a dog named Rex"}, index=["text"], user_id="carol"
    )
    query = ValueQuery(("mem", "carol"), user_id="carol", k=1)
    found = mem.candidates("s1", "what food does carol like?", user_id="carol", values=query)
    assert len(found.saved) == 1
    item = found.saved[0]
    assert item.tier == Tier.SAVED == 45 and item.text.startswith("food: ")
    assert item.id.startswith("ctxbudget:value:") and item in found.items
    plain = mem.candidates("s1", "what food does carol like?", user_id="carol")
    assert plain.saved == ()


def test_a_saved_item_is_dated_when_it_was_put_and_says_when_it_expires(
    mem: ContextMemory,
) -> None:
    before = time.time()
    mem.put_value(("mem", "dan"), "home", {"text": "dan lives in Porto"}, user_id="dan", ttl=2)
    mem.put_value(("mem", "dan"), "pet", {"text": "dan has a cat"}, user_id="dan")
    query = ValueQuery(("mem", "dan"), user_id="dan", k=2)
    found = mem.candidates("s9", "where does dan live?", user_id="dan", values=query)
    home = next(it for it in found.saved if it.text.startswith("home: "))
    assert home.timestamp is not None and before - 1 <= home.timestamp <= time.time() + 1
    assert home.metadata["expires"] == pytest.approx(home.timestamp + 120, abs=1)
    assert found.true_until == home.metadata["expires"]  # the cat never expires
    context = mem.assemble(
        "s9",
        "where does dan live?",
        budget=400,
        user_id="dan",
        extra=[replace(home, id="home")],
        format="text",
    )
    assert "dan lives in Porto" in context.render()
    assert str(datetime.now(UTC).year) in context.render()  # dated now, not in year 56,000


def test_async_twins(mem: ContextMemory) -> None:
    async def run() -> list[StoredValue]:
        await mem.aput_values([ValuePut(("as",), "k", {"v": 1})])
        assert (await mem.aget_value(("as",), "k")) is not None
        assert await mem.alist_value_namespaces() == [("as",)]
        return await mem.asearch_values(("as",))

    assert [v.value for v in asyncio.run(run())] == [{"v": 1}]


def test_values_are_json_text_in_the_store(mem: ContextMemory) -> None:
    mem.put_value(("j",), "k", {"é": "ü", "n": 1.0})
    partition = values_partition(mem.store.collection, mem.namespace, None)
    rows = mem.store._collections.part_rows(partition)
    assert [json.loads(doc) for _, doc, _ in rows] == [{"é": "ü", "n": 1.0}]
    assert "ü" in rows[0][1]  # ensure_ascii=False
    assert datetime.now(UTC) >= mem.search_values(("j",))[0].updated_at


def test_a_filtered_query_grows_its_pool_until_enough_pass(mem: ContextMemory) -> None:
    puts = [
        ValuePut(("pool",), f"c{i}", {"text": f"cats and kittens {i}", "odd": False})
        for i in range(60)
    ]
    puts += [
        ValuePut(("pool",), f"t{i}", {"text": f"tax return form {i}", "odd": True})
        for i in range(3)
    ]
    mem.put_values(puts)
    found = mem.search_values(("pool",), query="kittens", filter={"odd": True}, limit=3)
    assert sorted(v.key for v in found) == ["t0", "t1", "t2"]


def test_shared_values_draw_their_own_stamp(mem: ContextMemory) -> None:
    from ctxbudget.store.stamps import stamp_key

    cols = mem.store._collections
    key = stamp_key(values_partition(mem.store.collection, mem.namespace, None))

    def stamp() -> object:
        rows = cols.rows(cols.meta, ids=[key], documents=False)
        return rows[0][2]["gen"] if rows else None

    mem.put_value(("s",), "k", {"v": 1})
    first = stamp()
    mem.delete_value(("s",), "k")
    assert first is not None and stamp() not in (None, first)


def test_newest_first_over_many_values_reads_in_bands(mem: ContextMemory) -> None:
    first = [ValuePut(("many",), f"old{i}", {"n": i}, index=False) for i in range(550)]
    mem.put_values(first)
    time.sleep(1.2)  # the newest band (1 s) holds only what follows
    mem.put_values([ValuePut(("many",), f"new{i}", {"n": 1000 + i}, index=False) for i in range(3)])
    got = mem.search_values(("many",), limit=5)
    assert {v.key for v in got[:3]} == {"new0", "new1", "new2"}
    assert len(got) == 5 and all(v.key.startswith("old") for v in got[3:])
    later = mem.search_values(("many",), limit=3, offset=550)
    assert len(later) == 3  # the oldest, past every band
    wanted = mem.search_values(("many",), filter={"n": 7}, limit=10)
    assert [v.key for v in wanted] == ["old7"]
    updated = [v.updated_at for v in mem.search_values(("many",), limit=100)]
    assert updated == sorted(updated, reverse=True)


def test_a_small_prefix_of_a_large_partition_finds_exactly_its_own_values(
    mem: ContextMemory,
) -> None:
    # A query first reads the partition's nearest without a where clause; a prefix holding
    # few of them (and values that were not embedded, whose placeholder vector is near no
    # query) is answered by the query with its key: the same answer either way.
    puts = [ValuePut(("big",), f"b{i}", {"text": f"cats and kittens {i}"}) for i in range(120)]
    puts += [ValuePut(("small",), f"s{i}", {"text": f"kittens at home {i}"}) for i in range(4)]
    puts += [ValuePut(("small",), f"u{i}", {"text": "kittens"}, index=False) for i in range(3)]
    mem.put_values(puts)
    found = mem.search_values(("small",), query="kittens", limit=10)
    scores = [v.score or 0.0 for v in found[:4]]
    assert scores == sorted(scores, reverse=True)
    assert {v.key for v in found[:4]} == {"s0", "s1", "s2", "s3"}
    assert all(v.score is not None for v in found[:4])
    assert {v.key for v in found[4:]} == {"u0", "u1", "u2"}
    assert all(v.score is None for v in found[4:])
    big = mem.search_values(("big",), query="kittens", limit=60)
    assert len(big) == 60 and all(v.key.startswith("b") for v in big)


def test_a_no_query_search_finds_the_newest_long_after_the_last_write(mem: ContextMemory) -> None:
    # Bands start from the partition's last write: values written well before the search
    # (older than the first band) still come back newest first, exactly.
    mem.put_values([ValuePut(("aged",), f"old{i}", {"n": i}, index=False) for i in range(520)])
    time.sleep(1.2)
    mem.put_values([ValuePut(("aged",), f"new{i}", {"n": i}, index=False) for i in range(2)])
    time.sleep(2.5)
    got = mem.search_values(("aged",), limit=3)
    assert {v.key for v in got[:2]} == {"new0", "new1"} and got[2].key.startswith("old")


def test_value_reads_do_not_wait_for_pending_messages(
    mem: ContextMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Values are written directly, never through the write-behind journal: a search or a
    # listing has nothing to wait for (candidates(wait=False) offers values without waiting).
    mem.put_value(("w",), "k", {"text": "kittens"})

    def waited() -> None:
        raise AssertionError("a values read waited for pending messages")

    monkeypatch.setattr(mem, "_settle", waited)
    assert [v.key for v in mem.search_values(("w",), query="kittens")] == ["k"]
    assert [v.key for v in mem.search_values(("w",))] == ["k"]
    assert mem.list_value_namespaces() == [("w",)]


def test_a_small_prefix_of_a_large_partition_is_read_whole_after_the_first_band(
    mem: ContextMemory,
) -> None:
    mem.put_values([ValuePut(("tiny",), f"t{i}", {"n": i}, index=False) for i in range(3)])
    mem.put_values([ValuePut(("big",), f"b{i}", {"n": i}, index=False) for i in range(520)])
    time.sleep(1.2)  # the first band (1 s back from the last write) holds none of tiny's
    mem.put_values([ValuePut(("big",), "last", {"n": -1}, index=False)])
    got = mem.search_values(("tiny",), limit=10)
    assert sorted(v.key for v in got) == ["t0", "t1", "t2"]
    assert [v.key for v in mem.search_values(("big",), limit=1)] == ["last"]


def test_a_put_that_replaces_a_value_leaves_nothing_of_the_old_one(
    mem: ContextMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Chroma merges an upsert's metadata into the stored row: the old keys must be removed, or
    # an unembedded value is still ranked by its old vector (and listed twice), and a value put
    # again without a ttl still expires at the old one's time.
    from ctxbudget.memory.values import model

    space = ("mem", "eve")
    mem.put_value(space, "k", {"text": "eve plays the cello"}, user_id="eve")
    mem.put_value(space, "k", {"text": "eve plays the cello"}, index=False, user_id="eve")
    found = mem.search_values(space, query="cello", user_id="eve")
    assert [(v.key, v.score) for v in found] == [("k", None)]
    mem.put_value(space, "t", {"text": "short-lived"}, ttl=1, user_id="eve")
    mem.put_value(space, "t", {"text": "kept"}, user_id="eve")
    later = model.clock() + 10 * 60 * 10**9
    monkeypatch.setattr(model, "clock", lambda: later)
    kept = mem.get_value(space, "t", user_id="eve")
    assert kept is not None and kept.value == {"text": "kept"} and kept.expires_at is None


def test_a_put_stamped_before_another_writers_is_still_newer_than_it(
    mem: ContextMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two writers: the one that read the clock first may write last (its time is then bumped).

    Before 2026-11-30 its ``updated_at`` fell before the ``created_at`` the other had written.
    """
    from ctxbudget.memory.values import model

    late = mem.put_value(("notes",), "k", {"v": "first written"})
    stamped = model.now_micros() - 5_000_000  # read 5 s before the other writer's write
    monkeypatch.setattr(model, "now_micros", lambda: stamped)
    monkeypatch.setattr("ctxbudget.memory.values.api.now_micros", lambda: stamped)
    got = mem.put_value(("notes",), "k", {"v": "written last"})
    assert got.value == {"v": "written last"}
    assert got.created_at == late.created_at  # the key's first put
    assert got.updated_at > late.updated_at >= got.created_at
