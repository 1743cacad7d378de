"""``strategy=`` on the LangChain adapter: passed through to the core, never interpreted here.

The middleware's budget gets the strategy's floors and caps (merged over its memory's), its
recall gathers with the strategy's settings, and the retriever ranks with its scoring weights.
Real agents (``create_agent``) with LangChain's fake chat model, a real embedded Chroma.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from lc_fakes import RecordingChatModel

from ctxbudget import Budget, ConfigurationError, Tier
from ctxbudget.memory.context import ContextMemory
from langchain_ctxbudget import CtxBudgetMiddleware, CtxBudgetRetriever
from langchain_ctxbudget.observe import CallContext

VISA = "Portuguese residence permits are renewed at AIMA offices."


def observed(**options: Any) -> tuple[CtxBudgetMiddleware, list[CallContext]]:
    seen: list[CallContext] = []
    return CtxBudgetMiddleware(model="gpt-4o", on_context=seen.append, **options), seen


def ask(middleware: CtxBudgetMiddleware, seen: list[CallContext], question: str) -> CallContext:
    model = RecordingChatModel(messages=iter([AIMessage("ok")]))
    agent = create_agent(model, tools=[], middleware=[middleware], context_schema=dict)
    agent.invoke(
        {"messages": [HumanMessage(question)]}, context={"session_id": "s1", "user_id": "u1"}
    )
    return seen[-1]


def test_the_middleware_budget_takes_the_strategy_shares(memory: ContextMemory) -> None:
    plain, seen = observed(budget=3000, memory=memory)
    assert ask(plain, seen, "Hello").context.budget.floors == {Tier.RETRIEVED: 0.35}
    agent, seen = observed(budget=3000, memory=memory, strategy="agent")
    budget = ask(agent, seen, "Hello").context.budget
    assert (budget.floors, budget.caps) == ({50: 0.15}, {50: 0.35})
    assert agent.min_exchanges == 2 and plain.min_exchanges == 1
    assert CtxBudgetMiddleware(model="gpt-4o", strategy="agent", min_exchanges=0).min_exchanges == 0


def test_without_memory_and_with_a_budget_object(memory: ContextMemory) -> None:
    bare, seen = observed(budget=2000, strategy="rag")
    assert ask(bare, seen, "Hi").context.budget.floors == {Tier.RETRIEVED: 0.6}
    none, seen = observed(budget=2000)
    assert ask(none, seen, "Hi").context.budget.floors == {}  # no memory, no strategy: as before
    own = Budget(window=4000, reserve=500, caps={Tier.RETRIEVED: 0.2})
    given, seen = observed(budget=own, memory=memory, strategy="agent")
    budget = ask(given, seen, "Hi").context.budget
    # The Budget's own shares win tier by tier: its RETRIEVED cap, no strategy floor there.
    assert (budget.floors, budget.caps, budget.reserve) == ({}, {50: 0.2}, 500)


def test_the_memory_strategy_reaches_the_middleware(memory: ContextMemory) -> None:
    rag = ContextMemory(store=memory.store, write_behind=False, strategy="rag")
    middleware, seen = observed(budget=3000, memory=rag)
    budget = ask(middleware, seen, "Hi").context.budget
    assert budget.floors == {Tier.RETRIEVED: 0.6}
    over, seen = observed(budget=3000, memory=rag, strategy={"caps": {"RETRIEVED": 0.7}})
    budget = ask(over, seen, "Hi").context.budget
    assert (budget.floors, budget.caps) == ({50: 0.6}, {50: 0.7})


def test_recall_gathers_with_the_strategy(memory: ContextMemory) -> None:
    memory.add_documents([("visa", VISA)])
    question = "Should I renew my residence permit?"
    found, seen = observed(budget=3000, memory=memory)
    assert VISA in ask(found, seen, question).context.render()
    skipped, seen = observed(budget=3000, memory=memory, strategy={"document_k": 0})
    assert VISA not in ask(skipped, seen, question).context.render()


def test_a_bad_strategy_fails_when_the_middleware_is_made() -> None:
    with pytest.raises(ConfigurationError, match="known presets: agent, chat, coding"):
        CtxBudgetMiddleware(model="gpt-4o", strategy="companion")
    with pytest.raises(ConfigurationError, match="floors add up to 1.5"):
        CtxBudgetMiddleware(model="gpt-4o", strategy={"floors": {"RECENT": 0.9, "SUMMARY": 0.6}})


def test_the_retriever_ranks_with_the_strategy_scoring(memory: ContextMemory) -> None:
    memory.add_documents(
        [(f"d{n}", f"Porto guide {n}: port cellars, tiles and painting classes.") for n in range(8)]
    )
    sharp = CtxBudgetRetriever(memory=memory, k=8, budget=2000).invoke("painting in Porto")
    flat = CtxBudgetRetriever(
        memory=memory, k=8, budget=2000, strategy={"scoring": {"relevance_weight": 1.0}}
    ).invoke("painting in Porto")
    before = {d.id: d.metadata["score"] for d in sharp}
    after = {d.id: d.metadata["score"] for d in flat}
    assert before.keys() == after.keys()
    assert all(after[i] >= before[i] - 1e-12 for i in before)
    assert any(after[i] > before[i] for i in before)
    with pytest.raises(ConfigurationError, match="known presets"):  # not pydantic's error
        CtxBudgetRetriever(memory=memory, strategy="nope")
