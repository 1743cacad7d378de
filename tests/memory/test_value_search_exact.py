"""A value search of a small partition is exact: Chroma's HNSW graph can strand a value.

Chroma's index links identical vectors to each other: in a fresh partition holding one value
among 200 with one same text, a query for it returned only the duplicates, even at 100
results (LangGraph's own ``test_search_sorting`` run in a fresh store). A partition of at most
`ctxbudget.store.value_reads._EXACT` values is searched by reading its vectors.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ctxbudget.store.value_reads as value_reads
from ctxbudget.memory import ContextMemory, ValuePut
from ctxbudget.store.chroma_store import ChromaStore


@pytest.fixture
def mem(store: ChromaStore) -> Iterator[ContextMemory]:
    memory = ContextMemory(store=store, write_behind=False, inclusion_log=False)
    yield memory
    memory.close()


@pytest.mark.parametrize("copies", [150, 299])
def test_one_distinct_value_among_many_identical_ones_is_found(
    mem: ContextMemory, copies: int
) -> None:
    mem.put_value(("r", "M"), "M", {"key1": "mmm"})
    half = copies // 2
    puts = [ValuePut(("r", "A"), f"A{i}", {"key1": "no"}) for i in range(half)]
    puts += [ValuePut(("r", "Z"), f"Z{i}", {"key1": "no"}) for i in range(copies - half)]
    mem.put_values(puts)
    found = mem.search_values(("r",), query="mmm", limit=10)
    assert [v.key for v in found[:1]] == ["M"]
    assert len({(v.namespace, v.key) for v in found}) == 10
    rest = [v.score for v in found[1:]]
    assert found[0].score is not None and all(s is not None and s < found[0].score for s in rest)
    assert len(set(rest)) == 1  # the same text scores the same
    ties = [(-v.updated_at.timestamp(), v.namespace, v.key) for v in found[1:]]
    assert ties == sorted(ties)  # a tie: the newest first, then by namespace and key


def test_exact_and_indexed_searches_agree_on_distinct_values(
    mem: ContextMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    topics = ["cats", "trains", "soup", "chess", "rain", "jazz", "maps", "bees", "tea", "ice"]
    mem.put_values(
        [ValuePut(("t",), f"k{i}", {"text": f"{topics[i % 10]} note {i}"}) for i in range(60)]
    )
    exact = mem.search_values(("t",), query="jazz and tea", limit=15)
    monkeypatch.setattr(value_reads, "_EXACT", 0)
    indexed = mem.search_values(("t",), query="jazz and tea", limit=15)
    assert [v.key for v in exact] == [v.key for v in indexed]
    assert np.allclose([v.score or 0 for v in exact], [v.score or 0 for v in indexed], atol=1e-5)


def test_a_prefix_search_leaves_out_other_prefixes_and_unembedded_values(
    mem: ContextMemory,
) -> None:
    mem.put_values(
        [ValuePut(("a",), f"a{i}", {"text": "kittens"}) for i in range(30)]
        + [ValuePut(("b",), f"b{i}", {"text": f"kittens {i}"}) for i in range(5)]
        + [ValuePut(("b",), f"u{i}", {"text": "kittens"}, index=False) for i in range(2)]
    )
    found = mem.search_values(("b",), query="kittens", limit=10)
    assert [v.key for v in found[:5]] == sorted(
        (v.key for v in found[:5]), key=lambda k: -next(x.score or 0 for x in found if x.key == k)
    )
    assert {v.key for v in found[:5]} == {f"b{i}" for i in range(5)}
    assert {v.key for v in found[5:]} == {"u0", "u1"} and all(v.score is None for v in found[5:])


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    texts=st.lists(st.sampled_from(["no", "yes", "ok", "mmm", "tea"]), min_size=1, max_size=40),
    limit=st.integers(1, 12),
)
def test_any_page_of_a_small_partition_is_the_exact_best(
    mem: ContextMemory, texts: list[str], limit: int
) -> None:
    space = ("p", str(abs(hash((tuple(texts), limit)))))
    mem.put_values([ValuePut(space, f"k{i:02d}", {"text": t}) for i, t in enumerate(texts)])
    found = mem.search_values(space, query="mmm", limit=limit)
    everything = mem.search_values(space, query="mmm", limit=100)
    assert len(everything) == len(texts)
    assert [v.key for v in found] == [v.key for v in everything[:limit]]
    scores = [v.score or 0.0 for v in everything]
    assert scores == sorted(scores, reverse=True)
    by_text = {}
    for v in everything:
        by_text.setdefault(v.value["text"], set()).add(v.score)
    assert all(len(s) == 1 for s in by_text.values())  # one text, one score
