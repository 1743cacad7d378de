"""The session's dense search in memory (`SessionIndex.nearest`, `SessionIndex.search`).

A property over random sessions and queries: the positions come best first by cosine (ties by
the earlier message), the similarities are the cosines of the stored vectors (to float32
precision, whatever computes the product), and ``k`` bounds the result. Zero vectors (a
query or a message) give similarity 0, never NaN.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget.memory.reading.session_index import SessionIndex
from ctxbudget.store.records import Record

FAST = settings(max_examples=200, deadline=None, derandomize=True)


def session(vectors: np.ndarray) -> SessionIndex:
    index = SessionIndex(3600.0, "o200k_base")
    records = [
        Record(id=f"m{seq}", kind="message", text=f"turn {seq}", role="user", seq=seq)
        for seq in range(len(vectors))
    ]
    index.extend(zip(records, vectors, strict=True))
    return index


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms > 0, norms, 1.0)


@FAST
@given(
    size=st.integers(1, 120),
    dims=st.integers(2, 48),
    k=st.integers(0, 140),
    seed=st.integers(0, 2**32 - 1),
    zero_query=st.booleans(),
)
def test_nearest_is_the_exact_cosine_ranking(
    size: int, dims: int, k: int, seed: int, zero_query: bool
) -> None:
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(size, dims)).astype(np.float32)
    vectors[rng.random(size) < 0.1] = 0.0  # some messages without a usable vector
    query = np.zeros(dims) if zero_query else rng.normal(size=dims)
    index = session(vectors)

    positions, similarity = index.nearest(query.tolist(), k)

    assert len(positions) == len(similarity) == min(k, size)
    assert np.isfinite(similarity).all()
    expected = unit_rows(vectors.astype(np.float64)) @ (
        query / np.linalg.norm(query) if not zero_query else query
    )
    assert np.allclose(similarity, expected[positions], atol=1e-5)
    assert (np.diff(similarity) <= 1e-6).all()  # best first
    if 0 < len(positions) < size:  # nothing left out is better than what came back
        rest = np.setdiff1d(np.arange(size), positions)
        assert expected[rest].max() <= similarity.min() + 1e-5
    hits = index.search(query.tolist(), k)
    ranked = sorted((-float(s), f"m{int(p)}") for p, s in zip(positions, similarity, strict=True))
    assert [h.record.id for h in hits] == [i for _, i in ranked]


@FAST
@given(
    size=st.integers(1, 120),
    dims=st.integers(2, 48),
    ks=st.lists(st.integers(0, 140), min_size=1, max_size=4),
    seed=st.integers(0, 2**32 - 1),
    ties=st.booleans(),
)
def test_nearest_many_is_each_query_searched_alone_bit_for_bit(
    size: int, dims: int, ks: list[int], seed: int, ties: bool
) -> None:
    # One pass over the rows for every query of a call: the positions and floats a search of
    # each query alone gives (numpy's product of one vector, all similarities sorted, stable).
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(size, dims)).astype(np.float32)
    if ties:  # few distinct values: equal similarities everywhere, decided by position
        vectors = rng.integers(-1, 2, size=(size, dims)).astype(np.float32)
    vectors[rng.random(size) < 0.1] = 0.0
    queries = [rng.normal(size=dims).tolist() for _ in ks]
    queries[0] = [0.0] * dims if seed % 5 == 0 else queries[0]
    index = session(vectors)

    many = index.nearest_many(queries, ks)

    for query, k, (positions, similarity) in zip(queries, ks, many, strict=True):
        vector = np.asarray(query, dtype=np.float32)
        norm = float(np.linalg.norm(vector))
        alone = np.einsum("ij,j->i", index.vectors, vector / norm if norm > 0 else vector)
        top = np.argsort(-alone, kind="stable")[: max(k, 0)]
        assert positions.tolist() == top.tolist()
        assert similarity.tobytes() == np.clip(alone[top].astype(np.float64), -1.0, 1.0).tobytes()
