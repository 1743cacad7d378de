"""What is sent is exactly what was chosen, through the LlamaIndex adapter.

`CtxBudgetMemory.get` on generated long agent sessions (user turns, assistant turns with one or
several tool calls, malformed tool kwargs, tool results with names, equal texts): what `get`
returns fits ``token_limit``, is exactly the report's included items rendered (roles, content,
names, tool calls), never starts with an assistant or tool message after the system messages,
every tool call has all its results and every result its call, and the system prompt and the
pinned facts are always there. Plus regression tests for each bug of the issue.
"""

from __future__ import annotations

import itertools
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock, ToolCallBlock
from llama_index.core.schema import NodeWithScore, TextNode

from ctxbudget import InvalidItemError, TokenCounter
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.policy.config import MemoryConfig
from llama_index.ctxbudget import (
    CtxBudgetEmbedding,
    CtxBudgetMemory,
    CtxBudgetNodePostprocessor,
)

from .helpers import openai_messages, prompt_tokens, tool_call_problems, user

SYSTEM_PROMPT = "You are a careful assistant."
FACT = "The user is Ana."
WORDS = ["lisbon", "train", "porto", "the", "visa", "ok", "weather", "sister", "äöü", "日本"]


@st.composite
def agent_sessions(draw: st.DrawFn) -> list[ChatMessage]:
    """A long agent session as a FunctionAgent stores it, ending with the question asked."""
    texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=14).map(" ".join)
    messages: list[ChatMessage] = []
    calls = itertools.count()
    for _ in range(draw(st.integers(1, 10))):
        messages.append(user(draw(texts)))
        for _step in range(draw(st.integers(0, 3))):
            blocks: list[Any] = []
            if draw(st.booleans()):
                blocks.append(TextBlock(text=draw(st.sampled_from(["Let me look.", "ok"]))))
            ids: list[str] = []
            for _call in range(draw(st.integers(1, 3))):
                call_id = f"call_{next(calls)}"
                ids.append(call_id)
                kwargs: dict[str, Any] | str = {"q": draw(texts)}
                if draw(st.integers(0, 4)) == 0:
                    kwargs = '{"q": "' + draw(texts)  # malformed, as a model may emit
                blocks.append(
                    ToolCallBlock(tool_call_id=call_id, tool_name="search", tool_kwargs=kwargs)
                )
            messages.append(ChatMessage(role=MessageRole.ASSISTANT, blocks=blocks))
            for call_id in draw(st.permutations(ids)):
                extra: dict[str, Any] = {"tool_call_id": call_id}
                if draw(st.booleans()):
                    extra["name"] = "search"
                messages.append(
                    ChatMessage(role=MessageRole.TOOL, content=draw(texts), additional_kwargs=extra)
                )
        if draw(st.booleans()):
            messages.append(ChatMessage(role=MessageRole.ASSISTANT, content=draw(texts)))
    messages.append(user(draw(texts)))
    return messages


def compared(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Provider messages with what must match: role, content, name, tool calls, call id."""
    out: list[dict[str, Any]] = []
    for message in messages:
        entry: dict[str, Any] = {"role": message["role"], "content": message.get("content") or ""}
        for key in ("name", "tool_call_id"):
            if message.get(key):
                entry[key] = message[key]
        calls = message.get("tool_calls")
        if calls:
            entry["tool_calls"] = [
                (c["id"], c["function"]["name"], c["function"]["arguments"]) for c in calls
            ]
        out.append(entry)
    return out


@pytest.fixture(scope="module")
def shared_memory(tmp_path_factory: pytest.TempPathFactory, embedding: CtxBudgetEmbedding) -> Any:
    folder: Path = tmp_path_factory.mktemp("li-what-is-sent")
    memory = ContextMemory(folder / "chroma", embedder=embedding)
    yield memory
    memory.close()


@pytest.mark.slow
@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(session=agent_sessions(), limit=st.integers(min_value=120, max_value=900))
def test_get_on_long_agent_sessions_is_exactly_the_report_and_a_valid_conversation(
    shared_memory: ContextMemory, counter: TokenCounter, session: list[ChatMessage], limit: int
) -> None:
    memory = CtxBudgetMemory.from_defaults(
        memory=shared_memory,
        token_limit=limit,
        session_id=f"s-{uuid.uuid4().hex[:8]}",
        system_prompt=SYSTEM_PROMPT,
    )
    memory.pin(FACT)
    memory.put_messages(session)
    out = memory.get()
    report = memory.last_context
    assert report is not None
    # Fits, counted independently of the adapter.
    assert prompt_tokens(counter, out) <= limit
    # Exactly the report's included items, rendered (the query is pending: it is sent last).
    assert compared(openai_messages(out)) == compared(report.to_messages())
    assert tool_call_problems(out) == []
    conversation = [m for m in out if m.role != MessageRole.SYSTEM]
    assert conversation and conversation[0].role == MessageRole.USER
    assert conversation[-1].content == session[-1].content
    system = "".join(m.content or "" for m in out if m.role == MessageRole.SYSTEM)
    assert SYSTEM_PROMPT in system and FACT in system
    # No placeholder reaches the model.
    assert all("(tool call)" not in (m.content or "") for m in out)


# -- regressions ----------------------------------------------------------------------------
def test_a_tool_call_only_turn_is_sent_without_placeholder_text(
    context_memory: ContextMemory,
) -> None:
    memory = CtxBudgetMemory.from_defaults(memory=context_memory, token_limit=1000)
    call = ToolCallBlock(tool_call_id="c1", tool_name="weather", tool_kwargs={"city": "Lisbon"})
    memory.put_messages(
        [
            user("Weather in Lisbon?"),
            ChatMessage(role=MessageRole.ASSISTANT, blocks=[call]),
            ChatMessage(
                role=MessageRole.TOOL, content="sunny", additional_kwargs={"tool_call_id": "c1"}
            ),
            ChatMessage(role=MessageRole.ASSISTANT, content="It is sunny."),
            user("And tomorrow?"),
        ]
    )
    out = memory.get()
    assert [m.role.value for m in out] == ["user", "assistant", "tool", "assistant", "user"]
    assert out[1].content is None  # no "(tool call)" as assistant content
    assert out[1].blocks == [call]


def test_malformed_tool_kwargs_are_stored_and_read_back_as_given(
    context_memory: ContextMemory,
) -> None:
    memory = CtxBudgetMemory.from_defaults(memory=context_memory, token_limit=1000)
    bad = ToolCallBlock(tool_call_id="c1", tool_name="search", tool_kwargs='{"q": "lis')
    memory.put_messages(
        [
            user("Search Lisbon"),
            ChatMessage(role=MessageRole.ASSISTANT, blocks=[bad]),
            ChatMessage(
                role=MessageRole.TOOL,
                content="Error: arguments are not JSON",
                additional_kwargs={"tool_call_id": "c1"},
            ),
            user("Try again"),
        ]
    )
    stored = memory.get_all()  # no JSONDecodeError
    assert stored[1].blocks == [bad]
    out = memory.get()
    assert tool_call_problems(out) == []
    assert [b for m in out for b in m.blocks if isinstance(b, ToolCallBlock)] == [bad]


def test_a_malformed_call_stored_through_the_core_reads_back_as_raw_kwargs(
    context_memory: ContextMemory,
) -> None:
    session = "core-written"
    context_memory.add_messages(
        session,
        [
            {"role": "user", "text": "Weather?"},
            {
                "role": "assistant",
                "text": "",
                "tool_calls": [
                    {"id": "c9", "type": "function", "function": {"name": "w", "arguments": "{x"}}
                ],
            },
            {"role": "tool", "text": "unknown", "tool_call_id": "c9"},
        ],
        progress=False,
    )
    memory = CtxBudgetMemory.from_defaults(
        memory=context_memory, token_limit=1000, session_id=session
    )
    back = memory.get_all()
    assert back[1].blocks == [ToolCallBlock(tool_call_id="c9", tool_name="w", tool_kwargs="{x")]


def test_node_ids_in_the_internal_space_are_refused() -> None:
    post = CtxBudgetNodePostprocessor(budget=100)
    nodes = [NodeWithScore(node=TextNode(text="x", id_="ctxbudget:query"), score=1.0)]
    with pytest.raises(InvalidItemError, match="ctxbudget:"):
        post.postprocess_nodes(nodes)
    # Ids that merely look like ctxbudget's are the caller's own.
    fine = [NodeWithScore(node=TextNode(text="x", id_="query"), score=1.0)]
    assert [n.node_id for n in post.postprocess_nodes(fine)] == ["query"]


def test_with_excerpts_get_sends_exactly_the_excerpts_the_report_lists(
    tmp_path: Path, embedding: Any, counter: TokenCounter
) -> None:
    # `MemoryConfig.excerpts` reaches the LlamaIndex memory as it reaches the core: the older
    # turns it adds are the sentences that hold the question's words, sent as the report says.
    core = ContextMemory(
        tmp_path / "chroma",
        embedder=embedding,
        config=MemoryConfig(excerpts=True, recent_messages=2),
        write_behind=False,
    )
    filler = (
        "The weather has been grey all week and the trains were late again. I finally "
        "finished the report for work, which took far longer than planned."
    )
    memory = CtxBudgetMemory.from_defaults(
        memory=core, token_limit=330, session_id="s-ex", system_prompt=SYSTEM_PROMPT
    )
    try:
        for hobby in ("pottery", "camping", "violin", "painting", "swimming", "chess"):
            memory.put(user(f"{filler} My favourite hobby now is {hobby}."))
            memory.put(ChatMessage(role=MessageRole.ASSISTANT, content="Nice!"))
        memory.put(user("Which hobby did I mention?"))
        out = memory.get()
        report = memory.last_context
        assert report is not None
        assert prompt_tokens(counter, out) <= 330
        assert compared(openai_messages(out)) == compared(report.to_messages())
        cut = [it for it in report.included if "excerpt" in it.metadata]
        assert cut, "no older turn was offered as an excerpt"
        system = "".join(m.content or "" for m in out if m.role == MessageRole.SYSTEM)
        for item in cut:
            assert item.text in system and "\u2026" in item.text and "hobby" in item.text
    finally:
        core.close()
