"""The reranker stage keeps the pipeline's order where it has no say, and survives what it returns.

What a user's reranker reorders is the best ``reranker_top`` retrieved candidates: they stay
above the candidates it never saw (a reranker that agrees with the pipeline changes nothing),
a message's newer statement stays at least as high as the message, and no answer it gives (a
number too large for a float, a finite pair whose span overflows, a dict) fails the call; a
reranker that hangs holds one thread per memory, not one per call. Real parts (tiktoken, an
embedded Chroma, the default embedder); the rerankers are plain functions, as a user's are.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_rerank import write

from ctxbudget import ConfigurationError
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.store.chroma_store import ChromaStore

WORDS = "cat tea train hill lake river paint guitar Porto Lisbon cake soup bike rain".split()
QUERY = "what did she do on the weekend with friends"
SETTINGS = settings(
    max_examples=20,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder) -> ChromaStore:
    folder: Path = tmp_path_factory.mktemp("rerank-order")
    return ChromaStore(folder / "db", embedder=embedder)


def memory(store: ChromaStore, reranker: object, **config: object) -> ContextMemory:
    settings = MemoryConfig(recent_messages=2, reranker=reranker, **config)  # type: ignore[arg-type]
    return ContextMemory(store=store, config=settings, write_behind=False, inclusion_log=False)


def unusable(query: str, texts: Sequence[str]) -> None:
    """A reranker whose answer is refused: the candidates keep the pipeline's ranking."""
    return None


def ids(mem: ContextMemory, session: str, budget: int) -> list[str]:
    return [it.id for it in mem.candidates(session, QUERY, budget=budget).retrieved]


sessions = st.lists(
    st.lists(st.sampled_from(WORDS), min_size=2, max_size=9).map(" ".join),
    min_size=8,
    max_size=30,
)


@SETTINGS
@given(texts=sessions, top=st.integers(1, 12), budget=st.integers(60, 400))
def test_a_reranker_that_agrees_with_the_pipeline_changes_no_order(
    store: ChromaStore, texts: list[str], top: int, budget: int
) -> None:
    def agreeing(query: str, given: Sequence[str]) -> list[float]:
        return [float(len(given) - n) for n in range(len(given))]  # the order it was given

    plain = memory(store, unusable, reranker_top=top)
    session = write(plain, texts)
    before = ids(plain, session, budget)
    after = ids(memory(store, agreeing, reranker_top=top), session, budget)
    assert after == before


@SETTINGS
@given(
    texts=sessions,
    top=st.integers(1, 12),
    budget=st.integers(60, 400),
    days=st.integers(1, 60),
)
def test_a_reranker_giving_the_pipelines_own_scores_changes_no_order_over_time(
    store: ChromaStore, texts: list[str], top: int, budget: int, days: int
) -> None:
    # Before 2026-12-01 the stage took the recency out of no score and put it back into each:
    # turns ``days`` apart, an older one paid for its age twice and moved down.
    plain = memory(store, unusable, reranker_top=top)
    session = f"s-{uuid.uuid4().hex[:12]}"
    plain.add_messages(
        session,
        [
            {
                "role": "user" if i % 2 == 0 else "assistant",
                "content": text,
                "timestamp": 1_600_000_000 + i * days * 86_400,
            }
            for i, text in enumerate(texts)
        ],
        progress=False,
    )
    before = plain.candidates(session, QUERY, budget=budget).retrieved

    def agreeing(query: str, given: Sequence[str]) -> list[float]:
        assert list(given) == [it.text for it in before[: len(given)]]  # the best, in order
        return [it.score for it in before[: len(given)]]  # by place: two may hold one text

    after = memory(store, agreeing, reranker_top=top).candidates(session, QUERY, budget=budget)
    assert [it.id for it in after.retrieved] == [it.id for it in before]


@SETTINGS
@given(
    texts=sessions,
    top=st.integers(1, 12),
    budget=st.integers(60, 400),
    scores=st.lists(
        st.floats(allow_nan=False, allow_infinity=False) | st.integers(-(10**6), 10**6),
        min_size=12,
        max_size=12,
    ),
)
def test_what_the_reranker_saw_stays_above_what_it_did_not(
    store: ChromaStore, texts: list[str], top: int, budget: int, scores: list[float]
) -> None:
    def scoring(query: str, given: Sequence[str]) -> list[float]:
        return [scores[n % len(scores)] for n in range(len(given))]

    plain = memory(store, unusable, reranker_top=top)
    session = write(plain, texts)
    before = plain.candidates(session, QUERY, budget=budget).retrieved
    after = memory(store, scoring, reranker_top=top).candidates(session, QUERY, budget=budget)
    seen = {it.id for it in before[:top]}
    assert {it.id for it in after.retrieved[: len(seen)]} == seen
    assert [it.id for it in after.retrieved[len(seen) :]] == [it.id for it in before[top:]]
    if len(before) > top:
        lowest = min(it.score for it in after.retrieved[:top])
        assert lowest >= max(it.score for it in after.retrieved[top:])
    assert all(it.score == it.score for it in after.retrieved)  # no NaN


@pytest.mark.parametrize(
    "answer",
    [10**400, Decimal("sNaN"), "dict"],
    ids=["int too large for a float", "signalling NaN", "a dict"],
)
def test_an_answer_no_float_can_hold_leaves_the_ranking_as_it_was(
    store: ChromaStore, answer: object, caplog: pytest.LogCaptureFixture
) -> None:
    def odd(query: str, given: Sequence[str]) -> object:
        if answer == "dict":
            return {float(n): 1.0 for n in range(len(given))}
        return [answer, *([0.0] * (len(given) - 1))]

    plain = memory(store, unusable)
    session = write(plain, [f"{w} and the weekend with friends" for w in WORDS])
    assert ids(memory(store, odd), session, 200) == ids(plain, session, 200)
    assert "not" in caplog.text  # "returned ..., not N finite numbers", logged


def test_finite_scores_whose_span_overflows_still_rank(store: ChromaStore) -> None:
    def extremes(query: str, given: Sequence[str]) -> list[float]:
        return [-1e308] * (len(given) - 1) + [1e308]  # the last the best

    plain = memory(store, unusable)
    session = write(plain, [f"{w} and the weekend with friends" for w in WORDS])
    seen = plain.candidates(session, QUERY, budget=200).retrieved
    # At the default weight (0.5) the reranker's best ties with the pipeline's; above, it wins.
    sure = memory(store, extremes, reranker_weight=0.9)
    found = sure.candidates(session, QUERY, budget=200).retrieved
    last = seen[min(len(seen), MemoryConfig().reranker_top) - 1]
    assert found[0].id == last.id


def test_a_timeout_no_thread_can_wait_for_is_refused_by_name() -> None:
    with pytest.raises(ConfigurationError, match="reranker_timeout"):
        MemoryConfig(reranker=unusable, reranker_timeout=1e10)
    MemoryConfig(reranker=unusable, reranker_timeout=threading.TIMEOUT_MAX)


def test_a_hung_reranker_holds_one_thread_however_many_calls(store: ChromaStore) -> None:
    release = threading.Event()
    calls: list[int] = []

    def hung(query: str, given: Sequence[str]) -> list[float]:
        calls.append(len(given))
        release.wait(60)
        return [0.0] * len(given)

    plain = memory(store, unusable)
    session = write(plain, [f"{w} and the weekend with friends" for w in WORDS])
    slow = memory(store, hung, reranker_timeout=0.05)
    try:
        expected = ids(plain, session, 200)
        for _ in range(8):
            assert ids(slow, session, 200) == expected  # the ranking as it was
        late = [t for t in threading.enumerate() if t.name == "ctxbudget-rerank"]
        assert len(calls) == 1
        assert len(late) == 1
    finally:
        release.set()
    for thread in late:
        thread.join(10)
    assert ids(slow, session, 200) is not None
    assert len(calls) == 2  # once the late one ended, the reranker is asked again


UPDATE = [
    {"id": "m1", "role": "user", "text": "I live in Lisbon.", "timestamp": "2024-03-01T10:00:00Z"},
    {"role": "assistant", "text": "Lovely city!", "timestamp": "2024-03-01T10:01:00Z"},
    {"role": "user", "text": "Any good pasta recipe?", "timestamp": "2024-03-02T10:00:00Z"},
    {"role": "assistant", "text": "Garlic and chili.", "timestamp": "2024-03-02T10:01:00Z"},
    {
        "id": "m5",
        "role": "user",
        "text": "We moved to Porto, the new flat is great.",
        "timestamp": "2024-06-01T10:00:00Z",
    },
    {"role": "assistant", "text": "Congratulations!", "timestamp": "2024-06-01T10:01:00Z"},
    {"role": "user", "text": "The weather is lovely today.", "timestamp": "2024-06-02T10:00:00Z"},
    {"role": "assistant", "text": "Perfect for a walk.", "timestamp": "2024-06-02T10:01:00Z"},
]


@pytest.mark.parametrize("top", [1, 2, 200])
def test_a_newer_statement_stays_at_least_as_high_as_what_it_updates(
    store: ChromaStore, top: int
) -> None:
    def prefers_the_old(query: str, given: Sequence[str]) -> list[float]:
        return [-5.0 if "Porto" in t else 5.0 if "Lisbon" in t else 0.0 for t in given]

    mem = memory(store, prefers_the_old, reranker_top=top)
    session = f"s-{uuid.uuid4().hex[:12]}"
    mem.add_messages(session, UPDATE, progress=False)
    found = {it.id: it for it in mem.candidates(session, "Where do I live?", budget=100).retrieved}
    assert found["m1"].newer == ("m5",)
    assert found["m5"].score >= found["m1"].score
    for budget in (40, 60, 100, 150):
        sent = set(mem.assemble(session, "Where do I live?", budget=budget).included_ids)
        assert "m1" not in sent or "m5" in sent
