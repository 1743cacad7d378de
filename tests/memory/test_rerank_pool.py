"""The reranker sees `MemoryConfig.reranker_top` candidates, whatever the budget (issue 42).

The search pool is sized by the budget (a few times what it holds); at a small budget that is
fewer than ``reranker_top``, and evidence past it never reached the reranker (the oracle
reranker on LoCoMo, benchmarks/bench_oracle.py: at 1,024 tokens a perfect reranker kept 0.924
of the evidence; with the pool reaching ``reranker_top=200``, 0.980). With a reranker the pool
holds at least ``reranker_top``; without one it is sized as before.

Real parts: tiktoken, an embedded Chroma in a temporary folder, the default embedder.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.store.chroma_store import ChromaStore

TOPICS = (
    "soup trains bikes rain guitars tea hills cakes rivers cats Porto Lisbon jobs books films "
    "shoes gardens boats maps clocks"
).split()
PLACES = "the market|the office|the beach|the park|home|the station|a cafe".split("|")
QUERY = "what did we talk about on the weekend"
BUDGET = 200
TOP = 60


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder) -> ChromaStore:
    folder: Path = tmp_path_factory.mktemp("rerank-pool")
    return ChromaStore(folder / "db", embedder=embedder)


@pytest.fixture(scope="module")
def session(store: ChromaStore) -> str:
    """150 turns, each about a weekend talk on some topic at some place."""
    said = [
        f"On the weekend we talked about {TOPICS[n % len(TOPICS)]} at {PLACES[n % len(PLACES)]}"
        for n in range(150)
    ]
    writer = memory(store)
    name = f"s-{uuid.uuid4().hex[:12]}"
    writer.add_messages(
        name,
        [{"role": "user" if n % 2 == 0 else "assistant", "content": t} for n, t in enumerate(said)],
        progress=False,
    )
    return name


def memory(store: ChromaStore, reranker: object = None, top: int = TOP) -> ContextMemory:
    config = MemoryConfig(recent_messages=4, reranker=reranker, reranker_top=top)
    return ContextMemory(store=store, config=config, write_behind=False, inclusion_log=False)


def test_the_reranker_sees_reranker_top_candidates_at_a_small_budget(
    store: ChromaStore, session: str
) -> None:
    seen: list[int] = []

    def counting(query: str, texts: Sequence[str]) -> list[float]:
        seen.append(len(texts))
        return [float(len(t)) for t in texts]

    plain = memory(store).candidates(session, QUERY, budget=BUDGET)
    assert len(plain.retrieved) < TOP  # the budget alone sizes a smaller pool
    found = memory(store, reranker=counting).candidates(session, QUERY, budget=BUDGET)
    assert seen == [TOP]
    assert len(found.retrieved) >= TOP
    # The plain pool is inside the deeper one: the reranker only adds candidates to weigh.
    assert {it.id for it in plain.retrieved} <= {it.id for it in found.retrieved}


@settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(budget=st.integers(60, 4000), top=st.integers(1, 140))
def test_any_budget_and_top_the_pool_reaches_top_and_keeps_the_plain_one(
    store: ChromaStore, session: str, budget: int, top: int
) -> None:
    seen: list[int] = []

    def counting(query: str, texts: Sequence[str]) -> list[float]:
        seen.append(len(texts))
        return [float(len(t)) for t in texts]

    plain = memory(store, top=top).candidates(session, QUERY, budget=budget)
    found = memory(store, reranker=counting, top=top).candidates(session, QUERY, budget=budget)
    # 146 stored turns match (150 less the recent four): the pool holds top of them or more.
    assert len(found.retrieved) >= min(top, 100)
    assert seen == [min(top, len(found.retrieved))] or len(found.retrieved) < 2
    assert {it.id for it in plain.retrieved} <= {it.id for it in found.retrieved}
