"""Stored vectors are spread a little, each by its key: Chroma's index strands identical ones.

Chroma's HNSW index links identical vectors to each other and then leaves a distinct vector
unreachable: one user's "my locker code is 4512" among 500 "ok" of their other sessions was not
found by a search for it (the ten hits were all "ok"), nor offered by `candidates` in a new
session. Each record's vector is now moved by an offset of its own (`ctxbudget.store.vectors.
spread`, at most 1e-6 a component).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxbudget.memory import ContextMemory
from ctxbudget.store.chroma_store import ChromaStore
from ctxbudget.store.vectors import spread


@pytest.fixture
def mem(store: ChromaStore) -> Iterator[ContextMemory]:
    memory = ContextMemory(store=store, write_behind=False, inclusion_log=False)
    yield memory
    memory.close()


def test_a_message_among_hundreds_of_identical_ones_is_found(mem: ContextMemory) -> None:
    mem.add_message("s0", "user", "my locker code is 4512", id="target", user_id="ana")
    for s in range(5):
        oks = [{"role": "user", "content": "ok", "id": f"ok{s}-{i}"} for i in range(100)]
        mem.add_messages(f"s{s + 1}", oks, user_id="ana", progress=False)
    hits = mem.search("what is my locker code?", kinds=["message"], user_id="ana")
    assert hits[0].hit.record.id == "target"
    offered = mem.candidates("new", "what is my locker code?", budget=3000, user_id="ana")
    assert [i.text for i in offered.retrieved][:1] == ["my locker code is 4512"]


def test_identical_texts_score_alike_to_a_millionth(mem: ContextMemory) -> None:
    mem.add_messages(
        "s", [{"role": "user", "content": "ok", "id": f"m{i}"} for i in range(20)], progress=False
    )
    hits = mem.search("ok then", kinds=["message"], k=20)
    scores = [h.hit.similarity for h in hits]
    assert len(scores) == 20 and max(scores) - min(scores) < 1e-5


@given(
    key=st.text(min_size=1, max_size=40),
    vector=st.lists(st.floats(-1, 1, allow_nan=False), min_size=1, max_size=400),
)
def test_spread_is_tiny_and_the_same_for_a_key(key: str, vector: list[float]) -> None:
    moved = spread(key, vector)
    assert moved == spread(key, vector)
    assert len(moved) == len(vector)
    assert np.max(np.abs(np.subtract(moved, vector))) <= 1e-6 + 1e-12
    assert all(type(x) is float for x in moved)
