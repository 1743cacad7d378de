"""Malformed and multimodal messages from LangChain and LlamaIndex: counted, or refused clearly.

What is promised, and checked here against a count made independently from the raw blocks:

* LangChain (`budget_messages`, `CtxBudgetMiddleware`): text blocks (and plain str parts) are
  counted exactly; images by OpenAI's published rule (85 at ``detail="low"``, else 85 + 170 per
  512 px tile after scaling down into 2048 x 2048 and to a short side of at most 768 px) with
  the size read from inline data (PNG, JPEG, GIF, WebP; data URLs, v1 ``base64`` blocks,
  Anthropic ``source`` blocks); an image whose size cannot be known (a URL) counts as 1,445,
  the most an image can cost, and is reported in `AssembledContext.estimated` (and logged by
  `budget_messages`). Reasoning and thinking blocks go back unchanged, counted as the text they
  hold. Every other block (audio, files, video, unknown types, a text block without text)
  raises `InvalidItemError` naming the message, the block and what to do;
  so do messages LangChain cannot read. The kept messages are the very objects given,
  multimodal blocks unchanged, and their count is never above the budget; with a budget of
  exactly their count, all are kept (the count is exact, not padded).
* LlamaIndex (`CtxBudgetMemory`): memory keeps text; an image, audio, video or document block
  leaves an ``[image]``-style mark in the stored text (so a turn of only an image is not lost)
  and a logged warning; thinking blocks are left out (logged). Every role (``function``,
  ``tool``, ``chatbot``, ``model``, ``developer``) maps to a provider role, and a tool call
  without a name or an id, or a tool result without a ``tool_call_id``, raises
  `InvalidItemError` with nothing written. What `get` returns,
  counted from its messages, is never above ``token_limit``.
"""

from __future__ import annotations

import base64
import copy
import functools
import io
import json
import logging
import math
import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.prompt_values import ChatPromptValue
from lc_fakes import RecordingChatModel
from llama_index.core.base.llms.types import (
    AudioBlock,
    DocumentBlock,
    ImageBlock,
    MessageRole,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    VideoBlock,
)
from llama_index.core.base.llms.types import ChatMessage as LIChatMessage
from PIL import Image

from ctxbudget import (
    BudgetExceededError,
    ContextAssembler,
    ContextItem,
    TokenCounter,
)
from ctxbudget.embed.local import LocalEmbedder
from ctxbudget.errors import InvalidItemError
from ctxbudget.memory.context import ContextMemory
from ctxbudget.tokens.images import IMAGE_TOKENS_MAX, image_size, image_tokens
from langchain_ctxbudget import CtxBudgetMiddleware, budget_messages
from langchain_ctxbudget.convert import item_of
from llama_index.ctxbudget import CtxBudgetMemory

COUNTER = TokenCounter.for_model("gpt-4o")
ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}


# -- an independent count -------------------------------------------------------------------


def openai_rule(width: int, height: int, detail: str = "auto") -> int:
    """OpenAI's published image rule, written out here step by step (never scales up)."""
    if detail == "low":
        return 85
    w, h = float(width), float(height)
    if max(w, h) > 2048:
        w, h = w * 2048 / max(w, h), h * 2048 / max(w, h)
    if min(w, h) > 768:
        w, h = w * 768 / min(w, h), h * 768 / min(w, h)
    return 85 + 170 * math.ceil(w / 512 - 1e-9) * math.ceil(h / 512 - 1e-9)


def message_tokens(message: BaseMessage, content_tokens: int) -> int:
    """A message as sent (its OpenAI form), from its own fields; content counted by the caller."""
    role = ROLES.get(message.type) or str(getattr(message, "role", ""))
    if role == "developer":
        role = "system"  # one token either way in o200k_base
    total = COUNTER.per_message + COUNTER.count(role) + content_tokens
    if message.name:
        total += COUNTER.per_name + COUNTER.count(message.name)
    if isinstance(message, AIMessage):
        for call in message.tool_calls:
            arguments = json.dumps(call["args"], ensure_ascii=False)
            rendered = {"name": call["name"], "arguments": arguments}
            total += COUNTER.count(json.dumps(rendered, ensure_ascii=False))
        for bad in message.invalid_tool_calls:
            rendered = {"name": bad["name"], "arguments": bad["args"]}
            total += COUNTER.count(json.dumps(rendered, ensure_ascii=False))
    if isinstance(message, ToolMessage) and message.tool_call_id:
        total += COUNTER.count(message.tool_call_id)
    return total


def sent_tokens(messages: Sequence[BaseMessage], content: dict[str, int]) -> int:
    """Prompt tokens of ``messages``; ``content`` maps each message id to its content's tokens."""
    return COUNTER.reply_priming + sum(message_tokens(m, content[m.id or ""]) for m in messages)


# -- images -----------------------------------------------------------------------------------


@functools.lru_cache(maxsize=64)
def image_file(width: int, height: int, kind: str) -> bytes:
    """A real image file made by Pillow."""
    out = io.BytesIO()
    Image.new("RGB", (width, height), (200, 40, 40)).save(out, format=kind)
    return out.getvalue()


SIZES = [(1, 1), (90, 60), (512, 512), (513, 200), (1024, 1024), (2048, 4096), (3000, 700)]
KINDS = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp"}


@st.composite
def images(draw: st.DrawFn) -> tuple[dict[str, Any], int]:
    """An image block in one of the shapes LangChain takes, and what it must count."""
    shape = draw(st.sampled_from(["url", "data_url", "v1_base64", "v1_url", "anthropic"]))
    detail = draw(st.sampled_from([None, "low", "high", "auto"]))
    width, height = draw(st.sampled_from(SIZES))
    kind = draw(st.sampled_from(sorted(KINDS)))
    data = base64.b64encode(image_file(width, height, kind)).decode()
    known = openai_rule(width, height, detail or "auto")
    unknown = 85 if detail == "low" else IMAGE_TOKENS_MAX
    spec: dict[str, Any] = {}
    if shape == "url":
        spec = {"url": f"https://img.example/{width}x{height}.png"}
        if detail:
            spec["detail"] = detail
        return {"type": "image_url", "image_url": spec}, unknown
    if shape == "data_url":
        spec = {"url": f"data:{KINDS[kind]};base64,{data}"}
        if detail:
            spec["detail"] = detail
        return {"type": "image_url", "image_url": spec}, known
    if shape == "v1_base64":
        return {"type": "image", "base64": data, "mime_type": KINDS[kind]}, openai_rule(
            width, height
        )
    if shape == "v1_url":
        return {"type": "image", "url": "https://img.example/x.webp"}, IMAGE_TOKENS_MAX
    source = {"type": "base64", "media_type": KINDS[kind], "data": data}
    return {"type": "image", "source": source}, openai_rule(width, height)


PIECES = st.sampled_from(
    ["hello", " ", "\n", "é", "日本", "🙂", "## Conversation", "user: ", "<|im_start|>system", "|"]
)
texts = st.lists(PIECES, max_size=8).map("".join)


@st.composite
def contents(draw: st.DrawFn, *, images_too: bool = True) -> tuple[str | list[Any], int]:
    """A message content: a str, or a list of str parts, text blocks and images."""
    if draw(st.booleans()):
        text = draw(texts)
        return text, COUNTER.count(text)
    parts: list[Any] = []
    tokens = 0
    for _ in range(draw(st.integers(0, 3))):
        choice = draw(st.sampled_from(["str", "text", "image"] if images_too else ["str", "text"]))
        if choice == "image":
            block, cost = draw(images())
            parts.append(block)
            tokens += cost
            continue
        text = draw(texts)
        parts.append(text if choice == "str" else {"type": "text", "text": text})
        tokens += COUNTER.count(text)
    return parts, tokens


@st.composite
def conversations(draw: st.DrawFn) -> tuple[list[BaseMessage], dict[str, int]]:
    """A well-formed conversation of every message class, multimodal, with tool calls."""
    messages: list[BaseMessage] = []
    costs: dict[str, int] = {}

    def add(message: BaseMessage, tokens: int) -> None:
        message.id = f"m{len(messages)}"
        messages.append(message)
        costs[message.id] = tokens

    if draw(st.booleans()):
        content, tokens = draw(contents(images_too=False))
        add(SystemMessage(content=content), tokens)
    for turn in range(draw(st.integers(1, 5))):
        content, tokens = draw(contents())
        name = draw(st.sampled_from([None, "ana", "system"]))
        if draw(st.booleans()):
            add(HumanMessage(content=content, name=name), tokens)
        else:
            add(ChatMessage(role="user", content=content, name=name), tokens)
        for step in range(draw(st.integers(0, 2))):
            calls = [
                {
                    "name": "lookup",
                    "args": {"q": f"t{turn}s{step}c{n}"},
                    "id": f"c{turn}-{step}-{n}",
                    "type": "tool_call",
                }
                for n in range(draw(st.integers(0, 2)))
            ]
            invalid = []
            if draw(st.integers(0, 3)) == 0:
                invalid = [{"name": "lookup", "args": '{"q": broken', "id": None, "error": "x"}]
            content, tokens = draw(contents(images_too=False))
            add(AIMessage(content=content, tool_calls=calls, invalid_tool_calls=invalid), tokens)
            for call in calls:
                content, tokens = draw(contents())
                add(ToolMessage(content=content, tool_call_id=call["id"]), tokens)
        if draw(st.booleans()):
            content, tokens = draw(contents(images_too=False))
            add(AIMessage(content=content), tokens)
    return messages, costs


def is_kept_in_order(kept: list[BaseMessage], given: list[BaseMessage]) -> bool:
    positions = [next(i for i, m in enumerate(given) if m is k) for k in kept]
    return positions == sorted(set(positions))


def _role_of(message: BaseMessage) -> str:
    """A message's role as the provider reads it (a ChatMessage's own role; "human": user)."""
    role = message.role if isinstance(message, ChatMessage) else message.type
    return {"human": "user", "ai": "assistant"}.get(role, role)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversation=conversations(), budget=st.integers(1, 6000))
def test_budget_messages_fits_multimodal_conversations(
    conversation: tuple[list[BaseMessage], dict[str, int]], budget: int
) -> None:
    messages, costs = conversation
    before = copy.deepcopy(messages)
    try:
        kept = budget_messages(messages, max_tokens=budget, start_on=None)
    except BudgetExceededError:
        # Only when what is never dropped is too big: the system message and the newest human
        # message, the question (with the reply priming).
        # A ChatMessage of the user or the system is one (budget_messages decides by role).
        system = messages[:1] if _role_of(messages[0]) == "system" else []
        question = [m for m in messages if _role_of(m) == "user"][-1:]
        assert sent_tokens(system + question, costs) > budget
        return
    assert sent_tokens(kept, costs) <= budget
    assert is_kept_in_order(kept, messages)  # the very objects, in order
    assert messages == before  # nothing given was changed (blocks, tool calls, names)
    # What can be sent at all: everything but calls no result answers (an invalid call
    # without an id, say), results without their call, and turns before the first user turn.
    sendable = budget_messages(messages, max_tokens=10**9, start_on=None)
    for message in messages:
        if not any(message is m for m in sendable):
            role = message.role if isinstance(message, ChatMessage) else message.type
            assert role in ("ai", "assistant", "tool"), message
    # Exact, not padded: a budget of exactly that keeps all of it, one token less does not.
    everything = sent_tokens(sendable, costs)
    assert budget_messages(messages, max_tokens=everything, start_on=None) == sendable
    try:
        fewer = budget_messages(messages, max_tokens=everything - 1, start_on=None)
    except BudgetExceededError:
        return
    assert len(fewer) < len(sendable)


def test_images_of_unknown_size_are_flagged_and_counted_at_their_most(
    caplog: pytest.LogCaptureFixture,
) -> None:
    url = HumanMessage(
        [
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
        ],
        id="u1",
    )
    data = base64.b64encode(image_file(1024, 1024, "PNG")).decode()
    inline = HumanMessage(
        [{"type": "image", "base64": data, "mime_type": "image/png"}, "and this?"], id="u2"
    )
    items = [item_of(m, id=m.id or "", index=i) for i, m in enumerate([url, inline])]
    ctx = ContextAssembler(COUNTER).assemble(items, budget=10_000)
    assert ctx.estimated == ["u1"]
    assert "1,445 tokens each in: u1" in ctx.explain()
    assert json.loads(ctx.to_json())["estimated"] == ["u1"]
    text = COUNTER.count("What is this?")
    assert ctx.tokens_used == 3 + 2 * (3 + 1) + text + IMAGE_TOKENS_MAX + 765 + COUNTER.count(
        "and this?"
    )
    assert COUNTER.count_messages(ctx.to_messages()) == ctx.tokens_used
    assert ctx.to_messages()[0]["content"][1] == url.content[1]  # sent as given
    # The text formats cannot carry an image: a mark says one was there.
    assert (
        "What is this? [image]"
        in ContextAssembler(COUNTER).assemble(items, budget=10_000, format="text").render()
    )
    with caplog.at_level(logging.INFO, logger="langchain_ctxbudget.messages"):
        assert budget_messages([url], max_tokens=5_000) == [url]
    assert "unknown size" in caplog.text and "messages 0" in caplog.text


@settings(max_examples=40, deadline=None)
@given(
    width=st.integers(1, 1600),
    height=st.integers(1, 1600),
    kind=st.sampled_from(sorted(KINDS)),
)
def test_image_size_reads_the_header_of_real_files(width: int, height: int, kind: str) -> None:
    assert image_size(image_file(width, height, kind)) == (width, height)


@settings(max_examples=300, deadline=None)
@given(
    width=st.integers(1, 20_000),
    height=st.integers(1, 20_000),
    detail=st.sampled_from(["low", "high", "auto"]),
)
def test_image_rule_matches_openai_and_never_exceeds_the_unknown_size_count(
    width: int, height: int, detail: str
) -> None:
    tokens = image_tokens(width, height, detail=detail)
    assert tokens == openai_rule(width, height, detail)
    assert 85 <= tokens <= IMAGE_TOKENS_MAX == image_tokens(None, None)
    assert image_tokens(1024, 1024, detail="high") == 765  # OpenAI's own examples
    assert image_tokens(2048, 4096, detail="high") == 1105
    assert image_tokens(4096, 8192, detail="low") == 85


# -- what is refused, and how ------------------------------------------------------------------

REFUSED: list[tuple[Any, str]] = [
    (
        HumanMessage([{"type": "input_audio", "input_audio": {"data": "UklG", "format": "wav"}}]),
        r"message 1 \(human\) has a content block 0 of type 'input_audio'.*convert that block",
    ),
    (
        HumanMessage(["ok", {"type": "file", "file": {"file_id": "file-1"}}]),
        r"message 1 \(human\) has a content block 1 of type 'file'",
    ),
    (  # server tool blocks are counted (their JSON); a type no provider documents is not
        AIMessage([{"type": "made_up_tool_result", "tool_use_id": "s1"}, "ok"]),
        r"message 1 \(ai\) has a content block 0 of type 'made_up_tool_result'",
    ),
    (HumanMessage([{"type": "weird", "x": 1}]), r"block 0 of type 'weird'"),
    (HumanMessage([{"text": "no type"}]), r"block 0 of type None"),
    (
        HumanMessage([{"type": "text", "text": 5}]),
        r"message 1 \(human\): text block 0 has a int text",
    ),
    (
        HumanMessage([{"type": "text"}]),
        r"(?s)message 1 \(human\) has content LangChain cannot convert.*keep its text and image",
    ),
    (
        HumanMessage([{"type": "video", "url": "https://x/v.mp4"}]),
        r"message 1 \(human\) has content LangChain cannot convert.*video",
    ),
    (
        HumanMessage([{"type": "image", "file_id": "file-1"}]),
        r"message 1 \(human\) has content LangChain cannot convert",
    ),
    (
        ChatMessage(role="critic", content="no"),
        r"message 1 has the role 'critic'.*convert others first",
    ),
    ({"role": "critic", "content": "no"}, r"message 1 is not a chat message LangChain can read"),
    ({"content": "no role"}, r"message 1 is not a chat message LangChain can read"),
    (42, r"message 1 is not a chat message LangChain can read"),
]


@pytest.mark.parametrize(("message", "error"), REFUSED)
def test_what_cannot_be_counted_is_refused_with_a_clear_error(message: Any, error: str) -> None:
    with pytest.raises(InvalidItemError, match=error):
        budget_messages([HumanMessage("first"), message], max_tokens=10_000, start_on=None)


def test_odd_but_valid_langchain_input_is_counted_and_kept() -> None:
    call_no_id = {"name": "lookup", "args": {"q": "x"}, "id": None, "type": "tool_call"}
    bad_call = {"name": "lookup", "args": '{"q": ', "id": "b1", "error": "bad json"}
    messages: list[BaseMessage] = [
        SystemMessage([{"type": "text", "text": "Be brief."}], id="m0"),
        HumanMessage("", id="m1"),
        AIMessage([], id="m2"),
        HumanMessage(["a", {"type": "text", "text": ""}], id="m3"),
        AIMessage("", tool_calls=[call_no_id], id="m4"),
        ToolMessage("found", tool_call_id="", id="m5"),  # answers the call without an id
        AIMessage("", invalid_tool_calls=[bad_call], id="m6"),
        ToolMessage("error: bad json", tool_call_id="b1", id="m6r"),  # answers the invalid call
        ChatMessage(role="assistant", content="Use metric units.", id="m7"),
        HumanMessage("last", id="m8"),
    ]
    costs = {m.id or "": COUNTER.count(m.text) for m in messages}
    total = sent_tokens(messages, costs)
    assert budget_messages(messages, max_tokens=total) == messages
    assert budget_messages(ChatPromptValue(messages=messages), max_tokens=total) == messages
    assert budget_messages(messages, max_tokens=total - 1) != messages  # invalid calls count
    # A developer message (OpenAI's system role) in the middle goes into the one system
    # message, as a SystemMessage there does (2026-11-30: it was kept where it stood).
    developer = ChatMessage(role="developer", content="Use metric units.", id="d")
    lifted = budget_messages([*messages[:2], developer, messages[-1]], max_tokens=1000)
    assert isinstance(lifted[0], SystemMessage) and "Use metric units." in lifted[0].text
    assert [m.id for m in lifted[1:]] == ["m1", "m8"]
    # A tool result whose call is nowhere is never sent; dicts are read like messages.
    orphan = [
        {"role": "user", "content": "hi"},
        ToolMessage("lost", tool_call_id="nowhere"),
        {"role": "assistant", "content": "hello"},
    ]
    kept = budget_messages(orphan, max_tokens=1000)
    assert [m.type for m in kept] == ["human", "ai"]
    # Nor a call no result answers (here an invalid one): the provider would refuse it.
    unanswered = [m for m in messages if m.id != "m6r"]
    assert [m.id for m in budget_messages(unanswered, max_tokens=total)] == [
        m.id for m in unanswered if m.id != "m6"
    ]


# -- the agent middleware ----------------------------------------------------------------------


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversation=conversations(), window=st.integers(1200, 5000))
def test_middleware_sends_multimodal_messages_unchanged_within_the_window(
    conversation: tuple[list[BaseMessage], dict[str, int]], window: int
) -> None:
    messages, costs = conversation
    messages = [m for m in messages if not isinstance(m, SystemMessage)]
    model = RecordingChatModel(messages=iter([AIMessage("Done.")]))
    middleware = CtxBudgetMiddleware(model="gpt-4o", budget=window, reserve=200)
    agent = create_agent(model, tools=[], system_prompt="Be brief.", middleware=[middleware])
    before = copy.deepcopy(messages)
    try:
        agent.invoke({"messages": messages})
    except BudgetExceededError:  # the question alone does not fit (a URL image: 1,445 tokens)
        assert model.calls == [] and messages == before  # refused before the model is called
        return
    ((sent, _tools),) = model.calls
    system, history = sent[0], sent[1:]
    assert isinstance(system, SystemMessage) and system.content == "Be brief."  # as given
    assert is_kept_in_order(history, messages)  # the state's own objects, blocks and all
    assert messages == before
    system_tokens = COUNTER.per_message + COUNTER.count("system") + COUNTER.count(system.content)
    assert system_tokens + sent_tokens(history, costs) <= window - 200


def test_middleware_refuses_an_audio_block_naming_it() -> None:
    model = RecordingChatModel(messages=iter([AIMessage("Done.")]))
    middleware = CtxBudgetMiddleware(model="gpt-4o", budget=4000)
    agent = create_agent(model, tools=[], middleware=[middleware])
    audio = HumanMessage(
        [{"type": "input_audio", "input_audio": {"data": "UklG", "format": "wav"}}]
    )
    with pytest.raises(InvalidItemError, match="message 0 .*'input_audio'"):
        agent.invoke({"messages": [audio]})
    assert model.calls == []


# -- LlamaIndex memory -------------------------------------------------------------------------


@pytest.fixture
def context_memory(tmp_path: Path, embedder: LocalEmbedder) -> Iterator[ContextMemory]:
    memory = ContextMemory(tmp_path / "chroma", embedder=embedder)
    yield memory
    memory.close()
    shutil.rmtree(tmp_path / "chroma", ignore_errors=True)


def returned_tokens(messages: Sequence[LIChatMessage]) -> int:
    """What `get` returned, counted from the messages' own fields."""
    total = COUNTER.reply_priming
    for message in messages:
        role = {"developer": "system", "chatbot": "assistant", "model": "assistant"}.get(
            message.role.value, message.role.value
        )
        text = "".join(b.text for b in message.blocks if isinstance(b, TextBlock))
        total += COUNTER.per_message + COUNTER.count(role) + COUNTER.count(text)
        name = message.additional_kwargs.get("name")
        if name:
            total += COUNTER.per_name + COUNTER.count(name)
        for block in message.blocks:
            if isinstance(block, ToolCallBlock):
                arguments = json.dumps(block.tool_kwargs)
                rendered = {"name": block.tool_name, "arguments": arguments}
                total += COUNTER.count(json.dumps(rendered, ensure_ascii=False))
        call_id = message.additional_kwargs.get("tool_call_id")
        if call_id:
            total += COUNTER.count(str(call_id))
    return total


def png_path(tmp_path: Path) -> Path:
    path = tmp_path / "photo.png"
    path.write_bytes(image_file(640, 480, "PNG"))
    return path


BLOCKS: list[tuple[str, Callable[[Path], list[Any]], str]] = [
    (
        "image url",
        lambda p: [TextBlock(text="What is it?"), ImageBlock(url="https://x/y.png")],
        "What is it? [image]",
    ),
    (
        "image bytes",
        lambda p: [ImageBlock(image=image_file(64, 64, "PNG")), TextBlock(text="and?")],
        "and? [image]",
    ),
    ("image path", lambda p: [ImageBlock(path=png_path(p))], "[image]"),
    (
        "document",
        lambda p: [
            TextBlock(text="Read it."),
            DocumentBlock(data=b"%PDF-1.4", document_mimetype="application/pdf"),
        ],
        "Read it. [document]",
    ),
    ("audio", lambda p: [AudioBlock(audio=b"RIFF0000WAVE", format="wav")], "[audio]"),
    ("video", lambda p: [VideoBlock(url="https://x/v.mp4")], "[video]"),
    (
        "thinking",
        lambda p: [ThinkingBlock(content="secret"), TextBlock(text="Visible.")],
        "Visible.",
    ),
]


UNCOUNTABLE = {"document": "DocumentBlock", "audio": "AudioBlock", "video": "VideoBlock"}
"""Blocks ctxbudget cannot count: refused when the message is sent, never replaced by a mark."""


@pytest.mark.parametrize(("kind", "blocks", "stored"), BLOCKS, ids=[b[0] for b in BLOCKS])
def test_llamaindex_memory_marks_media_and_stays_within_the_limit(
    kind: str,
    blocks: Callable[[Path], list[Any]],
    stored: str,
    context_memory: ContextMemory,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Stored as text with marks; the message being answered is sent with its own blocks."""
    memory = CtxBudgetMemory(memory=context_memory, session_id="s", token_limit=2000)
    given = blocks(tmp_path)
    with caplog.at_level(logging.DEBUG, logger="llama_index.ctxbudget.convert"):
        memory.put_messages(
            [
                LIChatMessage(role=MessageRole.USER, content="Hello."),
                LIChatMessage(role=MessageRole.ASSISTANT, content="Hi!"),
                LIChatMessage(role=MessageRole.USER, blocks=given),
            ]
        )
    assert "stores text only" in caplog.text  # flagged, never silently dropped
    assert [r.text for r in context_memory.history("s")][-1] == stored  # the turn, its marks
    if kind in UNCOUNTABLE:
        with pytest.raises(InvalidItemError, match=UNCOUNTABLE[kind]):
            memory.get()
        return
    got = memory.get()
    assert [type(b) for b in got[-1].blocks] == [type(b) for b in given]  # its own blocks
    assert returned_tokens(got) <= memory.last_context.tokens_used <= 2000
    if not any(isinstance(b, ImageBlock) for b in given):
        assert returned_tokens(got) + COUNTER.count("secret") == memory.last_context.tokens_used


def test_llamaindex_roles_and_tool_calls(context_memory: ContextMemory) -> None:
    memory = CtxBudgetMemory(memory=context_memory, session_id="s", token_limit=400)
    call = {"id": "c1", "function": {"name": "lookup", "arguments": '{"q": "x"}'}}
    memory.put_messages(
        [
            LIChatMessage(role=MessageRole.DEVELOPER, content="Use metric units."),
            LIChatMessage(role=MessageRole.USER, content="Weather?"),
            LIChatMessage(
                role=MessageRole.CHATBOT, content="", additional_kwargs={"tool_calls": [call]}
            ),
            LIChatMessage(
                role=MessageRole.TOOL, content="Sunny", additional_kwargs={"tool_call_id": "c1"}
            ),
            LIChatMessage(role=MessageRole.MODEL, content="It is sunny."),
            LIChatMessage(role=MessageRole.USER, content="Thanks"),
        ]
    )
    got = memory.get()
    assert [m.role.value for m in got] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert got[0].content.startswith("Use metric units.")
    assert returned_tokens(got) == memory.last_context.tokens_used <= 400
    context_memory.flush()  # the store itself is read next
    stored = context_memory.store.count(namespace=context_memory.namespace)
    for bad, error in [
        (
            {"function": {"name": "lookup", "arguments": "{}"}},
            r"tool call 0 \('lookup'\) has no id",
        ),
        ({"id": "c2", "function": {"arguments": "{}"}}, "has no tool name"),
        ("junk", "must be a dict or a ToolCallBlock"),
    ]:
        with pytest.raises(InvalidItemError, match=error):
            memory.put_messages(
                [
                    LIChatMessage(role=MessageRole.USER, content="again"),
                    LIChatMessage(
                        role=MessageRole.ASSISTANT,
                        content="",
                        additional_kwargs={"tool_calls": [bad]},
                    ),
                ]
            )
        context_memory.flush()
        assert context_memory.store.count(namespace=context_memory.namespace) == stored
    # A result that names no call (until 2026-12-02 stored, then pruned as an orphan).
    orphan = LIChatMessage(role=MessageRole.FUNCTION, content="orphan result")
    with pytest.raises(InvalidItemError, match=r"message 1 is a tool result \(function role\)"):
        memory.put_messages([LIChatMessage(role=MessageRole.USER, content="again"), orphan])
    context_memory.flush()
    assert context_memory.store.count(namespace=context_memory.namespace) == stored


def test_llamaindex_random_blocks_fit(context_memory: ContextMemory, tmp_path: Path) -> None:
    makers = [b[1] for b in BLOCKS]

    @settings(
        max_examples=20,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(
        picks=st.lists(st.integers(0, len(makers) - 1), min_size=1, max_size=6),
        texts=st.lists(texts, min_size=1, max_size=6),
        limit=st.integers(40, 600),
    )
    def check(picks: list[int], texts: list[str], limit: int) -> None:
        memory = CtxBudgetMemory(
            memory=context_memory, session_id=f"r{len(picks)}-{limit}", token_limit=limit
        )
        memory.reset()
        turns = []
        for n, pick in enumerate(picks):
            role = MessageRole.USER if n % 2 == 0 else MessageRole.ASSISTANT
            blocks = [TextBlock(text=texts[n % len(texts)]), *makers[pick](tmp_path)]
            turns.append(LIChatMessage(role=role, blocks=blocks))
        memory.put_messages(turns)
        asked = len(picks) % 2 == 1  # the last turn is the user's: it is the query, sent whole
        last = BLOCKS[picks[-1]][0]
        try:
            got = memory.get()
        except BudgetExceededError:
            return  # the query alone is larger than the limit: said, not truncated
        except InvalidItemError:
            assert asked and last in UNCOUNTABLE  # its own blocks are sent: one is uncountable
            return
        # The room of a query the caller sends itself (the last turn is not a user's) is kept.
        assert returned_tokens(got) <= memory.last_context.tokens_used <= limit
        if asked and last not in ("image url", "image bytes", "image path", "thinking"):
            assert returned_tokens(got) == memory.last_context.tokens_used

    check()


@pytest.mark.parametrize("kind", [[], {}, None, 3])
def test_a_content_part_with_a_type_that_is_not_a_str_is_refused(kind: object) -> None:
    with pytest.raises(InvalidItemError, match="content part 0 .*convert it to text"):
        ContextItem("a", "x", parts=[{"type": kind}])
