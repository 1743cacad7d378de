"""Provider blocks of the newest releases in a conversation: refusals, Responses function calls.

A model's refusal: the next calls are sent, the refusal counted as text.

OpenAI's Responses API returns a refusal as a ``refusal`` content part, and LangChain's standard
content blocks have a ``refusal`` block since langchain-core 1.7.5 (``output_version="v1"``
messages carry it in their content). A conversation with one in it must keep working: the
block goes back to the model as it was and counts as its refusal text; a memory stores that
text (an answer that is only a refusal is not left out as empty).

OpenAI's Responses API with ``output_version="responses/v1"`` keeps each tool call as a
``function_call`` item in the content too: it counts once, with the message's tool calls.
"""

from __future__ import annotations

from typing import Any

import langchain_core.messages as lc_messages
import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.utils import convert_to_openai_messages
from lc_fakes import RecordingChatModel

from ctxbudget import TokenCounter
from ctxbudget.memory.context import ContextMemory
from langchain_ctxbudget import (
    CallContext,
    CtxBudgetChatMessageHistory,
    CtxBudgetMiddleware,
    budget_messages,
)

COUNTER = TokenCounter.for_model("gpt-4o")
REFUSED = AIMessage(
    [
        {"type": "text", "text": "About that:"},
        {"type": "refusal", "refusal": "I can't help with picking that lock."},
    ],
    id="refused",
)


def sent_tokens(messages: list[BaseMessage]) -> int:
    """What the messages cost as sent, a refusal part counted as its text."""
    oai = [dict(m) for m in convert_to_openai_messages(messages, text_format="block")]
    for message in oai:
        content = message.get("content")
        if isinstance(content, list):
            message["content"] = [_as_text(part) for part in content]
    return COUNTER.count_messages(oai)


def _as_text(part: dict[str, Any]) -> dict[str, Any]:
    if part["type"] == "refusal":
        return {"type": "text", "text": part["refusal"]}
    return part


def test_the_call_after_a_refusal_is_sent_with_it() -> None:
    contexts: list[CallContext] = []
    model = RecordingChatModel(messages=iter([REFUSED, AIMessage("Call a locksmith.")]))
    middleware = CtxBudgetMiddleware(
        model="gpt-4o", budget=2000, reserve=100, on_context=contexts.append
    )
    agent = create_agent(model, middleware=[middleware])
    state = agent.invoke({"messages": [HumanMessage("How do I pick this lock?")]})
    state = agent.invoke({"messages": [*state["messages"], HumanMessage("I'm locked out.")]})
    assert state["messages"][-1].content == "Call a locksmith."
    sent, _ = model.calls[1]
    assert [m.type for m in sent] == ["human", "ai", "human"]
    assert sent[1].content == REFUSED.content  # as received
    assert contexts[1].context.tokens_used == sent_tokens(sent)
    without = REFUSED.model_copy(update={"content": [REFUSED.content[0]]})
    assert contexts[1].context.tokens_used > sent_tokens([sent[0], without, sent[2]])


def test_budget_messages_keeps_a_refusal() -> None:
    history = [HumanMessage("How do I pick this lock?"), REFUSED, HumanMessage("I'm locked out.")]
    contexts: list[CallContext] = []
    kept = budget_messages(history, max_tokens=1000, on_context=contexts.append)
    assert kept == history and kept[1] is history[1]
    assert contexts[0].context.tokens_used == sent_tokens(kept)


def test_a_standard_v1_refusal_block_is_kept() -> None:
    if not hasattr(lc_messages, "RefusalContentBlock"):
        pytest.skip("standard refusal blocks are new in langchain-core 1.7.5")
    given = AIMessage(
        "", additional_kwargs={"refusal": "No."}, response_metadata={"model_provider": "openai"}
    )
    blocks = given.content_blocks  # what a model with output_version="v1" puts in content
    assert [b["type"] for b in blocks] == ["refusal"]
    v1 = AIMessage(content=blocks, response_metadata={"output_version": "v1"})  # type: ignore[arg-type]
    history = [HumanMessage("Pick the lock."), v1, HumanMessage("Please?")]
    kept = budget_messages(history, max_tokens=1000)
    assert kept == history


def test_the_chat_history_stores_a_refusal_as_its_text(memory: ContextMemory) -> None:
    history = CtxBudgetChatMessageHistory(memory, "s1")
    only = AIMessage([{"type": "refusal", "refusal": "I can't help with that."}], id="only")
    history.add_messages([HumanMessage("Pick the lock.", id="q1"), only, REFUSED])
    back = history.messages
    assert [(m.type, m.content) for m in back] == [
        ("human", "Pick the lock."),
        ("ai", "I can't help with that."),
        ("ai", "About that:\nI can't help with picking that lock."),
    ]


def test_a_responses_function_call_item_counts_with_the_tool_calls() -> None:
    call = {"type": "tool_call", "id": "call_1", "name": "lookup", "args": {"q": "x"}}
    item = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "lookup",
        "arguments": '{"q": "x"}',
    }
    asked = AIMessage([{"type": "text", "text": "Looking."}, item], tool_calls=[call])
    history = [
        HumanMessage("Look x up."),
        asked,
        ToolMessage("x is 42", tool_call_id="call_1"),
        HumanMessage("Thanks. And y?"),
    ]
    contexts: list[CallContext] = []
    kept = budget_messages(history, max_tokens=1000, on_context=contexts.append)
    assert kept == history and kept[1] is asked
    plain = asked.model_copy(update={"content": "Looking."})
    assert contexts[0].context.tokens_used == sent_tokens([history[0], plain, *history[2:]])
