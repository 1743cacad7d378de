"""LangChain's ``SummarizationMiddleware`` beside `CtxBudgetMiddleware` with memory.

Once its trigger is reached, ``SummarizationMiddleware`` replaces the state's old messages with
one ``HumanMessage`` ("Here is a summary of the conversation to date: ...", marked
``additional_kwargs={"lc_source": "summarization"}``). Before 2026-12-01 the memory stored it as
something the user said: recalled in another session it read as the user's words, and the
messages it sums up were stored already. It is sent (it is in the state) and never stored; the
messages it replaced stay stored and come back as memories when they match. Real tiktoken,
embedded Chroma and embedder; the chat models are the one fake.
"""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from lc_fakes import RecordingChatModel

from ctxbudget.memory.context import ContextMemory
from langchain_ctxbudget import CtxBudgetMiddleware

FACT = "My locker code at the gym is 4471."


def test_the_summary_is_sent_never_stored_and_what_it_replaced_stays(
    memory: ContextMemory,
) -> None:
    replies = iter([AIMessage(f"Noted {n}.", id=f"a{n}") for n in range(20)])
    model = RecordingChatModel(messages=replies)
    summaries = RecordingChatModel(messages=iter([AIMessage("Ana joined a gym.")] * 5))
    summarizing = SummarizationMiddleware(summaries, trigger=("messages", 6), keep=("messages", 2))
    budgeting = CtxBudgetMiddleware(
        model="gpt-4o", budget=4000, reserve=100, memory=memory, session_id="s1"
    )
    agent = create_agent(model, middleware=[summarizing, budgeting], checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t1", "user_id": "ana"}}
    questions = [FACT, "I swim on Mondays.", "I also lift.", "Any tips?", "What is my code?"]
    for n, text in enumerate(questions):
        out = agent.invoke({"messages": [HumanMessage(text, id=f"q{n}")]}, config)
    memory.flush()
    assert summaries.calls, "the summarization never ran: the test proves nothing"
    state: list[BaseMessage] = out["messages"]
    marked = [m for m in state if m.additional_kwargs.get("lc_source") == "summarization"]
    assert marked, "no summary in the state"
    sent: list[BaseMessage] = model.calls[-1][0]
    assert any("Ana joined a gym." in m.text for m in sent)  # the state's summary is sent
    stored = memory.history("s1")
    assert not [r for r in stored if "summary of the conversation" in r.text]
    assert [r.id for r in stored if r.role == "user"] == [f"q{n}" for n in range(len(questions))]
    # What the summary replaced is recalled from the memory when it matches.
    assert any("4471" in m.text for m in sent)
