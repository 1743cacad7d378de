"""NaN or infinity in a tool call's arguments: refused at the LangChain doors, as by the core.

LangChain's converter writes a NaN argument as a bare ``NaN`` (``json.dumps``'s default), which
no provider's JSON parser reads; the core refuses such arguments given as a mapping. Until
2026-12-02 `budget_messages` returned them and the middleware sent ``{"x": NaN}`` to the model
and stored it (a probe, /tmp/probe_lc/bug1_nan_tool_args.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from lc_fakes import RecordingChatModel

from ctxbudget import ContextMemory
from ctxbudget.errors import InvalidItemError
from langchain_ctxbudget import CtxBudgetMiddleware, budget_messages

NOT_JSON = [float("nan"), float("inf"), -float("inf")]


@tool
def note(x: float) -> str:
    """Note a number."""
    return f"noted {x}"


@pytest.mark.parametrize("value", NOT_JSON, ids=["nan", "inf", "-inf"])
def test_budget_messages_refuses_them_naming_the_call(value: float) -> None:
    calls = [{"name": "note", "args": {"x": [1.0, value]}, "id": "c1"}]
    messages = [
        HumanMessage("Note it."),
        AIMessage("", tool_calls=calls),
        ToolMessage("noted", tool_call_id="c1"),
    ]
    with pytest.raises(InvalidItemError, match=r"message 1 \(ai\).*tool call 0 \('note'\).*NaN"):
        budget_messages(messages, max_tokens=500, model="gpt-4o")


def test_the_middleware_neither_sends_nor_stores_them(tmp_path: Path) -> None:
    memory = ContextMemory(tmp_path / "m")
    asked = AIMessage("", tool_calls=[{"name": "note", "args": {"x": float("nan")}, "id": "c1"}])
    model = RecordingChatModel(messages=iter([asked, AIMessage("ok")]))
    middleware = CtxBudgetMiddleware(model="gpt-4o", budget=2000, reserve=50, memory=memory)
    agent = create_agent(model, tools=[note], middleware=[middleware])
    with pytest.raises(InvalidItemError, match="NaN or infinity"):
        agent.invoke({"messages": [HumanMessage("Note it.")]}, {"configurable": {"thread_id": "t"}})
    memory.flush()
    assert all("NaN" not in str(r.metadata.get("_tool_calls")) for r in memory.history("t"))
    sent = [m for call in model.calls for m in call[0]]
    assert not any(getattr(m, "tool_calls", None) for m in sent)  # never sent back to a model
    memory.close()
