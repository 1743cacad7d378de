"""A values search of a partition past the exact search's size answers as the exact search.

Past `ctxbudget.store.value_reads._EXACT` values a partition is queried through Chroma's HNSW
graph, which strands vectors among identical ones (many values with one same text, or put with
``index=False``: one placeholder vector each). Such a partition, with duplicates, unembedded
values, three prefixes and a filter, answers every page as the exact search does (the same
keys in the same order, the same scores) for queries whose answers hold a tie; before the fix
some pages ordered the tie otherwise, or lost values.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

import ctxbudget.store.value_reads as value_reads
from ctxbudget.memory import ContextMemory, ValuePut
from ctxbudget.store.chroma_store import ChromaStore

WORDS = "cats trains soup chess rain jazz maps bees tea ice bread river lamp stone cloud".split()


@pytest.fixture
def mem(store: ChromaStore) -> Iterator[ContextMemory]:
    memory = ContextMemory(store=store, write_behind=False, inclusion_log=False)
    yield memory
    memory.close()


def test_a_large_partition_with_duplicates_answers_as_the_exact_search(
    mem: ContextMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    rnd = random.Random(1)
    puts = []
    for n in range(700):
        text = "duplicate text" if rnd.random() < 0.4 else " ".join(rnd.sample(WORDS, 3))
        puts.append(
            ValuePut(
                ("p", rnd.choice("abc")),
                f"k{n}",
                {"text": text, "n": n % 7},
                index=False if rnd.random() < 0.1 else None,
            )
        )
    mem.put_values(puts)
    asked = [
        (query, prefix, wanted, limit, offset)
        for query in ("duplicate text", "a duplicate")  # only queries a tie reaches: HNSW
        for prefix in (("p",), ("p", "a"), ("p", "b"))  # is approximate for the others
        for wanted in (None, {"n": 3})
        for limit, offset in ((1, 0), (10, 0), (5, 20))
    ]

    def answers() -> list[list[tuple[str, float | None]]]:
        return [
            [
                (v.key, None if v.score is None else round(v.score, 5))
                for v in mem.search_values(p, query=q, filter=f, limit=lim, offset=off)
            ]
            for q, p, f, lim, off in asked
        ]

    queried = answers()
    monkeypatch.setattr(value_reads, "_EXACT", 10**9)
    assert queried == answers()
