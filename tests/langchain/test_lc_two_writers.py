"""Two writers on one chat history session (a user's two tabs, two workers).

The store keeps messages in the order they arrived, so the other writer's message can land
between an assistant message that calls a tool and its result. The history must still read as
a conversation providers accept, each result right after its call, so that `budget_messages`
(or the model) gets the tool step instead of dropping it as orphans.
"""

from __future__ import annotations

import asyncio
import uuid

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxbudget.memory.context import ContextMemory
from langchain_ctxbudget import CtxBudgetChatMessageHistory, budget_messages


def steps(messages: list[BaseMessage]) -> list[str]:
    out = []
    for m in messages:
        calls = [c["id"] for c in getattr(m, "tool_calls", None) or []]
        what = ",".join(str(c) for c in calls) or getattr(m, "tool_call_id", None) or m.content
        out.append(f"{m.type}:{what}")
    return out


def test_a_tool_step_split_by_another_writer_reads_whole(any_memory: ContextMemory) -> None:
    # The order is the store's: one memory object or two (tests/llamaindex/test_li_two_writers.py)
    one = two = any_memory
    session = f"h-{uuid.uuid4().hex[:8]}"
    tab_a = CtxBudgetChatMessageHistory(one, session)
    tab_b = CtxBudgetChatMessageHistory(two, session)
    call = AIMessage("", tool_calls=[{"name": "lookup", "args": {}, "id": "cA"}])
    tab_a.add_messages([HumanMessage("question A"), call])
    one.flush()
    tab_b.add_messages([HumanMessage("question B")])  # lands between the call and its result
    two.flush()
    tab_a.add_messages([ToolMessage("result A", tool_call_id="cA"), AIMessage("answer A")])
    one.flush()

    want = ["human:question A", "ai:cA", "tool:cA", "human:question B", "ai:answer A"]
    assert steps(tab_b.messages) == want
    assert steps(asyncio.run(tab_b.aget_messages())) == want
    kept = budget_messages(tab_b.messages, max_tokens=2000, model="gpt-4o")  # all of it fits
    assert steps(kept) == want
