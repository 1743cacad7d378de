"""``strategy=`` on the LlamaIndex adapter: the memory and the retriever pass it to the core.

Same name and meaning as on `ContextMemory` and the LangChain adapter: a preset, a `Strategy`
or a mapping, merged over the `ContextMemory`'s. Real embedded Chroma, the real local model.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from llama_index.core.base.llms.types import ChatMessage

from ctxbudget import ConfigurationError, Strategy, Tier
from ctxbudget.memory.context import ContextMemory
from llama_index.ctxbudget import CtxBudgetMemory, CtxBudgetRetriever

VISA = "Portuguese residence permits are renewed at AIMA offices."


def test_get_assembles_with_the_strategy(context_memory: ContextMemory) -> None:
    context_memory.add_documents([("visa", VISA)])
    plain = CtxBudgetMemory.from_defaults(memory=context_memory, token_limit=2000, session_id="a")
    plain.put(ChatMessage(role="user", content="Should I renew my residence permit?"))
    plain.get()
    assert plain.last_context is not None
    assert plain.last_context.budget.floors == {Tier.RETRIEVED: 0.35}
    assert VISA in plain.last_context.render()

    rag = CtxBudgetMemory.from_defaults(
        memory=context_memory, token_limit=2000, session_id="a", strategy="rag"
    )
    rag.get()
    assert rag.last_context is not None and rag.last_context.budget.floors == {50: 0.6}
    no_docs = CtxBudgetMemory.from_defaults(
        memory=context_memory, token_limit=2000, session_id="a", strategy={"document_k": 0}
    )
    no_docs.get()
    assert no_docs.last_context is not None and VISA not in no_docs.last_context.render()


def test_the_strategy_round_trips_through_to_dict(tmp_path: Path) -> None:
    mine = Strategy(name="mine", caps={Tier.RETRIEVED: 0.3}, scoring={"half_life_days": 9})
    for given, kept in (("coding", "coding"), (mine, mine.as_dict())):
        memory = CtxBudgetMemory.from_defaults(
            path=tmp_path / "m", token_limit=1000, strategy=given
        )
        data = json.loads(json.dumps(memory.to_dict()))
        memory.close()
        assert data["strategy"] == kept
        again = CtxBudgetMemory.from_dict(data)
        try:
            assert again.strategy == kept
        finally:
            again.close()


def test_a_bad_strategy_fails_when_the_memory_is_made(context_memory: ContextMemory) -> None:
    with pytest.raises(ConfigurationError, match="known presets"):
        CtxBudgetMemory.from_defaults(memory=context_memory, token_limit=500, strategy="nope")
    with pytest.raises(ConfigurationError, match="known presets"):
        CtxBudgetRetriever(memory=context_memory, budget=500, strategy="nope")


def test_the_retriever_ranks_with_the_strategy_scoring(context_memory: ContextMemory) -> None:
    context_memory.add_documents(
        [(f"d{n}", f"Porto guide {n}: port cellars, tiles and painting classes.") for n in range(8)]
    )
    query = "painting in Porto"
    sharp = CtxBudgetRetriever(memory=context_memory, budget=2000).retrieve(query)
    flat = CtxBudgetRetriever(
        memory=context_memory, budget=2000, strategy={"scoring": {"relevance_weight": 1.0}}
    ).retrieve(query)
    before = {n.node.node_id: n.score for n in sharp}
    after = {n.node.node_id: n.score for n in flat}
    assert before.keys() == after.keys()
    assert all((after[i] or 0) >= (before[i] or 0) - 1e-12 for i in before)
    assert any((after[i] or 0) > (before[i] or 0) for i in before)
