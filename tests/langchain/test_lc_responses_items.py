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

Later on 2026-11-30: a generated image (an ``image_generation_call``'s base64 ``result``) counted
as JSON text (about 1.4M tokens for a 1.5 MB image, so its turn was always cut); it now counts as
an image, as the standard form of the same item does (`langchain_ctxbudget.blocks
.generated_image_parts`). And an ``mcp_approval_request`` was kept without the user's
``mcp_approval_response`` (or the answer without the request; ``apply_patch_call`` and its
``apply_patch_call_output`` alike), which the Responses API refuses; they are now kept or cut
together, as a tool call and its result (`langchain_ctxbudget.answers`).
"""

from __future__ import annotations

import base64
import json
import random
import struct
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
from ctxbudget.errors import BudgetExceededError, InvalidItemError
from langchain_ctxbudget import CallContext, CtxBudgetMiddleware, budget_messages
from langchain_ctxbudget.answers import USER_ANSWER
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
# What the user answers an item with (a user message's content, sent as input items).
ANSWERS = {
    "mcp_approval_request": APPROVAL,
    "apply_patch_call": {k: v for k, v in OUTPUT["apply_patch_call_output"].items() if k != "id"},
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
    """What the messages cost as sent: each item as its compact JSON, citations too.

    A generated image as an image (at most 1,445 tokens), the rest of its item as JSON.
    """
    oai = [dict(m) for m in convert_to_openai_messages(messages, text_format="block")]
    for message, original in zip(oai, messages, strict=True):
        content = message.get("content")
        if isinstance(content, list):
            message["content"] = [p for part in content for p in _as_sent(part)]
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


def _as_sent(part: dict[str, Any]) -> list[dict[str, Any]]:
    image = part.get("result") if part["type"] == "image_generation_call" else None
    if isinstance(image, str) and image:
        data = "data:image/png;base64," + image
        return [
            {"type": "text", "text": _json({**part, "result": ""})},
            {"type": "image_url", "image_url": {"url": data}},
        ]
    if part["type"] in VERBATIM_BLOCKS:
        return [{"type": "text", "text": _json(part)}]
    return [part]


def floor(block: dict[str, Any]) -> int:
    """The least a block counts: its JSON, a generated image's without its base64."""
    if block["type"] == "image_generation_call" and block.get("result"):
        return GPT.count(_json({**block, "result": ""}))
    return GPT.count(_json(block))


def test_the_list_is_every_item_langchain_openai_keeps_and_sends_back() -> None:
    assert RESPONSES_ITEMS == {*OUTPUT, "mcp_approval_response"}
    assert VERBATIM_BLOCKS == SERVER_TOOL_BLOCKS | RESPONSES_ITEMS
    message = answered(*OUTPUT.values(), ANSWER)
    assert [b["type"] for b in message.content] == [*OUTPUT, "text"]  # kept, in order
    sent = _construct_responses_api_input([HumanMessage("Q?"), message], store=False)
    assert [i["type"] for i in sent] == ["message", *OUTPUT, "message"]  # sent back


def agent_turns(
    replies: list[AIMessage], *turns: BaseMessage
) -> tuple[list[BaseMessage], list[BaseMessage], list[CallContext]]:
    """An agent with the middleware (8,000 tokens) answers each turn with the next reply.

    What its last call was sent, the state after it, and each call's report.
    """
    contexts: list[CallContext] = []
    model = RecordingChatModel(messages=iter(replies))
    middleware = CtxBudgetMiddleware(
        model="gpt-4o", budget=8000, reserve=500, on_context=contexts.append
    )
    agent = create_agent(model, middleware=[middleware])
    messages: list[BaseMessage] = []
    for turn in turns:
        messages = agent.invoke({"messages": [*messages, turn]})["messages"]
    return model.calls[-1][0], messages, contexts


def test_the_call_after_openai_builtin_tools_is_sent_with_its_items() -> None:
    searched = answered(*(OUTPUT[t] for t in OUTPUT if t != "computer_call"), ANSWER)
    approve = HumanMessage([APPROVAL, {"type": "text", "text": "Yes, ask it."}])
    sent, state, contexts = agent_turns(
        [searched, AIMessage("Approved; he was 84.")],
        HumanMessage("When was Claude Shannon born?"),
        approve,
    )
    assert state[1].content == searched.content
    assert state[-1].content == "Approved; he was 84."
    assert [m.type for m in sent] == ["human", "ai", "human"]
    assert sent == state[:3]  # the state's messages themselves
    assert sent[1].content == searched.content  # verbatim: every item, the image's base64
    assert sent[2].content == approve.content
    report = contexts[1].context
    assert [m.id for m in sent] == [it.id for it in report.included if not is_internal(it.id)]
    assert report.pruned == []
    assert report.tokens_used == sent_tokens(sent)
    items = [b for m in sent if isinstance(m.content, list) for b in m.content]
    assert report.tokens_used >= sum(floor(b) for b in items if b["type"] != "text")
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
    if kind in ANSWERS:  # answered by the user (an approval, the patch's outcome)
        history.append(HumanMessage([ANSWERS[kind]]))
    history.append(HumanMessage("Thanks."))
    contexts: list[CallContext] = []
    kept = budget_messages(history, max_tokens=4000, on_context=contexts.append)
    assert kept == history and kept[1] is given
    assert contexts[0].context.pruned == []
    assert contexts[0].context.tokens_used == sent_tokens(history)
    without = given.model_copy(update={"content": given.content[1:]})
    alone = sent_tokens([history[0], without, *history[2:]])
    assert contexts[0].context.tokens_used >= alone + floor(given.content[0])
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
    approve = HumanMessage([{"type": "non_standard", "value": APPROVAL}])
    history = [HumanMessage("Q?"), v1, shot, approve, HumanMessage("Thanks.")]
    contexts: list[CallContext] = []
    kept = budget_messages(history, max_tokens=8000, on_context=contexts.append)
    assert kept == history and kept[1] is v1
    assert contexts[0].context.pruned == []
    request = _construct_responses_api_input(kept, store=False)
    assert {"web_search_call", "mcp_call", "computer_call", "compaction"} <= {
        i["type"] for i in request
    }


def png(width: int, height: int, size: int) -> str:
    """A PNG file of ``width`` x ``height`` pixels in base64: its header, then ``size`` bytes."""
    header = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR"
    header += struct.pack(">II", width, height) + b"\x08\x06\x00\x00\x00"
    return base64.b64encode(header + random.Random(size).randbytes(size)).decode()


def test_a_generated_image_counts_as_an_image_and_its_turn_is_kept() -> None:
    # A 1.5 MB image (base64): as JSON text about 1.4M tokens, so its turn was always cut.
    image = dict(OUTPUT["image_generation_call"], result=png(1024, 1024, 1_100_000))
    assert len(image["result"]) > 1_450_000
    drawn = answered(image, ANSWER)
    sent, state, contexts = agent_turns(
        [drawn, AIMessage("In 1916.")],
        HumanMessage("Draw Claude Shannon."),
        HumanMessage("When was he born?"),
    )
    assert sent == state[:3] and sent[1].content == drawn.content  # kept, verbatim
    report = contexts[1].context
    assert report.pruned == []
    assert [m.id for m in sent] == [it.id for it in report.included if not is_internal(it.id)]
    assert report.tokens_used == sent_tokens(sent) < 2000
    # The item as JSON without its base64, and the image by OpenAI's rule (765 at 1024 x 1024).
    rest = GPT.count(_json({**image, "result": ""}))
    without = sent[1].model_copy(update={"content": sent[1].content[1:]})
    assert report.tokens_used == sent_tokens([sent[0], without, sent[2]]) + rest + 765
    # Never less than what langchain-openai sends: the id alone, unless store=False.
    request = _construct_responses_api_input(sent)
    assert {"type": "image_generation_call", "id": "ig_68c2"} in request
    assert GPT.count(_json({"type": "image_generation_call", "id": "ig_68c2"})) <= rest
    assert image in _construct_responses_api_input(sent, store=False)


def test_a_generated_image_counts_as_its_standard_form_does_quickly() -> None:
    for result, tokens in [
        (png(1536, 1024, 3_000_000), 1105),  # 4 MB of base64: 2 x 3 tiles
        (base64.b64encode(bytes(range(256)) * 12_000).decode(), 1445),  # size unknown: the most
    ]:
        image = dict(OUTPUT["image_generation_call"], result=result)
        given = answered(image)
        v1 = AIMessage(content=given.content_blocks, response_metadata={"output_version": "v1"})  # type: ignore[arg-type]
        assert [b["type"] for b in v1.content] == ["image"]
        used: list[int] = []
        for message in (given, v1):
            history = [HumanMessage("Draw it."), message, HumanMessage("Nice.")]
            contexts: list[CallContext] = []
            started = time.perf_counter()
            kept = budget_messages(history, max_tokens=4000, on_context=contexts.append)
            assert time.perf_counter() - started < 30  # linear in its size, cached
            assert kept == history
            used.append(contexts[0].context.tokens_used)
        rest = GPT.count(_json({**image, "result": ""}))
        assert used[0] == used[1] + rest  # the same image cost, and the item's other fields
        empty = sent_tokens([HumanMessage("Draw it."), AIMessage([]), HumanMessage("Nice.")])
        assert used[1] == empty + tokens


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


def request(n: int) -> AIMessage:
    """The model asks to run an MCP tool (a Responses ``mcp_approval_request``)."""
    return answered(dict(OUTPUT["mcp_approval_request"], id=f"mcpr_{n}"))


def approval(n: int) -> HumanMessage:
    """The user approves request ``n`` (an ``mcp_approval_response``), and says so."""
    answer = dict(APPROVAL, approval_request_id=f"mcpr_{n}")
    return HumanMessage([answer, {"type": "text", "text": "Yes, go on."}])


def patch(n: int) -> AIMessage:
    """The model asks the client to apply a patch (an ``apply_patch_call``)."""
    return answered(dict(OUTPUT["apply_patch_call"], id=f"apc_{n}", call_id=f"call_patch_{n}"))


def patched(n: int) -> HumanMessage:
    """The client tells how applying patch ``n`` went (an ``apply_patch_call_output``)."""
    return HumanMessage([dict(ANSWERS["apply_patch_call"], call_id=f"call_patch_{n}")])


PAIRS = {"mcp approval": (request, approval), "apply patch": (patch, patched)}
FILLER = "lorem ipsum " * 300  # about 600 tokens


def half_pairs(messages: list[BaseMessage]) -> list[tuple[str, str]]:
    """One side of a pair without the other (or after it) in the request langchain-openai builds.

    Offline, both ways it builds one (``store`` left unset, ``store=False``).
    """
    found: list[tuple[str, str]] = []
    for store in (None, False):
        asked: dict[tuple[str, str], int] = {}
        told: dict[tuple[str, str], int] = {}
        for at, item in enumerate(_construct_responses_api_input(messages, store=store)):
            kind = item.get("type")
            if kind == "mcp_approval_request":
                asked["mcp", item["id"]] = at
            elif kind == "mcp_approval_response":
                told["mcp", item["approval_request_id"]] = at
            elif kind in ("apply_patch_call", "computer_call"):
                asked[kind, item["call_id"]] = at
            elif kind in ("apply_patch_call_output", "computer_call_output"):
                told[kind.removesuffix("_output"), item["call_id"]] = at
        found += sorted(k for k in asked.keys() ^ told.keys())
        found += sorted(k for k in asked.keys() & told.keys() if told[k] < asked[k])
    return found


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_an_answered_item_goes_with_its_answer_or_not_at_all(pair: str) -> None:
    ask, answer = PAIRS[pair]
    history = [
        HumanMessage("Go ahead. " + FILLER),
        ask(1),
        answer(1),
        AIMessage("Done."),
        HumanMessage("And then?"),
    ]
    assert half_pairs(history) == []
    assert budget_messages(history, max_tokens=2000) == history
    # The answer's turn fits, the request's does not: both go (the answer went alone before).
    kept = budget_messages(history, max_tokens=300)
    assert kept == [history[-1]]
    assert half_pairs(kept) == []
    for budget in range(60, 800, 20):
        assert half_pairs(budget_messages(history, max_tokens=budget)) == []
    # The agent's middleware: the same.
    contexts: list[CallContext] = []
    model = RecordingChatModel(messages=iter([AIMessage("Then nothing.")]))
    middleware = CtxBudgetMiddleware(
        model="gpt-4o", budget=400, reserve=100, on_context=contexts.append
    )
    create_agent(model, middleware=[middleware]).invoke({"messages": history})
    sent, _ = model.calls[0]
    assert sent == [history[-1]] and half_pairs(sent) == []
    assert contexts[0].context.tokens_used == sent_tokens(sent)


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_a_question_that_answers_an_item_is_sent_with_it(pair: str) -> None:
    ask, answer = PAIRS[pair]
    history = [HumanMessage("Go ahead. " + FILLER), ask(1), answer(1)]
    contexts: list[CallContext] = []
    assert budget_messages(history, max_tokens=2000, on_context=contexts.append) == history
    assert contexts[0].context.tokens_used == sent_tokens(history)
    # Never the answer alone (the API refuses it): the budget says what it needs instead.
    with pytest.raises(BudgetExceededError, match="never pruned need"):
        budget_messages(history, max_tokens=300)


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_an_item_never_answered_is_not_sent(pair: str) -> None:
    ask, _ = PAIRS[pair]
    history = [HumanMessage("Go ahead."), ask(1), HumanMessage("Never mind. What time is it?")]
    assert half_pairs(history) != []
    assert budget_messages(history, max_tokens=4000) == [history[0], history[2]]


def test_one_message_answers_all_the_items_of_one_turn() -> None:
    asked = answered(
        dict(OUTPUT["mcp_approval_request"], id="mcpr_1"),
        dict(OUTPUT["mcp_approval_request"], id="mcpr_2"),
        dict(OUTPUT["apply_patch_call"], call_id="call_patch_1"),
    )
    told = HumanMessage(
        [
            dict(APPROVAL, approval_request_id="mcpr_2"),
            dict(APPROVAL, approval_request_id="mcpr_1", approve=False),
            dict(ANSWERS["apply_patch_call"], call_id="call_patch_1"),
        ]
    )
    history = [HumanMessage("Go ahead. " + FILLER), asked, told, HumanMessage("Thanks.")]
    assert budget_messages(history, max_tokens=2000) == history
    assert budget_messages(history, max_tokens=200) == [history[-1]]
    # A patch applied in the same turn awaits nothing.
    done = answered(OUTPUT["apply_patch_call"], OUTPUT["apply_patch_call_output"])
    assert budget_messages([HumanMessage("Patch it."), done], max_tokens=2000)[1] is done


def test_a_user_answer_counts_as_the_user_message_it_is_sent_as() -> None:
    # The answering user message is the result of its turn (role tool, the empty call id).
    answer = {"type": "text", "text": _json(APPROVAL)}  # as it counts (its JSON)
    user = {"role": "user", "content": [answer]}
    linked = {"role": "tool", "content": [answer], "tool_call_id": USER_ANSWER}
    for model in ("gpt-4o", "gpt-4", "claude-sonnet-4-5", "gemini-2.5-pro"):
        counter = TokenCounter.for_model(model)
        assert counter.count_messages([linked]) == counter.count_messages([user])
    approximate = TokenCounter.approximate()
    assert approximate.count_messages([linked]) == approximate.count_messages([user])


TURNS = ("text", "approval", "patch", "both", "patched in turn", "computer", "unanswered")


def conversation(turns: list[tuple[str, int]], answering: int | None) -> list[BaseMessage]:
    """Turns of the kinds in ``TURNS`` (each with a question of so many words), then a question.

    With ``answering`` (words) the last turn (a question of so many words) asks for an approval,
    and the question answers it.
    """
    history: list[BaseMessage] = []
    for n, (turn, words) in enumerate(turns):
        history.append(HumanMessage(f"Question {n}. " + "word " * words))
        if turn == "approval":
            history += [request(n), approval(n)]
        elif turn == "patch":
            history += [patch(n), patched(n)]
        elif turn == "both":
            asked = answered(*request(n).content, *patch(n).content)  # type: ignore[arg-type]
            history += [asked, HumanMessage([*approval(n).content, *patched(n).content])]
        elif turn == "patched in turn":
            history.append(answered(OUTPUT["apply_patch_call"], OUTPUT["apply_patch_call_output"]))
        elif turn == "computer":
            computer = dict(OUTPUT["computer_call"], call_id=f"call_screen_{n}")
            shot = ToolMessage(
                "shot",
                tool_call_id=f"call_screen_{n}",
                additional_kwargs={"type": "computer_call_output"},
            )
            history += [answered(computer), shot]
        elif turn == "unanswered":
            history.append(request(n))  # the user goes on without answering
        history.append(AIMessage(f"Answer {n}."))
    if answering is not None:
        last = [HumanMessage("One more. " + "word " * answering), request(len(turns))]
        return [*history, *last, approval(len(turns))]
    return [*history, HumanMessage("Last question?")]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    turns=st.lists(st.tuples(st.sampled_from(TURNS), st.integers(0, 300)), max_size=6),
    answering=st.none() | st.integers(0, 300),
    budget=st.integers(100, 3000),
)
def test_a_pair_is_never_sent_in_half(
    turns: list[tuple[str, int]], answering: int | None, budget: int
) -> None:
    history = conversation(turns, answering)
    contexts: list[CallContext] = []
    try:
        kept = budget_messages(history, max_tokens=budget, on_context=contexts.append)
    except BudgetExceededError:
        # Only when the question cannot fit with what it answers and its turn's first message.
        assert answering is not None and sent_tokens(history[-3:]) > budget
        return
    positions = [next(i for i, m in enumerate(history) if m is k) for k in kept]
    assert positions == sorted(positions) and kept[-1] is history[-1]  # in order, the question
    assert half_pairs(kept) == []  # every provider accepts it: no half pair
    report = contexts[0].context
    assert len([it for it in report.included if it.source == "history"]) == len(kept)
    assert report.tokens_used == sent_tokens(kept) <= budget  # fits, counted as sent


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
    if kind in ANSWERS:  # awaits the user's answer: without it, never sent
        history.insert(2, HumanMessage([ANSWERS[kind]]))
    contexts: list[CallContext] = []
    kept = budget_messages(history, max_tokens=200_000, on_context=contexts.append)
    assert kept[1] is given_message
    least = floor(block) + (GPT.count(_json(cites)) if cites else 0)
    assert contexts[0].context.tokens_used >= least
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
