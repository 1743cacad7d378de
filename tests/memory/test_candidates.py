"""`ContextMemory.candidates` and `ContextMemory.search`: the one gathering every caller uses.

Properties over generated sessions: the candidates are what `assemble` offers (same ids, same
scores), the search they cost is bounded by the budget, no other session's turns come back, and
`search` scores hits the way `candidates` scores records from outside the session.
"""

from __future__ import annotations

import math
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxbudget import BudgetExceededError, Tier
from ctxbudget.core.ids import is_internal
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.store.chroma_store import ChromaStore

WORDS = "cat tea train hill lake river paint guitar Porto Lisbon cake soup bike rain".split()
SETTINGS = settings(
    max_examples=15,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

sentences = st.lists(st.sampled_from(WORDS), min_size=2, max_size=9).map(" ".join)
sessions = st.lists(sentences, min_size=1, max_size=30)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder) -> ContextMemory:
    """One embedded store for the module: each example writes its own sessions."""
    folder: Path = tmp_path_factory.mktemp("candidates")
    store = ChromaStore(folder / "db", embedder=embedder)
    return ContextMemory(store=store, config=MemoryConfig(recent_messages=6))


def write(memory: ContextMemory, texts: list[str]) -> str:
    session = f"s-{uuid.uuid4().hex[:12]}"
    memory.add_messages(
        session,
        [
            {"role": "user" if i % 2 == 0 else "assistant", "content": text}
            for i, text in enumerate(texts)
        ],
        progress=False,
    )
    return session


@SETTINGS
@given(texts=sessions, others=sessions, query=sentences, budget=st.integers(60, 3000))
def test_candidates_are_what_assemble_offers_and_stay_in_their_session(
    shared: ContextMemory, texts: list[str], others: list[str], query: str, budget: int
) -> None:
    mine = write(shared, texts)
    theirs = write(shared, others)
    found = shared.candidates(mine, query, budget=budget)
    # Only this session's turns (no user, no documents were written).
    stored_mine = {r.id for r in shared.history(mine)}
    stored_theirs = {r.id for r in shared.history(theirs)}
    ids = [it.id for it in found.items]
    assert len(ids) == len(set(ids))
    assert {i for i in ids if not is_internal(i)} <= stored_mine
    assert not {i for i in ids if not is_internal(i)} & (stored_theirs - stored_mine)
    assert all(it.tier == Tier.RECENT for it in found.history)
    assert all(it.tier == Tier.RETRIEVED for it in found.retrieved)
    scores = [it.score for it in found.retrieved]
    assert scores == sorted(scores, reverse=True)
    assert all(math.isfinite(s) for s in scores)
    # Bounded by the budget: the search pool follows what the budget can hold.
    # (the pool: 4x what fits at >= 1 token a turn; plus at most document_k per query)
    config = shared.config
    pool = max(config.semantic_k, budget) + config.document_k * (1 + config.query_turns)
    assert len(found.retrieved) <= pool
    # assemble offers exactly these candidates with these scores.
    try:
        ctx = shared.assemble(mine, query, budget=budget)
    except BudgetExceededError:
        return  # the query alone does not fit this budget: nothing to compare

    offered = {it.id: it.score for it in ctx.included} | {
        p.item.id: p.item.score for p in ctx.pruned
    }
    for item in found.items:
        assert item.id in offered
        assert offered[item.id] == pytest.approx(item.score)


def test_search_recent_returns_matching_recent_turns_too(shared: ContextMemory) -> None:
    session = write(shared, ["I painted the lake", "nice", "my cat likes tea", "ok"])
    plain = shared.candidates(session, "what did I paint", budget=2000)
    assert not {it.id for it in plain.retrieved} & {it.id for it in plain.history}
    recent = shared.candidates(session, "what did I paint", budget=2000, search_recent=True)
    painted = [it for it in recent.retrieved if "painted" in it.text]
    assert painted and painted[0].id in {it.id for it in recent.history}


def test_search_scores_documents_the_way_candidates_do(shared: ContextMemory) -> None:
    shared.add_documents(
        [("d-lake", "The lake freezes in January."), ("d-cake", "A lemon cake needs three eggs.")],
        collection="notes",
    )
    scored = shared.search("when does the lake freeze", k=2, collections=["notes"])
    assert [s.hit.record.id for s in scored] == ["d-lake#0", "d-cake#0"]
    session = write(shared, ["hello there"])
    found = shared.candidates(session, "when does the lake freeze", budget=2000)
    by_id = {it.text: it.score for it in found.retrieved}
    assert by_id["The lake freezes in January."] == pytest.approx(scored[0].score)
    assert shared.search("   ") == []


def test_clear_forgets_the_conversation_and_keeps_pins_unless_asked(
    shared: ContextMemory,
) -> None:
    session = write(shared, ["I live in Porto", "noted", "I like tea"])
    fact = shared.pin(session_id=session, text="The user is vegetarian.")
    other = write(shared, ["another session"])
    assert shared.clear(session) == 3
    assert shared.history(session) == []
    pinned = shared.candidates(session, "what do I eat", budget=2000).pinned
    assert [it.text for it in pinned] == ["The user is vegetarian."]
    assert shared.clear(session, pins=True) == 1
    assert shared.candidates(session, "what do I eat", budget=2000).pinned == ()
    assert len(shared.history(other)) == 1  # no other session touched
    assert fact
