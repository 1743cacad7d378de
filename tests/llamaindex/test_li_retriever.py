"""CtxBudgetRetriever: retrieval from a ContextMemory that fits its token budget."""

from __future__ import annotations

import numpy as np
import pytest
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import MetadataMode, NodeWithScore

from ctxbudget import InvalidBudgetError, TokenCounter
from ctxbudget.memory.context import ContextMemory
from llama_index.ctxbudget import CtxBudgetRetriever

from .helpers import RecordingLLM

GUIDES = {
    "lisbon": "Lisbon's tram 28 climbs through Alfama. " * 10
    + "Pastéis de nata are best warm, with cinnamon.",
    "porto": "Porto sits on the Douro river. " * 10 + "Port wine cellars line the Gaia bank.",
    "madrid": "Madrid's Prado museum opens at ten. " * 10 + "Churros come with thick chocolate.",
    "rome": "Rome's Colosseum needs a booked ticket. " * 10 + "Carbonara has no cream in Rome.",
}


@pytest.fixture
def guides(context_memory: ContextMemory) -> ContextMemory:
    context_memory.add_documents(list(GUIDES.items()), collection="travel", chunk_tokens=60)
    context_memory.add_documents(["Our refund policy: 30 days."], collection="policies")
    return context_memory


def tokens(counter: TokenCounter, nodes: list) -> int:  # type: ignore[type-arg]
    return sum(counter.count(n.node.get_content(MetadataMode.LLM)) for n in nodes)


def test_retrieves_the_best_matches_within_budget(
    guides: ContextMemory, counter: TokenCounter
) -> None:
    retriever = CtxBudgetRetriever(memory=guides, budget=120)
    nodes = retriever.retrieve("Where can I taste port wine?")

    assert nodes and tokens(counter, nodes) <= 120
    assert "Port wine cellars" in nodes[0].node.get_content()
    assert [n.score for n in nodes] == sorted((n.score or 0.0 for n in nodes), reverse=True)
    assert nodes[0].node.metadata["kind"] == "document"
    assert nodes[0].node.metadata["doc_namespace"] == "travel"
    everything = CtxBudgetRetriever(memory=guides, budget=100_000).retrieve("Porto")
    assert tokens(counter, everything) > 120  # the budget, not a lack of matches, cut it


async def test_async_retrieval_matches_sync(guides: ContextMemory) -> None:
    retriever = CtxBudgetRetriever(memory=guides, budget=200)
    sync = retriever.retrieve("museum opening hours")
    assert [
        (n.node_id, n.node.text) for n in await retriever.aretrieve("museum opening hours")
    ] == [(n.node_id, n.node.text) for n in sync]


def test_collections_sessions_and_users(guides: ContextMemory) -> None:
    only = CtxBudgetRetriever(memory=guides, budget=500, collections=["policies"])
    assert [n.node.text for n in only.retrieve("Can I get my money back?")] == [
        "Our refund policy: 30 days."
    ]
    guides.add_messages(
        "s1",
        [("user", "My passport expires in June."), ("assistant", "Renew it before the trip.")],
        user_id="ada",
    )
    session = CtxBudgetRetriever(memory=guides, budget=300, documents=False, session_id="s1")
    nodes = session.retrieve("When does my passport expire?")
    assert nodes[0].node.text == "My passport expires in June."
    assert nodes[0].node.metadata["role"] == "user"
    user = CtxBudgetRetriever(memory=guides, budget=300, documents=False, user_id="ada")

    def ref(node: NodeWithScore) -> tuple[str, str, str]:
        meta = node.node.metadata
        return (meta["id"], meta["scope"], meta["scope_id"])

    # The same record: its own id in its session; qualified by it beside the user's others.
    assert ref(nodes[0]) == (nodes[0].node_id, "session", "s1")
    assert ref(nodes[0]) in {ref(n) for n in user.retrieve("passport")}


def test_in_a_query_engine_the_context_fits(guides: ContextMemory, counter: TokenCounter) -> None:
    llm = RecordingLLM(max_tokens=10)
    retriever = CtxBudgetRetriever(memory=guides, budget=150)
    engine = RetrieverQueryEngine.from_args(retriever, llm=llm)
    engine.query("What should I eat in Rome?")
    (prompt,) = llm.text_prompts()
    assert "Carbonara" in prompt
    assert counter.count(prompt) <= 150 + 120  # the context, plus the QA template and query


def test_arguments_are_checked(guides: ContextMemory) -> None:
    with pytest.warns(DeprecationWarning, match="token_budget= is now budget="):
        old = CtxBudgetRetriever(memory=guides, token_budget=300)  # type: ignore[call-arg]
    assert old.budget == 300
    assert CtxBudgetRetriever(memory=guides, budget=300, documents="policies").collections == [
        "policies"
    ]
    with pytest.raises(InvalidBudgetError, match="budget"):
        CtxBudgetRetriever(memory=guides, budget=0)
    with pytest.raises(ValueError, match="nothing to search"):
        CtxBudgetRetriever(memory=guides, budget=10, documents=False)
    with pytest.raises(ValueError, match="k must be"):
        CtxBudgetRetriever(memory=guides, budget=10, k=-1)


def test_k_zero_returns_no_nodes_and_reports_every_hit_that_fit(guides: ContextMemory) -> None:
    """As LangChain's retriever: k=0 is no nodes (the same values are taken by both)."""
    everything = CtxBudgetRetriever(memory=guides, budget=2_000).retrieve("Porto and Lisbon")
    retriever = CtxBudgetRetriever(memory=guides, budget=2_000, k=np.int64(0))
    assert retriever.retrieve("Porto and Lisbon") == []
    context = retriever.last_context
    assert context is not None and not context.included
    limited = {p.item.id for p in context.pruned if p.reason.value == "over_limit"}
    assert limited == {n.node_id for n in everything}


def test_k_caps_the_nodes_and_last_context_lists_exactly_them(guides: ContextMemory) -> None:
    everything = CtxBudgetRetriever(memory=guides, budget=2_000).retrieve("Porto and Lisbon")
    assert len(everything) > 2
    retriever = CtxBudgetRetriever(memory=guides, budget=2_000, k=2)
    nodes = retriever.retrieve("Porto and Lisbon")
    assert [n.node_id for n in nodes] == [n.node_id for n in everything[:2]]
    context = retriever.last_context
    assert context is not None
    assert sorted(i.id for i in context.included) == sorted(n.node_id for n in nodes)
    limited = {p.item.id for p in context.pruned if p.reason.value == "over_limit"}
    assert limited == {n.node_id for n in everything[2:]}
