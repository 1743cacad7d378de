"""A user edits their message in a LangGraph agent: later recalls show the new text only.

LangGraph's ``add_messages`` replaces a state message that has the id of a new one; an edit is
``[RemoveMessage(id=answer.id), HumanMessage(new_text, id=question.id)]``. Before 2026-11-30
the memory kept the first text of an id: another thread of the same user recalled the old one.
The middleware now replaces the stored message in its place before the call gathers, when it
stored the message itself; a message replaced in the memory while the state kept the old
text is never edited back. A message only removed from the state stays stored
(docs/langchain.md). Real tiktoken, embedded Chroma and embedder; the chat model is the one
fake.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from lc_fakes import RecordingChatModel

from ctxbudget.embed.local import LocalEmbedder
from ctxbudget.memory.context import ContextMemory
from langchain_ctxbudget import CtxBudgetMiddleware

OLD = "My gym locker code is 4471."
NEW = "My gym locker code is 9902."


def config(thread: str) -> Any:
    return {"configurable": {"thread_id": thread, "user_id": "ana"}}


def answers(prefix: str) -> RecordingChatModel:
    replies = iter([AIMessage(f"{prefix} answer {n}.", id=f"{prefix}{n}") for n in range(20)])
    return RecordingChatModel(messages=replies)


def agent(model: RecordingChatModel, memory: ContextMemory, saver: InMemorySaver) -> Any:
    middleware = CtxBudgetMiddleware(model="gpt-4o", budget=4000, reserve=100, memory=memory)
    return create_agent(model, middleware=[middleware], checkpointer=saver)


def sent_text(model: RecordingChatModel) -> str:
    received: list[BaseMessage] = model.calls[-1][0]
    return "\n".join(m.text for m in received)


def test_an_edit_is_what_another_thread_of_the_user_recalls(
    memory: ContextMemory, caplog: pytest.LogCaptureFixture
) -> None:
    model = answers("a")
    bot = agent(model, memory, InMemorySaver())
    bot.invoke({"messages": [HumanMessage("Hello, I joined a gym.", id="q0")]}, config("t1"))
    bot.invoke({"messages": [HumanMessage(OLD, id="q1")]}, config("t1"))
    with caplog.at_level(logging.WARNING):
        edit = [RemoveMessage(id="a1"), HumanMessage(NEW, id="q1")]
        bot.invoke({"messages": edit}, config("t1"))
        assert NEW in sent_text(model) and "4471" not in sent_text(model)

        bot.invoke({"messages": [HumanMessage("What is my locker code?", id="r0")]}, config("t2"))
    recalled = sent_text(model)  # thread t2's call: the memory recalls thread t1
    assert "9902" in recalled
    assert "4471" not in recalled
    assert [r.levelname for r in caplog.records if r.levelno >= logging.WARNING] == []
    seqs = [(r.id, r.seq) for r in memory.history("t1")]
    assert [i for i, _ in seqs] == ["q0", "a0", "q1", "a1", "a2"]  # q1 in its place
    assert memory.history("t1")[2].text == NEW


def test_an_edit_is_stored_after_the_session_was_changed_elsewhere(
    memory: ContextMemory, caplog: pytest.LogCaptureFixture
) -> None:
    model = answers("a")
    bot = agent(model, memory, InMemorySaver())
    bot.invoke({"messages": [HumanMessage(OLD, id="q1")]}, config("t1"))
    bot.invoke({"messages": [HumanMessage("And the spare key?", id="q2")]}, config("t1"))
    memory.flush()
    memory.delete_messages("t1", ["a1"])  # a new generation: what the middleware knew is old
    with caplog.at_level(logging.WARNING):
        edit = [RemoveMessage(id="a0"), HumanMessage(NEW, id="q1")]
        bot.invoke({"messages": edit}, config("t1"))
        bot.invoke({"messages": [HumanMessage("My locker code?", id="r0")]}, config("t2"))
    assert "9902" in sent_text(model) and "4471" not in sent_text(model)
    assert [r.text for r in memory.history("t1") if r.id == "q1"] == [NEW]
    assert [r.levelname for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_a_message_replaced_in_the_memory_is_not_edited_back(
    tmp_path: Path, embedder: LocalEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    saver = InMemorySaver()  # one checkpointer: two workers serving the same threads
    with (
        ContextMemory(tmp_path / "db", embedder=embedder) as first_memory,
        ContextMemory(tmp_path / "db", embedder=embedder) as second_memory,
    ):
        first = agent(answers("a"), first_memory, saver)
        first.invoke({"messages": [HumanMessage(OLD, id="q1")]}, config("t1"))
        first_memory.replace_message("t1", "q1", NEW)  # an admin redacts; the state keeps OLD
        first.invoke({"messages": [HumanMessage("Thanks.", id="q2")]}, config("t1"))
        # Another worker, which never stored q1, cannot tell an edit from this: the memory's
        # text stays, with a warning (docs/langchain.md, "Edited and removed messages").
        second = agent(answers("b"), second_memory, saver)
        with caplog.at_level(logging.WARNING):
            second.invoke({"messages": [HumanMessage("Bye.", id="q3")]}, config("t1"))
            second_memory.flush()
        for memory in (first_memory, second_memory):
            assert [r.text for r in memory.history("t1") if r.id == "q1"] == [NEW]
        assert any("'q1'" in r.getMessage() for r in caplog.records)


def test_messages_only_removed_from_the_state_stay_stored(memory: ContextMemory) -> None:
    bot = agent(answers("a"), memory, InMemorySaver())
    bot.invoke({"messages": [HumanMessage(OLD, id="q1")]}, config("t1"))
    # As SummarizationMiddleware trims a state: every message removed, a summary instead.
    trimmed = [
        RemoveMessage(id=REMOVE_ALL_MESSAGES),
        HumanMessage("Summary: Ana talked about her gym.", id="s0"),
        HumanMessage("Anything else?", id="q2"),
    ]
    bot.invoke({"messages": trimmed}, config("t1"))
    memory.flush()
    assert [r.id for r in memory.history("t1")][:2] == ["q1", "a0"]
