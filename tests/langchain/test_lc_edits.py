"""Messages edited or removed in a LangGraph state, and the async chat history's ``aclear``.

LangGraph's ``add_messages`` replaces a message of the state that has the id of a new one (a
user editing their last message: ``[RemoveMessage(answer.id), HumanMessage(text, id=q.id)]``).
The middleware stores the edit over the stored message, in its place
(`ContextMemory.replace_message`; more in tests/langchain/test_lc_message_edits.py). A
``RemoveMessage`` given as a message is named as what it is. Real tiktoken, embedded Chroma
and embedder; the chat model is the one fake (it records what it received).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langgraph.checkpoint.memory import InMemorySaver
from lc_fakes import RecordingChatModel

from ctxbudget import InvalidItemError, StoreInputError
from ctxbudget.memory.context import ContextMemory
from langchain_ctxbudget import CtxBudgetChatMessageHistory, CtxBudgetMiddleware, budget_messages


def warnings_naming(caplog: pytest.LogCaptureFixture, key: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and repr(key) in r.getMessage()
    ]


def test_a_message_edited_in_the_state_is_stored_in_its_place(
    memory: ContextMemory, caplog: pytest.LogCaptureFixture
) -> None:
    answers = iter([AIMessage(f"Answer {n}.", id=f"a{n}") for n in range(4)])
    model = RecordingChatModel(messages=answers)
    middleware = CtxBudgetMiddleware(model="gpt-4o", budget=4000, reserve=100, memory=memory)
    agent = create_agent(model, middleware=[middleware], checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t1", "user_id": "ana"}}
    agent.invoke({"messages": [HumanMessage("Hello.", id="q0")]}, config)
    # A second turn: the session has records, so the middleware remembers what it stored.
    agent.invoke({"messages": [HumanMessage("I live in Paris.", id="q1")]}, config)
    memory.flush()
    assert warnings_naming(caplog, "q1") == []

    with caplog.at_level(logging.WARNING):
        edit = [RemoveMessage(id="a1"), HumanMessage("I live in Berlin.", id="q1")]
        state = agent.invoke({"messages": edit}, config)
        memory.flush()
    assert [m.id for m in state["messages"]] == ["q0", "a0", "q1", "a2"]
    # The model answers the state, edited.
    sent = model.calls[-1][0]
    assert [m.text for m in sent if m.id == "q1"] == ["I live in Berlin."]
    # The memory stores the edit in the message's place, with no warning (it was one before
    # 2026-11-30: the first text was kept). The removed answer stays stored (docs/langchain.md).
    assert warnings_naming(caplog, "q1") == []
    stored = [(r.id, r.text) for r in memory.history("t1")]
    assert stored == [
        ("q0", "Hello."),
        ("a0", "Answer 0."),
        ("q1", "I live in Berlin."),
        ("a1", "Answer 1."),
        ("a2", "Answer 2."),
    ]


def test_a_remove_message_is_named_as_what_it_is(memory: ContextMemory) -> None:
    messages = [HumanMessage("Hi."), RemoveMessage(id="x"), HumanMessage("Well?")]
    with pytest.raises(InvalidItemError, match=r"message 1 \(remove\) is a RemoveMessage"):
        budget_messages(messages, max_tokens=500)
    history = CtxBudgetChatMessageHistory(memory, "s1")
    with pytest.raises(StoreInputError, match=r"message 1 is a RemoveMessage \(id 'x'\)"):
        history.add_messages(messages)
    assert history.messages == []  # nothing was written


async def test_the_async_clear_takes_pins_as_clear_does(memory: ContextMemory) -> None:
    history = CtxBudgetChatMessageHistory(memory, "s1")
    await history.aadd_messages([HumanMessage("I am vegetarian.", id="m0")])
    fact = memory.pin("s1", "Ana is vegetarian.")
    await history.aclear()  # the conversation goes, pinned facts stay
    assert await history.aget_messages() == []
    assert [it.id for it in memory.candidates("s1", "food", budget=500).pinned] == [fact]
    await history.aclear(pins=True)
    assert memory.candidates("s1", "food", budget=500).pinned == ()
