"""The reranker's ranking is blended with the pipeline's (`MemoryConfig.reranker_weight`).

When the reranker's scores replaced the pipeline's relevance (``reranker_weight=1``), a noisy
reranker over a deep pool did worse than none (the noisy oracle on LoCoMo,
benchmarks/bench_oracle.py: sigma 0.5 over 200 candidates kept 0.689 of the evidence at 1,024
tokens, none 0.860). Blended, what it gets wrong about a candidate the pipeline ranks low is
outweighed, and what it gets right about one the pipeline missed still counts.

The stage's own properties run on `rerank` with hand-made candidates (pure: no store); the
recall one on real parts (tiktoken, an embedded Chroma in a temporary folder, the default
embedder), with seeded noisy oracles standing in for the user's reranker.
"""

from __future__ import annotations

import dataclasses
import math
import uuid
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxbudget import ConfigurationError
from ctxbudget.core.items import ContextItem
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.memory.reading.candidates import Candidates
from ctxbudget.memory.reading.rerank import RerankWarnings, blended, rerank
from ctxbudget.store.chroma_store import ChromaStore

PURE = settings(max_examples=200, deadline=None, derandomize=True)
unit = st.floats(0.0, 1.0, allow_nan=False)
finite = st.floats(-1e6, 1e6, allow_nan=False)


def pool(scores: Sequence[float], stamp: float = 1.7e9) -> Candidates:
    """Retrieved candidates with these scores (best first), one timestamp for all."""
    items = [
        ContextItem(id=f"t{n}", text=f"turn {n}", score=s, timestamp=stamp)
        for n, s in enumerate(scores)
    ]
    ordered = sorted(items, key=lambda it: (-it.score, it.id))
    return Candidates(pinned=(), history=(), summaries=(), retrieved=tuple(ordered), user_id=None)


def reranked(found: Candidates, scores: Sequence[object], weight: float = 0.6) -> Candidates:
    """``found`` reranked by ``scores``, one per candidate ``t<n>`` (in n's order)."""
    by_id = {f"t{n}": score for n, score in enumerate(scores)}

    def scorer(query: str, texts: Sequence[str]) -> object:
        got = [by_id[f"t{t.split()[1]}"] for t in texts]
        return got if all(isinstance(g, float) for g in got) else scores

    config = MemoryConfig(reranker=scorer, reranker_top=len(scores), reranker_weight=weight)
    return rerank(found, "q", config, RerankWarnings())


@PURE
@given(
    own=st.lists(unit, min_size=2, max_size=30),
    theirs=st.lists(finite, min_size=2, max_size=30),
    weight=st.floats(0.01, 1.0),
)
def test_the_blend_is_monotone_in_the_reranker_score_for_equal_pipeline_scores(
    own: list[float], theirs: list[float], weight: float
) -> None:
    size = min(len(own), len(theirs))
    own, theirs = own[:size], theirs[:size]
    own[-1] = own[0]  # two candidates the pipeline scores alike
    mixed = blended(own, theirs, weight)
    assert all(0.0 <= b <= 1.0 + 1e-12 for b in mixed)
    if theirs[0] >= theirs[-1]:
        assert mixed[0] >= mixed[-1]
    else:
        assert mixed[0] <= mixed[-1]
    # And through the stage: same score and age, the reranker's preference decides.
    found = pool([0.2 + 0.8 * o for o in own])
    first, last = f"t{0}", f"t{size - 1}"
    ranked = reranked(found, [float(t) for t in theirs], weight)
    score = {it.id: it.score for it in ranked.retrieved}
    if max(theirs) > min(theirs):
        if theirs[0] > theirs[-1]:
            assert score[first] >= score[last]
        elif theirs[0] < theirs[-1]:
            assert score[first] <= score[last]


@PURE
@given(own=st.lists(unit, min_size=2, max_size=30), theirs=st.lists(finite, min_size=30))
def test_a_higher_pipeline_score_never_lowers_the_blend(
    own: list[float], theirs: list[float]
) -> None:
    theirs = theirs[: len(own)]
    theirs[-1] = theirs[0]  # two candidates the reranker scores alike
    mixed = blended(own, theirs, 0.6)
    if own[0] >= own[-1]:
        assert mixed[0] >= mixed[-1]
    else:
        assert mixed[0] <= mixed[-1]


@PURE
@given(
    own=st.lists(st.floats(0.01, 1.0), min_size=2, max_size=30),
    bad=st.sampled_from(["nan", "inf", "short", "long", "text", "none", "constant"]),
    at=st.integers(0, 10**6),
    weight=st.floats(0.01, 1.0),
)
def test_bad_reranker_output_leaves_the_ranking_as_it_was(
    own: list[float], bad: str, at: int, weight: float
) -> None:
    found = pool(own)
    size = len(own)
    scores: list[object] = [float(n) for n in range(size)]
    if bad in ("nan", "inf"):
        scores[at % size] = math.nan if bad == "nan" else -math.inf
    elif bad == "short":
        scores = scores[:-1]
    elif bad == "long":
        scores = [*scores, 1.0]
    elif bad == "text":
        scores[at % size] = "high"
    elif bad == "none":
        scores = [None] * size
    else:
        scores = [3.0] * size  # one score for all: no order to take

    def scorer(query: str, texts: Sequence[str]) -> object:
        return scores

    config = MemoryConfig(reranker=scorer, reranker_top=size, reranker_weight=weight)
    assert rerank(found, "q", config, RerankWarnings()) == found


def test_weight_one_is_the_reranker_scores_replacing_the_pipelines() -> None:
    found = pool([0.9, 0.5, 0.1])  # t0, t1, t2
    got = reranked(found, [0.0, 2.0, 1.0], weight=1.0)
    assert [it.id for it in got.retrieved] == ["t1", "t2", "t0"]
    score = {it.id: it.score for it in got.retrieved}
    assert score["t1"] == pytest.approx(0.9) and score["t0"] == 0.0
    assert score["t2"] == pytest.approx(0.9 * 0.5**3)  # relevance_weight 3 sharpens


def test_the_weight_is_checked_by_name() -> None:
    for bad in (0.0, -0.1, 1.5, math.nan, "0.5", True):
        with pytest.raises(ConfigurationError, match="reranker_weight"):
            MemoryConfig(reranker_weight=bad)  # type: ignore[arg-type]
    assert MemoryConfig(reranker_weight=np.float64(0.25)).reranker_weight == 0.25


# A synthetic conversation: filler about many topics, three turns that answer the question.
FILLER = "soup trains bikes rain guitars tea hills cakes rivers cats jobs books films shoes".split()
PLACES = "the market|the office|the beach|the park|home|the station|a cafe".split("|")
EVIDENCE = (
    "Melanie painted a sunrise over the lake for her pottery class",
    "Melanie said the painting of the lake took her three weekends",
    "Melanie gave the lake painting to her sister in Porto",
)
QUESTION = "what did Melanie paint of the lake"
BUDGET = 120
DEPTH = 120  # reranker_top: a deep pool, where replacing did worst
SEEDS = 6  # noisy rerankers per conversation


class NoisyOracle:
    """Evidence scores 1, the rest 0, plus N(0, sigma) noise from a seed."""

    def __init__(self, sigma: float, seed: int) -> None:
        self.sigma = sigma
        self.rng = np.random.default_rng(seed)

    def __call__(self, query: str, texts: Sequence[str]) -> list[float]:
        signal = np.array([1.0 if t in EVIDENCE else 0.0 for t in texts])
        return [float(s) for s in signal + self.rng.normal(0.0, self.sigma, len(texts))]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder) -> ChromaStore:
    folder: Path = tmp_path_factory.mktemp("rerank-blend")
    return ChromaStore(folder / "db", embedder=embedder)


def memory(store: ChromaStore, reranker: object = None, weight: float = 0.0) -> ContextMemory:
    """A memory over the shared store; ``weight`` 0: the default `reranker_weight`."""
    config = MemoryConfig(recent_messages=4, reranker=reranker, reranker_top=DEPTH)
    if weight:
        config = dataclasses.replace(config, reranker_weight=weight)
    return ContextMemory(store=store, config=config, write_behind=False, inclusion_log=False)


def planted(store: ChromaStore, places: Sequence[int]) -> str:
    """160 filler turns with the three evidence turns at ``places`` (before the recent four)."""
    said = [
        f"On the weekend we talked about {FILLER[n % len(FILLER)]} at {PLACES[n % len(PLACES)]}"
        for n in range(160)
    ]
    for place, text in zip(places, EVIDENCE, strict=True):
        said[place] = text
    session = f"s-{uuid.uuid4().hex[:12]}"
    memory(store).add_messages(
        session,
        [{"role": "user" if n % 2 == 0 else "assistant", "content": t} for n, t in enumerate(said)],
        progress=False,
    )
    return session


def recall(mem: ContextMemory, session: str) -> float:
    included = {it.text for it in mem.assemble(session, QUESTION, budget=BUDGET).included}
    return sum(text in included for text in EVIDENCE) / len(EVIDENCE)


@settings(
    max_examples=3,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(places=st.lists(st.integers(0, 150), min_size=3, max_size=3, unique=True))
def test_a_noisy_reranker_keeps_at_least_the_evidence_no_reranker_keeps(
    store: ChromaStore, places: list[int]
) -> None:
    session = planted(store, places)
    plain = recall(memory(store), session)
    assert plain > 0  # the pipeline finds the evidence by itself
    noisy = [recall(memory(store, NoisyOracle(0.5, seed)), session) for seed in range(SEEDS)]
    assert sum(noisy) / len(noisy) >= plain
    # A perfect reranker keeps all of it.
    assert recall(memory(store, NoisyOracle(0.0, 0)), session) == 1.0


def test_replacing_the_pipelines_scores_loses_evidence_to_noise(store: ChromaStore) -> None:
    """The old behaviour (``reranker_weight=1``): what the blend's default avoids."""
    session = planted(store, [10, 60, 110])
    plain = recall(memory(store), session)
    noisy = [recall(memory(store, NoisyOracle(0.5, s), weight=1.0), session) for s in range(SEEDS)]
    assert sum(noisy) / len(noisy) < plain


@PURE
@given(own=st.lists(unit, min_size=2, max_size=40), pick=st.integers(0, 10**6))
def test_what_the_reranker_scores_above_all_others_ties_or_beats_every_other(
    own: list[float], pick: int
) -> None:
    # The blend gives the reranker's favourite at least the weight (0.5 by default) and every
    # other candidate at most 1 - weight: whatever the pipeline's order, it is first or tied
    # first (same age), and strictly first above 0.5.
    found = pool([0.1 + 0.9 * o for o in own])
    favourite = f"t{pick % len(own)}"
    scores = [1.0 if f"t{n}" == favourite else 0.0 for n in range(len(own))]
    for weight in (MemoryConfig().reranker_weight, 0.6):
        got = {it.id: it.score for it in reranked(found, scores, weight).retrieved}
        others = [score for key, score in got.items() if key != favourite]
        assert got[favourite] >= max(others)
        if weight > 0.5:
            assert got[favourite] > max(others)
