"""When the middleware stores the state's messages: before the model, even when packing fails.

The state's messages are handed to the memory's writer right after the call gathers (before it
packs; storing them once packed instead was measured on 2026-11-30 and bought nothing:
docs/benchmarks.md). What must hold: the question is acknowledged by the memory before the
model is called (a crash during the model call loses nothing), and a call that fails to pack
has stored the state's messages all the same. Only messages not stored yet are checked (the
rest passed the same checks when stored), so a message the memory refused (the run's answer,
stored when the agent finishes) must not be remembered as stored: the next call that carries it
is refused before the model is called. Real tiktoken, embedded Chroma and embedder; the chat
model is the one fake.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatResult
from lc_fakes import RecordingChatModel
from pydantic import Field

from ctxbudget import BudgetExceededError, StoreInputError
from ctxbudget.memory.context import ContextMemory
from langchain_ctxbudget import CtxBudgetMiddleware


class WatchingModel(RecordingChatModel):
    """Records which messages the memory holds for thread ``t`` when it is called."""

    memory: Any = None
    held: list[list[str]] = Field(default_factory=list)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.memory.flush()  # what the memory acknowledged is stored first
        self.held.append([r.id for r in self.memory.history("t")])
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def config() -> Any:
    return {"configurable": {"thread_id": "t"}}


def test_the_question_is_acknowledged_before_the_model_is_called(memory: ContextMemory) -> None:
    replies = iter([AIMessage(f"Answer {n}.", id=f"a{n}") for n in range(3)])
    model = WatchingModel(messages=replies, memory=memory)
    middleware = CtxBudgetMiddleware(model="gpt-4o", budget=4000, reserve=100, memory=memory)
    bot = create_agent(model, middleware=[middleware])
    state = bot.invoke({"messages": [HumanMessage("Where is the ferry?", id="q0")]}, config())
    question = HumanMessage("And the train?", id="q1")
    bot.invoke({"messages": [*state["messages"], question]}, config())
    assert model.held == [["q0"], ["q0", "a0", "q1"]]
    memory.flush()
    assert [r.id for r in memory.history("t")] == ["q0", "a0", "q1", "a1"]


def test_a_call_that_cannot_be_packed_stores_the_state_all_the_same(
    memory: ContextMemory,
) -> None:
    model = RecordingChatModel(messages=iter([AIMessage("Never sent.")]))
    middleware = CtxBudgetMiddleware(model="gpt-4o", budget=200, reserve=100, memory=memory)
    bot = create_agent(model, middleware=[middleware])
    with pytest.raises(BudgetExceededError):
        bot.invoke({"messages": [HumanMessage("word " * 300, id="q0")]}, config())
    assert model.calls == []
    memory.flush()
    assert [r.id for r in memory.history("t")] == ["q0"]


def test_a_message_the_memory_refused_is_checked_again_on_the_next_call(
    memory: ContextMemory,
) -> None:
    # The run's answer is stored when the agent finishes, unchecked before: one the memory
    # refuses (a lone surrogate) is logged, not remembered as stored, so the next call that
    # carries it is refused before the model is called, as a new message would be.
    replies = iter(
        [AIMessage("Hi.", id="a0"), AIMessage("bad \ud800 answer", id="a1"), AIMessage("No.")]
    )
    model = RecordingChatModel(messages=replies)
    middleware = CtxBudgetMiddleware(model="gpt-4o", budget=4000, reserve=100, memory=memory)
    bot = create_agent(model, middleware=[middleware])
    state = bot.invoke({"messages": [HumanMessage("Hello?", id="q0")]}, config())
    memory.flush()  # the session has records: its generation keys what the middleware stored
    state = bot.invoke({"messages": [*state["messages"], HumanMessage("Hm?", id="q1")]}, config())
    memory.flush()
    with pytest.raises(StoreInputError, match="surrogate"):
        bot.invoke({"messages": [*state["messages"], HumanMessage("Hi?", id="q2")]}, config())
    assert len(model.calls) == 2
    memory.flush()
    assert [r.id for r in memory.history("t")] == ["q0", "a0", "q1"]
