"""A tool result's ``status`` survives storage: an error stays an error.

LangChain's ``ToolMessage.status`` (``"success"`` or ``"error"``) is what Anthropic's adapter
sends as ``is_error``, and others as the result's outcome. Before 2026-12-01 the memory kept a
tool result's text and call id only: a failed tool came back from `CtxBudgetChatMessageHistory`
as a success. Stored as the record's ``_status`` (only an error: a success is the default),
read back by the history, kept by an edit that does not change it, changed by one that does.
Real tiktoken, Chroma (embedded and a server) and embedder; the chat model is the one fake.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import ToolException, tool
from langgraph.checkpoint.memory import InMemorySaver
from lc_fakes import RecordingChatModel

from ctxbudget import StoreInputError
from ctxbudget.memory.context import ContextMemory
from langchain_ctxbudget import CtxBudgetChatMessageHistory, CtxBudgetMiddleware

CALL = AIMessage(
    "", id="a1", tool_calls=[{"name": "weather", "args": {"city": "Oslo"}, "id": "c1"}]
)


def statuses(messages: list[BaseMessage]) -> dict[str | None, str]:
    return {m.id: m.status for m in messages if isinstance(m, ToolMessage)}


def test_an_error_result_comes_back_an_error(any_memory: ContextMemory) -> None:
    history = CtxBudgetChatMessageHistory(any_memory, "s1")
    failed = ToolMessage("HTTP 503", tool_call_id="c1", id="t1", status="error")
    history.add_messages([HumanMessage("Weather in Oslo?", id="q1"), CALL, failed])
    second = AIMessage("", id="a2", tool_calls=[{"name": "weather", "args": {}, "id": "c2"}])
    history.add_messages([second, ToolMessage("Rain.", tool_call_id="c2", id="t2")])
    assert statuses(history.messages) == {"t1": "error", "t2": "success"}
    records = {r.id: r for r in any_memory.history("s1")}
    assert records["t1"].metadata == {"_status": "error"}
    assert records["t2"].metadata == {}  # a success stores nothing: the records before are alike


def test_an_edit_keeps_the_status_unless_it_gives_one(memory: ContextMemory) -> None:
    history = CtxBudgetChatMessageHistory(memory, "s1")
    failed = ToolMessage("HTTP 503", tool_call_id="c1", id="t1", status="error")
    history.add_messages([HumanMessage("Weather in Oslo?", id="q1"), CALL, failed])
    memory.replace_message("s1", "t1", "HTTP 503 (retried)")
    assert statuses(history.messages) == {"t1": "error"}
    memory.replace_message("s1", "t1", "Sunny.", status="success")
    assert statuses(history.messages) == {"t1": "success"}
    memory.replace_message("s1", "t1", "HTTP 500", status="error")
    assert statuses(history.messages) == {"t1": "error"}
    memory.replace_message("s1", "q1", "Weather in Bergen?")  # not a tool result: no status
    assert memory.history("s1")[0].metadata == {}


def test_another_message_s_status_is_ignored(memory: ContextMemory) -> None:
    """Chat exports mark every message with a status of their own: not a tool result's."""
    memory.add_messages("s1", [{"role": "user", "text": "hi", "status": "finished_successfully"}])
    assert memory.history("s1")[0].metadata == {}


@pytest.mark.parametrize(
    ("message", "needle"),
    [
        ({"role": "tool", "text": "x", "tool_call_id": "c1", "status": "failed"}, "'success' or"),
        ({"role": "tool", "text": "x", "tool_call_id": "c1", "status": 1}, "'success' or"),
    ],
)
def test_a_status_that_is_not_one_is_refused(
    memory: ContextMemory, message: dict[str, Any], needle: str
) -> None:
    with pytest.raises(StoreInputError, match=needle):
        memory.add_messages("s1", [message])
    assert memory.history("s1") == []


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    raise ToolException(f"no station in {city}")


weather.handle_tool_error = True  # the tool answers with the error, status="error"


def test_the_middleware_stores_a_failed_tool_as_failed(memory: ContextMemory) -> None:
    """The agent's own tool marks the failure; the memory keeps it (the history reads it)."""
    replies = iter(
        [
            AIMessage(
                "", id="r1", tool_calls=[{"name": "weather", "args": {"city": "Oslo"}, "id": "c9"}]
            ),
            AIMessage("The station is down.", id="r2"),
        ]
    )
    model = RecordingChatModel(messages=replies)
    middleware = CtxBudgetMiddleware(
        model="gpt-4o", budget=4000, reserve=100, memory=memory, session_id="s1"
    )
    agent = create_agent(
        model, tools=[weather], middleware=[middleware], checkpointer=InMemorySaver()
    )
    config: Any = {"configurable": {"thread_id": "t1", "user_id": "ana"}}
    out = agent.invoke({"messages": [HumanMessage("Weather in Oslo?", id="q1")]}, config)
    sent = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [m.status for m in sent] == ["error"]  # LangGraph's ToolNode marks it
    memory.flush()
    back = CtxBudgetChatMessageHistory(memory, "s1", user_id="ana").messages
    assert [m.status for m in back if isinstance(m, ToolMessage)] == ["error"]
