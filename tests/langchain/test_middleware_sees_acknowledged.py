"""The middleware reads what the app acknowledged just before the run, and waits for nothing else.

`ContextMemory.add_messages` returns once the messages are journaled (write-behind, the
default); a read of the memory waits for them. The middleware reads the store itself (the
session's stamps, then candidates without the wait: the messages it just stored are in the
agent's state), and until 2026-12-01 it did not wait at all: a history imported with
``add_messages`` right before a run, and a fact in it, were missing from the model's call. Now it
waits unless what is waiting is only the state's own messages (`ContextMemory.wait_for_writes`),
so a turn of an agent's tool loop still waits for nothing (counted here).

Real parts: LangChain's ``create_agent``, an embedded Chroma, the default embedder, tiktoken;
the only fake is the chat model.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage

from ctxbudget import ContextMemory
from ctxbudget.memory.writing.behind import WriteBehind
from langchain_ctxbudget import CtxBudgetMiddleware
from tests.lc_fakes import RecordingChatModel

FACT = [("user", "My locker code is 4471, keep it for me"), ("assistant", "Noted, 4471.")]


def replies() -> Iterator[AIMessage]:
    for number in itertools.count():
        yield AIMessage(f"Reply {number}: noted.")


@pytest.mark.parametrize("how", ["invoke", "ainvoke"])
def test_messages_added_just_before_the_run_reach_the_model(
    tmp_path: Path, embedder: Any, how: str
) -> None:
    memory = ContextMemory(path=tmp_path / "db", embedder=embedder)
    try:
        model = RecordingChatModel(messages=replies())
        middleware = CtxBudgetMiddleware(model="gpt-4o", budget=600, memory=memory, user_id="ana")
        agent = create_agent(model, middleware=[middleware])
        config = {"configurable": {"thread_id": "ana-1"}}
        question = {"messages": [HumanMessage("What is my locker code?")]}
        memory.add_messages("ana-1", FACT, user_id="ana")  # acknowledged, not stored yet
        if how == "invoke":
            agent.invoke(question, config)
        else:
            asyncio.run(agent.ainvoke(question, config))
        sent = " ".join(str(m.content) for m in model.calls[0][0])
        assert "4471" in sent
        assert any("4471" in item.text for item in middleware.last_context("ana-1").included)
    finally:
        memory.close()


def test_a_turn_does_not_wait_for_the_states_own_messages(
    tmp_path: Path, embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = ContextMemory(path=tmp_path / "db", embedder=embedder)
    settles: list[int] = []
    real = WriteBehind.settle

    def counted(self: WriteBehind) -> None:
        settles.append(len(self.waiting()))
        real(self)

    try:
        middleware = CtxBudgetMiddleware(model="gpt-4o", budget=2000, memory=memory)
        agent = create_agent(RecordingChatModel(messages=replies()), middleware=[middleware])
        config = {"configurable": {"thread_id": "s1"}}
        state: list[Any] = []
        monkeypatch.setattr(WriteBehind, "settle", counted)
        for n in range(6):  # back to back: the turn before's messages still waiting
            question = HumanMessage(f"Question {n}: what did we plan?", id=f"q{n}")
            state = list(agent.invoke({"messages": [*state, question]}, config)["messages"])
        assert settles == []  # only the state's own messages were ever waiting
        monkeypatch.undo()
        memory.flush()
        assert len(memory.history("s1")) == 12
    finally:
        memory.close()
