"""OpenAI Responses API items in a conversation: built-in tools, MCP, compaction; citations.

With the Responses API (``ChatOpenAI(use_responses_api=True)``, ``output_version="responses/v1"``)
langchain-openai keeps the items of the built-in tools the model ran in the AIMessage's content
as the API returned them (``_construct_lc_result_from_responses_api``): ``web_search_call``,
``file_search_call``, ``code_interpreter_call``, ``image_generation_call`` (the image's base64 in
``result``), ``computer_call``, ``mcp_list_tools``, ``mcp_call``, ``mcp_approval_request``,
``tool_search_call``/``tool_search_output``, ``apply_patch_call``/``apply_patch_call_output``,
``compaction``; and sends them back as input items (``_construct_responses_api_input``). The
user answers an MCP approval request with an ``mcp_approval_response`` block in a user message.

Until 2026-11-30 ctxbudget refused them (``InvalidItemError``: "cannot count"), so an agent's
next call after OpenAI's web search failed. Now each is sent back exactly as it was and counts as
its compact JSON text (`langchain_ctxbudget.blocks.RESPONSES_ITEMS`, the rule of Anthropic's
server tool blocks); a ``computer_call``'s screenshot (a ToolMessage) goes with its call. The
citations of a text block (Anthropic ``citations``, OpenAI ``annotations``), which
langchain-anthropic and langchain-openai send back with the text, count as their JSON text too.
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_anthropic.chat_models import _format_messages
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.utils import convert_to_openai_messages
from langchain_openai.chat_models.base import (
    _construct_lc_result_from_responses_api,
    _construct_responses_api_input,
)
from lc_fakes import RecordingChatModel
from openai.types.responses import Response

from ctxbudget import TokenCounter
from ctxbudget.core.ids import is_internal
from ctxbudget.errors import InvalidItemError
from langchain_ctxbudget import CallContext, CtxBudgetMiddleware, budget_messages
from langchain_ctxbudget.blocks import RESPONSES_ITEMS, SERVER_TOOL_BLOCKS, VERBATIM_BLOCKS

GPT = TokenCounter.for_model("gpt-4o")
URL = "https://en.wikipedia.org/wiki/Claude_Shannon"
# One of each output item as the API returns it (openai.types.responses), by type.
OUTPUT = {
    "web_search_call": {
        "type": "web_search_call",
        "id": "ws_68c2",
        "status": "completed",
        "action": {
            "type": "search",
            "query": "claude shannon",
            "sources": [{"type": "url", "url": URL}],
        },
    },
    "file_search_call": {
        "type": "file_search_call",
        "id": "fs_68c2",
        "status": "completed",
        "queries": ["entropy"],
        "results": [
            {"file_id": "file-1", "filename": "notes.pdf", "score": 0.9, "text": "Entropy is…"}
        ],
    },
    "code_interpreter_call": {
        "type": "code_interpreter_call",
        "id": "ci_68c2",
        "status": "completed",
        "code": "print(2**10)",
        "container_id": "cntr_1",
        "outputs": [{"type": "logs", "logs": "1024\n"}],
    },
    "image_generation_call": {
        "type": "image_generation_call",
        "id": "ig_68c2",
        "status": "completed",
        "result": base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8).decode(),
        "output_format": "png",
        "revised_prompt": "A portrait of Claude Shannon juggling",
        "size": "1024x1024",
    },
    "mcp_list_tools": {
        "type": "mcp_list_tools",
        "id": "mcpl_68c2",
        "server_label": "deepwiki",
        "tools": [{"name": "ask_question", "input_schema": {"type": "object"}}],
    },
    "mcp_call": {
        "type": "mcp_call",
        "id": "mcp_68c2",
        "server_label": "deepwiki",
        "name": "ask_question",
        "arguments": '{"question":"What is information theory?"}',
        "output": "The mathematical study of communication.",
        "status": "completed",
    },
    "mcp_approval_request": {
        "type": "mcp_approval_request",
        "id": "mcpr_68c2",
        "server_label": "deepwiki",
        "name": "ask_question",
        "arguments": '{"question":"Who founded it?"}',
    },
    "compaction": {"type": "compaction", "id": "cmp_68c2", "encrypted_content": "gAAAAABo" * 20},
    "tool_search_call": {
        "type": "tool_search_call",
        "id": "ts_68c2",
        "execution": "server",
        "status": "completed",
        "arguments": {"query": "weather"},
    },
    "tool_search_output": {
        "type": "tool_search_output",
        "id": "ts_68c2",
        "execution": "server",
        "status": "completed",
        "tools": [],
    },
    "apply_patch_call": {
        "type": "apply_patch_call",
        "id": "apc_68c2",
        "call_id": "call_patch",
        "status": "completed",
        "operation": {"type": "create_file", "path": "a.txt", "diff": "+hello\n"},
    },
    "apply_patch_call_output": {
        "type": "apply_patch_call_output",
        "id": "apco_68c2",
        "call_id": "call_patch",
        "status": "completed",
        "output": "Done",
    },
    "computer_call": {
        "type": "computer_call",
        "id": "cu_68c2",
        "call_id": "call_screen",
        "status": "completed",
        "action": {"type": "screenshot"},
        "pending_safety_checks": [],
    },
}
ANSWER = {
    "type": "message",
    "id": "msg_68c2",
    "role": "assistant",
    "status": "completed",
    "content": [
        {
            "type": "output_text",
            "text": "Claude Shannon was born on April 30, 1916.",
            "annotations": [
                {
                    "type": "url_citation",
                    "url": URL,
                    "title": "Claude Shannon",
                    "start_index": 0,
                    "end_index": 14,
                }
            ],
        }
    ],
}
APPROVAL = {
    "type": "mcp_approval_response",
    "approval_request_id": "mcpr_68c2",
    "approve": True,
}


def answered(*items: dict[str, Any]) -> AIMessage:
    """The AIMessage langchain-openai makes of a response with these output items."""
    response = Response.model_validate(
        {
            "id": "resp_68c2",
            "created_at": 1757000000.0,
            "model": "gpt-4o",
            "object": "response",
            "output": list(items),
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "status": "completed",
        }
    )
    result = _construct_lc_result_from_responses_api(response, output_version="responses/v1")
    message = result.generations[0].message
    assert isinstance(message, AIMessage)
    return message


def sent_tokens(messages: list[BaseMessage], counter: TokenCounter = GPT) -> int:
    """What the messages cost as sent: each item as its compact JSON, citations too."""
    oai = [dict(m) for m in convert_to_openai_messages(messages, text_format="block")]
    for message, original in zip(oai, messages, strict=True):
        content = message.get("content")
        if isinstance(content, list):
            message["content"] = [_as_text(part) for part in content]
            message["content"] += [
                {"type": "text", "text": _json(block[name])}
                for block in original.content
                if isinstance(block, dict) and block.get("type") == "text"
                for name in ("citations", "annotations")
                if block.get(name)
            ]
    return counter.count_messages(oai)


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _as_text(part: dict[str, Any]) -> dict[str, Any]:
    if part["type"] in VERBATIM_BLOCKS:
        return {"type": "text", "text": _json(part)}
    return part


def test_the_list_is_every_item_langchain_openai_keeps_and_sends_back() -> None:
    assert RESPONSES_ITEMS == {*OUTPUT, "mcp_approval_response"}
    assert VERBATIM_BLOCKS == SERVER_TOOL_BLOCKS | RESPONSES_ITEMS
    message = answered(*OUTPUT.values(), ANSWER)
    assert [b["type"] for b in message.content] == [*OUTPUT, "text"]  # kept, in order
    sent = _construct_responses_api_input([HumanMessage("Q?"), message], store=False)
    assert [i["type"] for i in sent] == ["message", *OUTPUT, "message"]  # sent back


def test_the_call_after_openai_builtin_tools_is_sent_with_its_items() -> None:
    searched = answered(*(OUTPUT[t] for t in OUTPUT if t != "computer_call"), ANSWER)
    contexts: list[CallContext] = []
    model = RecordingChatModel(messages=iter([searched, AIMessage("Approved; he was 84.")]))
    middleware = CtxBudgetMiddleware(
        model="gpt-4o", budget=8000, reserve=500, on_context=contexts.append
    )
    agent = create_agent(model, middleware=[middleware])
    state = agent.invoke({"messages": [HumanMessage("When was Claude Shannon born?")]})
    assert state["messages"][-1].content == searched.content
    approve = HumanMessage([APPROVAL, {"type": "text", "text": "Yes, ask it."}])
    state = agent.invoke({"messages": [*state["messages"], approve]})
    assert state["messages"][-1].content == "Approved; he was 84."
    sent, _ = model.calls[1]
    assert [m.type for m in sent] == ["human", "ai", "human"]
    assert sent == state["messages"][:3]  # the state's messages themselves
    assert sent[1].content == searched.content  # verbatim: every item, the image's base64
    assert sent[2].content == approve.content
    report = contexts[1].context
    assert [m.id for m in sent] == [it.id for it in report.included if not is_internal(it.id)]
    assert report.pruned == []
    assert report.tokens_used == sent_tokens(sent)
    items = [b for m in sent if isinstance(m.content, list) for b in m.content]
    assert report.tokens_used >= sum(GPT.count(_json(b)) for b in items if b["type"] != "text")
    # langchain-openai builds the next request of them (offline): each item goes back.
    for store in (None, False):
        request = _construct_responses_api_input(sent, store=store)
        assert {b["type"] for b in items} - {"text"} <= {i["type"] for i in request}


@pytest.mark.parametrize("kind", sorted(OUTPUT))
def test_each_item_is_kept_and_counts_as_its_json(kind: str) -> None:
    given = answered(OUTPUT[kind], ANSWER)
    history: list[BaseMessage] = [HumanMessage("Q?"), given]
    if kind == "computer_call":  # answered by a screenshot, as langchain-openai documents
        shot = "data:image/png;base64," + OUTPUT["image_generation_call"]["result"]
        history.append(
            ToolMessage(
                [{"type": "input_image", "image_url": shot}],
                tool_call_id="call_screen",
                additional_kwargs={"type": "computer_call_output"},
            )
        )
    history.append(HumanMessage("Thanks."))
    contexts: list[CallContext] = []
    kept = budget_messages(history, max_tokens=4000, on_context=contexts.append)
    assert kept == history and kept[1] is given
    assert contexts[0].context.pruned == []
    assert contexts[0].context.tokens_used == sent_tokens(history)
    without = given.model_copy(update={"content": given.content[1:]})
    alone = sent_tokens([history[0], without, *history[2:]])
    assert contexts[0].context.tokens_used >= alone + GPT.count(_json(given.content[0]))
    _construct_responses_api_input(kept, store=False)  # langchain-openai takes them back


def test_a_computer_call_goes_with_its_screenshot_or_not_at_all() -> None:
    call = answered(OUTPUT["computer_call"])
    shot = ToolMessage(
        "screenshot", tool_call_id="call_screen", additional_kwargs={"type": "computer_call_output"}
    )
    history = [HumanMessage("Open it."), call, shot, HumanMessage("And now?")]
    assert budget_messages(history, max_tokens=4000) == history
    unanswered = [HumanMessage("Open it."), call, HumanMessage("Never mind.")]
    assert budget_messages(unanswered, max_tokens=4000) == [unanswered[0], unanswered[2]]


def test_the_standard_v1_form_is_kept_and_counted() -> None:
    given = answered(*OUTPUT.values(), ANSWER)
    v1 = AIMessage(content=given.content_blocks, response_metadata={"output_version": "v1"})  # type: ignore[arg-type]
    assert {"server_tool_call", "server_tool_result", "non_standard", "image"} <= {
        b["type"] for b in v1.content
    }
    shot = ToolMessage("screenshot", tool_call_id="call_screen")
    history = [HumanMessage("Q?"), v1, shot, HumanMessage("Thanks.")]
    contexts: list[CallContext] = []
    kept = budget_messages(history, max_tokens=8000, on_context=contexts.append)
    assert kept == history and kept[1] is v1
    assert contexts[0].context.pruned == []
    request = _construct_responses_api_input(kept, store=False)
    assert {"web_search_call", "mcp_call", "computer_call", "compaction"} <= {
        i["type"] for i in request
    }


def test_a_multi_megabyte_image_counts_as_its_json_quickly() -> None:
    result = base64.b64encode(bytes(range(256)) * 12_000).decode()  # about 4 MB
    image = dict(OUTPUT["image_generation_call"], result=result)
    history = [HumanMessage("Draw it."), answered(image), HumanMessage("Nice.")]
    contexts: list[CallContext] = []
    started = time.perf_counter()
    kept = budget_messages(history, max_tokens=5_000_000, on_context=contexts.append)
    assert time.perf_counter() - started < 30  # linear in its size (about 1 s here), cached
    assert kept == history
    assert contexts[0].context.tokens_used >= GPT.count(_json(image)) > 500_000


def test_citations_count_as_their_json() -> None:
    citation = {
        "type": "web_search_result_location",
        "cited_text": "Claude Elwood Shannon (April 30, 1916 – February 24, 2001)",
        "url": URL,
        "title": "Claude Shannon - Wikipedia",
        "encrypted_index": "Eo8BCioIAhgBIiQyYjQ0OWJmZi1lNm" * 4,
    }
    cited = AIMessage(
        [{"type": "text", "text": "He was born in 1916.", "citations": [citation]}],
        response_metadata={"model_provider": "anthropic"},
    )
    # langchain-anthropic sends the citations back with the text.
    _, formatted = _format_messages([HumanMessage("When?"), cited], model="claude-sonnet-4-5")
    assert formatted[1]["content"][0]["citations"] == [citation]
    openai = answered(ANSWER)
    request = _construct_responses_api_input([HumanMessage("When?"), openai])
    assert request[1]["content"][0]["annotations"] == ANSWER["content"][0]["annotations"]
    for message in (cited, openai):
        history = [HumanMessage("When?"), message, HumanMessage("Thanks.")]
        contexts: list[CallContext] = []
        assert budget_messages(history, max_tokens=4000, on_context=contexts.append) == history
        text_only = message.model_copy(update={"content": message.text})
        cites = [
            v for b in message.content for k, v in b.items() if k in ("citations", "annotations")
        ]
        assert contexts[0].context.tokens_used == sent_tokens(history)
        assert contexts[0].context.tokens_used >= sent_tokens(
            [history[0], text_only, history[2]]
        ) + GPT.count(_json(cites[0]))


def test_a_custom_tool_call_item_counts_with_the_tool_calls() -> None:
    item = {
        "type": "custom_tool_call",
        "id": "ctc_68c2",
        "call_id": "call_custom",
        "name": "shell",
        "input": "ls -la",
    }
    asked = answered(item)
    assert asked.tool_calls[0]["id"] == "call_custom"
    history = [HumanMessage("List."), asked, ToolMessage("a.txt", tool_call_id="call_custom")]
    assert budget_messages([*history, HumanMessage("Ok.")], max_tokens=4000)[1] is asked


JSON_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=24)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | JSON_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(JSON_TEXT, inner, max_size=4),
    max_leaves=24,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(sorted(RESPONSES_ITEMS)),
    payload=st.dictionaries(JSON_TEXT.filter(lambda k: k != "type"), JSON_VALUES, max_size=5),
    cites=st.lists(JSON_VALUES, max_size=3),
)
def test_any_json_payload_counts_at_least_as_its_json(
    kind: str, payload: dict[str, Any], cites: list[Any]
) -> None:
    block = {"type": kind, **payload}
    text = {"type": "text", "text": "ok", "annotations": cites}
    given_message = AIMessage([block, text])
    history = [HumanMessage("Q?"), given_message, HumanMessage("Thanks.")]
    contexts: list[CallContext] = []
    kept = budget_messages(history, max_tokens=200_000, on_context=contexts.append)
    assert kept[1] is given_message
    floor = GPT.count(_json(block)) + (GPT.count(_json(cites)) if cites else 0)
    assert contexts[0].context.tokens_used >= floor
    assert contexts[0].context.tokens_used == sent_tokens(history)


@pytest.mark.parametrize(
    "block",
    [
        {"type": "local_shell_call", "id": "lsh_1", "call_id": "call_1", "action": {}},
        {"type": "made_up_call", "id": "x_1"},
        {"type": "web_search_call", "id": "ws_1", "action": {"query": b"raw bytes"}},
    ],
    ids=["not sent back by langchain-openai", "unknown type", "not JSON"],
)
def test_what_is_not_a_known_item_stays_refused(block: dict[str, Any]) -> None:
    history = [HumanMessage("Q?"), AIMessage([OUTPUT["web_search_call"], block]), HumanMessage(".")]
    with pytest.raises(InvalidItemError, match=r"message 1 \(ai\).* block 1 .*cannot count"):
        budget_messages(history, max_tokens=4000)
