"""Server tool blocks in a conversation: Anthropic's web search, web fetch, code execution, MCP.

A tool the provider runs itself (Anthropic's ``web_search``, ``web_fetch``, ``code_execution``,
the MCP connector) leaves its call and its result as content blocks of one assistant message:
``server_tool_use`` then ``web_search_tool_result`` (with ``encrypted_content`` the provider
needs back verbatim), no LangChain tool call and no ToolMessage. LangChain's standard content
has them as ``server_tool_call``/``server_tool_result`` (and ``non_standard`` for a block it has
no standard type for).

Until 2026-11-30 ctxbudget refused them (``InvalidItemError``: "cannot count"), so an agent's
next call after a web search failed. Now each such block is sent back exactly as it was and
counts as its compact JSON text with the model's counter; nothing treats it as a tool call.
A block type no provider documents stays refused.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.utils import convert_to_openai_messages
from lc_fakes import RecordingChatModel

from ctxbudget import TokenCounter
from ctxbudget.errors import InvalidItemError
from ctxbudget.memory.context import ContextMemory
from langchain_ctxbudget import CallContext, CtxBudgetMiddleware, budget_messages

CLAUDE = TokenCounter.for_model("claude-sonnet-4-5")
GPT = TokenCounter.for_model("gpt-4o")
SERVER = {
    "server_tool_use",
    "mcp_tool_use",
    "mcp_tool_result",
    "web_search_tool_result",
    "web_fetch_tool_result",
    "code_execution_tool_result",
    "bash_code_execution_tool_result",
    "text_editor_code_execution_tool_result",
    "tool_search_tool_result",
    "server_tool_call",
    "server_tool_result",
    "non_standard",
}

SEARCH_USE = {
    "type": "server_tool_use",
    "id": "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE",
    "name": "web_search",
    "input": {"query": "claude shannon birth date"},
}
SEARCH_RESULT = {
    "type": "web_search_tool_result",
    "tool_use_id": "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE",
    "content": [
        {
            "type": "web_search_result",
            "url": "https://en.wikipedia.org/wiki/Claude_Shannon",
            "title": "Claude Shannon - Wikipedia",
            "encrypted_content": "EqgfCioIARgBIiQ3YTAwMjY1Mi1mZjM5LTQ1NGUtODgxNC1kNjNjNTk1ZWI3Y"
            * 8,
            "page_age": "April 30, 2025",
        },
        {
            "type": "web_search_result",
            "url": "https://www.britannica.com/biography/Claude-Shannon",
            "title": "Claude Shannon | Biography, Britannica — père de l'information",
            "encrypted_content": "Ep4BCioIARgBIiQ0NGQ0NzYwZC1hMjcxLTRmYWEtYmQ4Ny0wZWZiZTM2NGE" * 6,
            "page_age": None,
        },
    ],
}
SEARCHED = AIMessage(
    [
        {"type": "text", "text": "I'll search for that."},
        SEARCH_USE,
        SEARCH_RESULT,
        {"type": "text", "text": "Claude Shannon was born on April 30, 1916."},
    ],
    id="searched",
    response_metadata={"model_provider": "anthropic"},
)
CODE_RUN = [
    {
        "type": "server_tool_use",
        "id": "srvtoolu_02",
        "name": "code_execution",
        "input": {"code": "print(sum(range(10)))"},
    },
    {
        "type": "code_execution_tool_result",
        "tool_use_id": "srvtoolu_02",
        "content": {
            "type": "code_execution_result",
            "stdout": "45\n",
            "stderr": "",
            "return_code": 0,
        },
    },
]
FETCHED = [
    {
        "type": "server_tool_use",
        "id": "srvtoolu_03",
        "name": "web_fetch",
        "input": {"url": "https://example.com/article"},
    },
    {
        "type": "web_fetch_tool_result",
        "tool_use_id": "srvtoolu_03",
        "content": {
            "type": "web_fetch_result",
            "url": "https://example.com/article",
            "content": {
                "type": "document",
                "source": {"type": "text", "media_type": "text/plain", "data": "Article."},
                "title": "An article",
            },
            "retrieved_at": "2025-08-25T10:30:00Z",
        },
    },
]
MCP = [
    {
        "type": "mcp_tool_use",
        "id": "mcptoolu_04",
        "name": "echo",
        "server_name": "example-mcp",
        "input": {"param1": "value1"},
    },
    {
        "type": "mcp_tool_result",
        "tool_use_id": "mcptoolu_04",
        "is_error": False,
        "content": [{"type": "text", "text": "value1"}],
    },
]


def sent_tokens(messages: list[BaseMessage], counter: TokenCounter) -> int:
    """What the messages cost as sent, each server tool block counted as its compact JSON."""
    oai = [dict(m) for m in convert_to_openai_messages(messages, text_format="block")]
    for message in oai:
        content = message.get("content")
        if isinstance(content, list):
            message["content"] = [_as_text(part) for part in content]
    return counter.count_messages(oai)


def _as_text(part: dict[str, Any]) -> dict[str, Any]:
    if part["type"] in SERVER:
        return {"type": "text", "text": json.dumps(part, ensure_ascii=False, separators=(",", ":"))}
    return part


def test_the_call_after_a_web_search_is_sent_with_its_blocks() -> None:
    contexts: list[CallContext] = []
    model = RecordingChatModel(messages=iter([SEARCHED, AIMessage("He was 84.")]))
    middleware = CtxBudgetMiddleware(
        model="claude-sonnet-4-5", budget=8000, reserve=500, on_context=contexts.append
    )
    agent = create_agent(model, middleware=[middleware])
    state = agent.invoke({"messages": [HumanMessage("When was Claude Shannon born?")]})
    assert state["messages"][-1].content == SEARCHED.content
    state = agent.invoke({"messages": [*state["messages"], HumanMessage("How old at death?")]})
    assert state["messages"][-1].content == "He was 84."
    sent, _ = model.calls[1]
    assert [m.type for m in sent] == ["human", "ai", "human"]
    assert sent[1].content == SEARCHED.content  # verbatim: encrypted_content and all
    assert sent[1].tool_calls == []  # a server tool is not a LangChain tool call
    report = contexts[1].context
    assert report.tokens_used == sent_tokens(sent, CLAUDE)
    assert report.pruned == []  # nothing pruned as an orphan tool call or result
    text_only = SEARCHED.model_copy(update={"content": SEARCHED.text})
    assert report.tokens_used > sent_tokens([sent[0], text_only, sent[2]], CLAUDE) + 100


def test_a_memory_stores_the_text_of_a_searched_answer(memory: ContextMemory) -> None:
    model = RecordingChatModel(messages=iter([SEARCHED, AIMessage("He was 84.")]))
    middleware = CtxBudgetMiddleware(
        model="claude-sonnet-4-5", budget=8000, reserve=500, memory=memory, session_id="s"
    )
    agent = create_agent(model, middleware=[middleware])
    state = agent.invoke({"messages": [HumanMessage("When was Claude Shannon born?")]})
    state = agent.invoke({"messages": [*state["messages"], HumanMessage("How old at death?")]})
    sent, _ = model.calls[1]
    assert sent[-2].content == SEARCHED.content
    stored = [record.text for record in memory.history("s")]
    assert SEARCHED.text in stored  # its text only: the blocks are in the agent's state


def test_budget_messages_keeps_server_tool_blocks_and_counts_them() -> None:
    history = [
        HumanMessage("When was Claude Shannon born?"),
        SEARCHED,
        HumanMessage("And sum 0..9, fetch the article, echo value1."),
        AIMessage([*CODE_RUN, *FETCHED, *MCP, {"type": "text", "text": "45; fetched; value1."}]),
        HumanMessage("Thanks."),
    ]
    for model, counter in (("claude-sonnet-4-5", CLAUDE), ("gpt-4o", GPT)):
        contexts: list[CallContext] = []
        kept = budget_messages(history, max_tokens=4000, model=model, on_context=contexts.append)
        assert kept == history
        assert all(k is h for k, h in zip(kept, history, strict=True))
        assert contexts[0].context.tokens_used == sent_tokens(history, counter)


def test_a_budget_just_below_drops_the_search_exchange_whole() -> None:
    history = [
        HumanMessage("When was Claude Shannon born?"),
        SEARCHED,
        HumanMessage("How old at death?"),
    ]
    exact = sent_tokens(history, GPT)
    assert budget_messages(history, max_tokens=exact, history_trim="message") == history
    kept = budget_messages(history, max_tokens=exact - 1, history_trim="message")
    assert kept == [history[2]]  # never the search's call without its result


def test_server_blocks_next_to_a_client_tool_call() -> None:
    call = {"type": "tool_call", "id": "toolu_1", "name": "lookup", "args": {"q": "x"}}
    asked = AIMessage(
        [
            SEARCH_USE,
            SEARCH_RESULT,
            {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": "x"}},
        ],
        tool_calls=[call],
    )
    history = [
        HumanMessage("Search, then look x up."),
        asked,
        ToolMessage("x is 42", tool_call_id="toolu_1"),
        HumanMessage("Thanks."),
    ]
    contexts: list[CallContext] = []
    kept = budget_messages(history, max_tokens=4000, on_context=contexts.append)
    assert kept == history and kept[1] is asked
    assert contexts[0].context.pruned == []
    assert contexts[0].context.tokens_used == sent_tokens(history, GPT)


def test_standard_v1_server_blocks_are_kept_and_counted() -> None:
    container = {"type": "container_upload", "file_id": "file_011CNha8iCJcU1wXNR6q4V8w"}
    given = SEARCHED.model_copy(update={"content": [*SEARCHED.content, container]})
    blocks = given.content_blocks  # what a model with output_version="v1" puts in content
    types = [b["type"] for b in blocks]
    assert {"server_tool_call", "server_tool_result", "non_standard"} <= set(types)
    v1 = AIMessage(content=blocks, response_metadata={"output_version": "v1"})  # type: ignore[arg-type]
    history = [HumanMessage("When was he born?"), v1, HumanMessage("Thanks.")]
    contexts: list[CallContext] = []
    kept = budget_messages(history, max_tokens=4000, on_context=contexts.append)
    assert kept == history and kept[1] is v1
    assert contexts[0].context.tokens_used == sent_tokens(history, GPT)


@pytest.mark.parametrize(
    "block",
    [
        {"type": "made_up_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
        {"type": "non_standard", "value": "not an object"},
        {"type": "web_search_tool_result", "tool_use_id": "x", "content": [b"raw bytes"]},
    ],
    ids=["unknown type", "non_standard without an object", "not JSON"],
)
def test_what_is_not_a_documented_server_block_stays_refused(block: dict[str, Any]) -> None:
    history = [HumanMessage("Q?"), AIMessage([SEARCH_USE, block]), HumanMessage("Thanks.")]
    with pytest.raises(InvalidItemError, match=r"message 1 \(ai\).* block 1 .*cannot count"):
        budget_messages(history, max_tokens=4000)
