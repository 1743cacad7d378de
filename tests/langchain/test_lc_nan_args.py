"""NaN or infinity in a tool call's arguments: refused at the LangChain doors, as by the core.

LangChain's converter writes a NaN argument as a bare ``NaN`` (``json.dumps``'s default), which
no provider's JSON parser reads; the core refuses such arguments given as a mapping. Until
2026-12-02 `budget_messages` returned them and the middleware sent ``{"x": NaN}`` to the model
and stored it (a probe, /tmp/probe_lc/bug1_nan_tool_args.py).

Argument text holding a bare ``NaN`` (stored so before 2026-12-01, or given as text by a model
or another writer) is not JSON to the core (`parse_arguments`), so such a record reads back as
an invalid call with its text, which these doors accept as the core does; until 2026-12-02 it
read back as ``{"x": nan}`` and the history was refused here.
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
from langchain_ctxbudget.chat_history import CtxBudgetChatMessageHistory

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


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_a_stored_call_whose_text_holds_them_reads_back_as_an_invalid_call(
    tmp_path: Path, token: str
) -> None:
    memory = ContextMemory(tmp_path / "m", write_behind=False)
    text = f'{{"x": {token}}}'
    call = {"id": "c1", "type": "function", "function": {"name": "note", "arguments": text}}
    memory.add_messages(
        "t",
        [
            {"role": "user", "text": "Note it."},
            {"role": "assistant", "text": "", "tool_calls": [call]},
            {"role": "tool", "text": "noted", "tool_call_id": "c1"},
        ],
    )
    messages = CtxBudgetChatMessageHistory(memory, "t").messages
    asked = messages[1]
    assert isinstance(asked, AIMessage) and asked.tool_calls == []
    assert [(c["id"], c["args"]) for c in asked.invalid_tool_calls] == [("c1", text)]
    kept = budget_messages([*messages, HumanMessage("And?")], max_tokens=500, model="gpt-4o")
    assert kept[1] is asked and isinstance(kept[2], ToolMessage)  # the step, whole
    model = RecordingChatModel(messages=iter([AIMessage("ok")]))
    middleware = CtxBudgetMiddleware(model="gpt-4o", budget=2000, reserve=50)
    agent = create_agent(model, tools=[note], middleware=[middleware])
    agent.invoke({"messages": [*messages, HumanMessage("And?")]})
    sent = [m for call in model.calls for m in call[0]]
    assert [c["args"] for m in sent for c in getattr(m, "invalid_tool_calls", [])] == [text]
    memory.close()
