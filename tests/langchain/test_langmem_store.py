"""LangMem's memory tools over `CtxBudgetStore` in a real ``create_agent`` agent.

The agent saves a memory with LangMem's ``manage_memory`` tool in one thread; the memory is
closed and opened again on the same folder (and, in the offline test, the process ends and a new
one starts); in another thread the agent finds it with ``search_memory``, and the middleware's
``values=`` brings it into the model's prompt within the budget. The chat model is LangChain's
fake (it calls the tools it is told to); the store, Chroma and the embedder are real.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langmem import create_manage_memory_tool, create_search_memory_tool
from lc_fakes import RecordingChatModel

from ctxbudget.core.items import Tier
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.memory.context import ContextMemory
from langchain_ctxbudget import CallContext, CtxBudgetMiddleware
from langchain_ctxbudget.store import CtxBudgetStore

NAMESPACE = ("memories", "{langgraph_user_id}")
FACT = "Ana is allergic to peanuts and prefers window seats."


def call(name: str, n: int, **args: Any) -> AIMessage:
    return AIMessage(
        "", tool_calls=[{"name": name, "args": args, "id": f"c{n}", "type": "tool_call"}]
    )


def agent_for(memory: ContextMemory, answers: list[AIMessage], **options: Any) -> Any:
    model = RecordingChatModel(messages=iter(answers))
    tools = [
        create_manage_memory_tool(namespace=NAMESPACE),
        create_search_memory_tool(namespace=NAMESPACE),
    ]
    middleware = CtxBudgetMiddleware(model="gpt-4o", memory=memory, **options)
    store = CtxBudgetStore(memory, user_at=1)
    agent = create_agent(
        model, tools=tools, middleware=[middleware], store=store, checkpointer=InMemorySaver()
    )
    return agent, model, middleware


def config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "langgraph_user_id": "ana"}}


def test_langmem_saves_in_one_thread_and_finds_it_in_another_after_a_restart(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    memory = ContextMemory(path=tmp_path / "mem", embedder=embedder)
    saving = [call("manage_memory", 1, content=FACT, action="create"), AIMessage("Saved.")]
    agent, _, _ = agent_for(memory, saving)
    state = agent.invoke(
        {"messages": [HumanMessage("Remember: no peanuts, window seat.")]}, config("t1")
    )
    created = state["messages"][2]
    assert isinstance(created, ToolMessage) and created.text.startswith("created memory ")
    memory.close()

    memory = ContextMemory(path=tmp_path / "mem", embedder=embedder)  # the restart
    finding = [call("search_memory", 2, query="food allergies"), AIMessage("No peanuts for you.")]
    calls: list[CallContext] = []
    agent, model, _ = agent_for(
        memory, finding, budget=1200, reserve=200, values=NAMESPACE, on_context=calls.append
    )
    state = agent.invoke({"messages": [HumanMessage("Can I eat the satay?")]}, config("t2"))
    found = json.loads(state["messages"][2].text)
    assert [m["value"] for m in found] == [{"content": FACT}]
    assert found[0]["namespace"] == ["memories", "ana"] and found[0]["score"] > 0
    # Before the search tool ran, the middleware had already offered the memory to the model.
    first_system = model.calls[0][0][0]
    assert FACT in first_system.text
    context = calls[0].context
    assert context.tokens_used <= context.budget.available
    assert [it.tier for it in context.included if FACT in it.text] == [Tier.SAVED]
    # Its thread's conversation is not the other thread's: only the store carried the fact.
    assert all("window seat" not in m.text for m in model.calls[0][0][1:])
    # The memory belongs to its user: another user's run neither finds nor is offered it.
    other = [call("search_memory", 3, query="food allergies"), AIMessage("Nothing saved.")]
    agent, model, _ = agent_for(memory, other, values=NAMESPACE)
    bo = {"configurable": {"thread_id": "t3", "langgraph_user_id": "bo"}}
    state = agent.invoke({"messages": [HumanMessage("Can I eat the satay?")]}, bo)
    assert json.loads(state["messages"][2].text) == []
    assert all(FACT not in sent[0].text for sent, _ in model.calls)
    memory.close()


CHILD = r"""
import json, socket, sys

def refuse(*args, **kwargs):
    raise OSError("network disabled by the test")

socket.socket.connect = refuse
socket.socket.connect_ex = refuse
socket.create_connection = refuse
socket.getaddrinfo = refuse
sys.path.insert(0, sys.argv[3])

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langmem import create_manage_memory_tool, create_search_memory_tool
from lc_fakes import RecordingChatModel

from ctxbudget.memory.context import ContextMemory
from langchain_ctxbudget import CtxBudgetMiddleware
from langchain_ctxbudget.store import CtxBudgetStore

folder, step = sys.argv[1], sys.argv[2]
namespace = ("memories", "{langgraph_user_id}")
if step == "save":
    call = {"name": "manage_memory", "args": {"content": "Ana takes the 9:05 train."}, "id": "c1"}
else:
    call = {"name": "search_memory", "args": {"query": "which train"}, "id": "c1"}
model = RecordingChatModel(messages=iter([AIMessage("", tool_calls=[call]), AIMessage("ok")]))
with ContextMemory(path=folder) as memory:
    agent = create_agent(
        model,
        tools=[create_manage_memory_tool(namespace=namespace),
               create_search_memory_tool(namespace=namespace)],
        middleware=[CtxBudgetMiddleware(model="gpt-4o", memory=memory, values=namespace)],
        store=CtxBudgetStore(memory, user_at=1),
    )
    state = agent.invoke(
        {"messages": [HumanMessage("Which train do I take?")]},
        {"configurable": {"thread_id": step, "langgraph_user_id": "ana"}},
    )
print(json.dumps({"tool": state["messages"][2].text, "system": model.calls[0][0][0].text}))
"""


@pytest.mark.slow
def test_langmem_runs_offline_and_finds_the_memory_in_a_new_process(tmp_path: Path) -> None:
    # Every socket connection is refused in the children: LangMem's tools, the store and the
    # embedder need no network (no provider client is made, no model is downloaded).
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False", "HF_HUB_OFFLINE": "1"}
    env.pop("OPENAI_API_KEY", None)
    env.pop("ANTHROPIC_API_KEY", None)
    tests = str(Path(__file__).resolve().parents[1])
    printed = []
    for step in ("save", "search"):
        done = subprocess.run(
            [sys.executable, "-c", CHILD, str(tmp_path / "mem"), step, tests],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        printed.append(json.loads(done.stdout.strip().splitlines()[-1]))
    assert printed[0]["tool"].startswith("created memory ")
    assert "9:05" not in printed[0]["system"]  # nothing saved yet
    found = json.loads(printed[1]["tool"])
    assert [m["value"] for m in found] == [{"content": "Ana takes the 9:05 train."}]
    assert "Ana takes the 9:05 train." in printed[1]["system"]  # offered by values=
