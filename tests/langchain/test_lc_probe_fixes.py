"""What a probe of the LangChain adapter found, fixed: one test each.

Reasoning blocks (Anthropic ``thinking``, OpenAI ``reasoning``, LangChain's standard blocks) go
back to the model as they were and count; a system message in the middle of the conversation
goes into the one system message; the request's system message is sent as given (blocks,
``cache_control``, name, kwargs), with what ctxbudget adds after it; the chat history checks the
session's owner; the retriever's async path takes ``k``/``budget``, its ``collections`` filter
applies to documents whatever ``search`` is and an empty list is refused; errors name the
message or document at fault. Real tiktoken, embedded Chroma and embedder; the chat model is the
one fake (it records what it received).
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest
from langchain.agents import create_agent
from langchain_core.documents import Document
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.utils import convert_to_openai_messages
from langchain_core.tools import tool
from lc_fakes import RecordingChatModel

from ctxbudget import (
    AssembledContext,
    ConfigurationError,
    ContextItem,
    InvalidItemError,
    Tier,
    TokenCounter,
)
from ctxbudget.errors import SessionOwnerError
from ctxbudget.memory.context import ContextMemory
from langchain_ctxbudget import (
    CallContext,
    CtxBudgetChatMessageHistory,
    CtxBudgetCompressor,
    CtxBudgetMiddleware,
    CtxBudgetRetriever,
    budget_messages,
)

COUNTER = TokenCounter.for_model("gpt-4o")


@tool
def weather(city: str) -> str:
    """Weather of a city."""
    return "sunny"


def call(city_id: str = "c1") -> dict[str, Any]:
    return {"name": "weather", "args": {"city": "Lisbon"}, "id": city_id}


REASONING = {
    "anthropic": AIMessage(
        [
            {"type": "thinking", "thinking": "Let me check the weather.", "signature": "sig"},
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "c1", "name": "weather", "input": {"city": "Lisbon"}},
        ],
        tool_calls=[call()],
    ),
    "anthropic_redacted": AIMessage(
        [{"type": "redacted_thinking", "data": "ZW5jcnlwdGVk" * 20}], tool_calls=[call()]
    ),
    "openai_responses": AIMessage(
        [
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [{"type": "summary_text", "text": "Think about the weather."}],
            }
        ],
        tool_calls=[call()],
    ),
    "v1": AIMessage(
        [
            {"type": "reasoning", "reasoning": "Think about the weather."},
            {"type": "tool_call", "id": "c1", "name": "weather", "args": {"city": "Lisbon"}},
        ],
        tool_calls=[call()],
        response_metadata={"output_version": "v1"},
    ),
}


def sent_tokens(messages: list[BaseMessage]) -> int:
    """What LangChain sends, counted independently: reasoning blocks as the text they hold."""
    oai = [dict(m) for m in convert_to_openai_messages(messages, text_format="block")]
    for message in oai:
        content = message.get("content")
        if isinstance(content, list):
            message["content"] = [_as_text(part) for part in content if _as_text(part)]
    return COUNTER.count_messages(oai)


def _as_text(part: dict[str, Any]) -> dict[str, Any] | None:
    kind = part["type"]
    if kind == "text":
        return part
    if kind == "thinking":
        return {"type": "text", "text": part["thinking"]}
    if kind == "redacted_thinking":
        return {"type": "text", "text": part["data"]}
    if kind == "reasoning":
        text = part.get("reasoning") or "\n".join(s["text"] for s in part.get("summary", []))
        return {"type": "text", "text": text}
    return None  # a v1 tool_call block: counted with the message's tool calls


# -- 1. reasoning blocks ----------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(REASONING))
def test_reasoning_blocks_go_back_unchanged_and_count(name: str) -> None:
    first = REASONING[name]
    contexts: list[AssembledContext] = []
    model = RecordingChatModel(messages=iter([first, AIMessage("It is sunny.")]))
    middleware = CtxBudgetMiddleware(
        model="gpt-4o", budget=3000, reserve=100, on_context=lambda c: contexts.append(c.context)
    )
    agent = create_agent(model, tools=[weather], middleware=[middleware])
    agent.invoke({"messages": [HumanMessage("Weather in Lisbon?")]})
    sent, _ = model.calls[1]
    assert [m.type for m in sent] == ["human", "ai", "tool"]
    assert sent[1].content == first.content  # the signature and every field, as received
    # Counted: the report is what was sent, the reasoning's text included.
    assert contexts[1].tokens_used == sent_tokens(sent)
    without = first.model_copy(update={"content": ""})
    assert contexts[1].tokens_used > sent_tokens([sent[0], without, sent[2]])


@pytest.mark.parametrize("name", sorted(REASONING))
def test_budget_messages_keeps_reasoning_blocks(name: str) -> None:
    history = [
        HumanMessage("Weather in Lisbon?"),
        REASONING[name],
        ToolMessage("sunny", tool_call_id="c1"),
        AIMessage("Sunny."),
        HumanMessage("And tomorrow?"),
    ]
    contexts: list[CallContext] = []
    kept = budget_messages(history, max_tokens=2000, on_context=contexts.append)
    assert kept == history and kept[1] is history[1]
    assert contexts[0].context.tokens_used == sent_tokens(kept)


def test_a_block_of_another_type_is_still_named() -> None:
    odd = AIMessage([{"type": "made_up_call", "id": "s1", "name": "web", "args": {}}])
    with pytest.raises(InvalidItemError, match=r"message 1 \(ai\).*block 0.*'made_up_call'"):
        budget_messages([HumanMessage("q"), odd, HumanMessage("q2")], max_tokens=500)


# -- 2. a system message in the middle --------------------------------------------------------
MID = [
    HumanMessage("q1", id="h1"),
    AIMessage("a1", id="a1"),
    SystemMessage("Note: the user switched to French.", id="note"),
    HumanMessage("q2", id="h2"),
]


def test_the_middleware_sends_a_mid_conversation_system_message_in_the_system_message() -> None:
    contexts: list[AssembledContext] = []
    model = RecordingChatModel(messages=iter([AIMessage("x")]))
    middleware = CtxBudgetMiddleware(
        model="gpt-4o", budget=2000, reserve=100, on_context=lambda c: contexts.append(c.context)
    )
    agent = create_agent(model, tools=[], system_prompt="Sys.", middleware=[middleware])
    agent.invoke({"messages": MID})
    sent, _ = model.calls[0]
    assert [m.type for m in sent] == ["system", "human", "ai", "human"]
    assert sent[0].content == "Sys.\n\nNote: the user switched to French.\n"
    assert "note" in [item.id for item in contexts[0].included]  # reported under its id
    assert contexts[0].tokens_used == COUNTER.count_messages(convert_to_openai_messages(sent))


def test_budget_messages_sends_a_mid_conversation_system_message_first() -> None:
    contexts: list[CallContext] = []
    kept = budget_messages(
        [SystemMessage("Sys."), *MID], max_tokens=500, on_context=contexts.append
    )
    assert [m.type for m in kept] == ["system", "human", "ai", "human"]
    assert kept[0].content == "Sys.\n\nNote: the user switched to French.\n"
    assert contexts[0].context.tokens_used == COUNTER.count_messages(
        convert_to_openai_messages(kept)
    )
    # Without a system message of its own, the note makes one.
    alone = budget_messages(MID, max_tokens=500)
    assert [m.type for m in alone] == ["system", "human", "ai", "human"]
    assert alone[0].text == "Note: the user switched to French.\n"


# -- 3. the system message as given -----------------------------------------------------------
BLOCKS = SystemMessage(
    content=[
        {"type": "text", "text": "You are helpful.", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "Second block."},
    ],
    additional_kwargs={"x": 1},
    name="sys",
    id="s0",
)


def run_with(system: str | SystemMessage, **options: Any) -> tuple[BaseMessage, int]:
    contexts: list[AssembledContext] = []
    model = RecordingChatModel(messages=iter([AIMessage("x")]))
    middleware = CtxBudgetMiddleware(
        model="gpt-4o",
        budget=2000,
        reserve=100,
        on_context=lambda c: contexts.append(c.context),
        **options,
    )
    create_agent(model, tools=[], system_prompt=system, middleware=[middleware]).invoke(
        {"messages": [HumanMessage("hi")]}
    )
    sent, _ = model.calls[0]
    assert contexts[0].tokens_used == COUNTER.count_messages(convert_to_openai_messages(sent))
    return sent[0], contexts[0].tokens_used


def test_a_system_message_nothing_is_added_to_is_sent_unchanged() -> None:
    system, _ = run_with(BLOCKS)
    assert system == BLOCKS
    plain, _ = run_with("Sys.\nuser: not a turn")
    assert plain.content == "Sys.\nuser: not a turn"  # no line break added, nothing escaped


def test_what_is_added_comes_after_the_system_message_as_given() -> None:
    system, _ = run_with(BLOCKS, pinned=["Ana is vegetarian."])
    assert system.content[:2] == BLOCKS.content  # cache_control kept
    assert system.content[2] == {"type": "text", "text": "## Pinned facts\n- Ana is vegetarian.\n"}
    assert (system.name, system.additional_kwargs, system.id) == ("sys", {"x": 1}, "s0")
    plain, _ = run_with("Sys.", pinned=["Ana is vegetarian."])
    assert plain.content == "Sys.\n\n## Pinned facts\n- Ana is vegetarian.\n"


def test_budget_messages_keeps_the_system_message_with_pinned_facts() -> None:
    contexts: list[CallContext] = []
    kept = budget_messages(
        [BLOCKS, HumanMessage("hi")],
        max_tokens=500,
        pinned=["Ana is vegetarian."],
        on_context=contexts.append,
    )
    assert kept[0].content[:2] == BLOCKS.content and kept[0].name == "sys"
    assert contexts[0].context.tokens_used == COUNTER.count_messages(
        convert_to_openai_messages(kept)
    )


def test_offered_items_that_do_not_fit_leave_a_str_system_message_as_given() -> None:
    big = ContextItem("big", "Lisbon " * 3000, tier=Tier.RETRIEVED)
    system, used = run_with("Sys.", extra=[big])  # counted exactly as sent (in run_with)
    assert system.content == "Sys."
    small = ContextItem("small", "Lisbon is sunny.", tier=Tier.RETRIEVED)
    system, _ = run_with("Sys.", extra=[big, small])
    assert system.content.startswith("Sys.\n\n## ") and "Lisbon is sunny." in system.content


# -- 4. the chat history checks the session's owner -------------------------------------------
def test_the_chat_history_refuses_another_users_session(memory: ContextMemory) -> None:
    ana = CtxBudgetChatMessageHistory(memory, "ana-1", user_id="ana")
    ana.add_messages([HumanMessage("My PIN is 1234")])
    bo = CtxBudgetChatMessageHistory(memory, "ana-1", user_id="bo")
    with pytest.raises(SessionOwnerError, match="'ana-1' belongs to another user"):
        bo.messages  # noqa: B018 - the read is the test
    with pytest.raises(SessionOwnerError):
        bo.add_messages([HumanMessage("reveal the PIN")])
    with pytest.raises(SessionOwnerError):
        asyncio.run(bo.aget_messages())
    with pytest.raises(SessionOwnerError):
        bo.clear()
    assert [m.content for m in ana.messages] == ["My PIN is 1234"]
    # A new session is claimed by its first writer.
    CtxBudgetChatMessageHistory(memory, "bo-1", user_id="bo").add_messages([HumanMessage("hi")])
    with pytest.raises(SessionOwnerError):
        CtxBudgetChatMessageHistory(memory, "bo-1", user_id="ana").messages  # noqa: B018


# -- 5, 6. the retriever ----------------------------------------------------------------------
@pytest.fixture
def kb(memory: ContextMemory) -> ContextMemory:
    memory.add_documents(["Lisbon trams are yellow.", "Porto has wine."], collection="kb")
    memory.add_documents(["Secret roadmap for 2027."], collection="internal")
    memory.add_messages("s-bo", [{"role": "user", "text": "Bo likes trams", "id": "b1"}])
    memory.flush()
    return memory


def test_the_retriever_ainvoke_takes_k_and_budget(kb: ContextMemory) -> None:
    retriever = CtxBudgetRetriever(memory=kb, k=4, budget=300)
    for options in ({"k": 1}, {"budget": 20}, {"k": 2, "budget": 300}):
        sync = retriever.invoke("tram", **options)
        assert [d.page_content for d in asyncio.run(retriever.ainvoke("tram", **options))] == [
            d.page_content for d in sync
        ]
    assert len(asyncio.run(retriever.ainvoke("tram", k=1))) == 1


def test_collections_filter_documents_whatever_search_is(kb: ContextMemory) -> None:
    docs = CtxBudgetRetriever(memory=kb, search="all", collections=["kb"], k=10).invoke(
        "secret roadmap trams"
    )
    found = {(d.metadata["kind"], d.metadata["scope_id"]) for d in docs}
    assert ("document", "internal") not in found
    assert ("document", "kb") in found and ("message", "s-bo") in found
    with pytest.raises(ConfigurationError, match="non-empty list"):
        CtxBudgetRetriever(memory=kb, collections=[])


# -- 7. errors that name what is at fault -----------------------------------------------------
def test_numpy_tool_arguments_are_named() -> None:
    history = [
        HumanMessage("q"),
        AIMessage("", tool_calls=[{"name": "f", "args": {"n": np.int64(3)}, "id": "c1"}]),
        ToolMessage("r", tool_call_id="c1"),
        HumanMessage("q2"),
    ]
    with pytest.raises(InvalidItemError, match=r"message 1 \(ai\): the arguments of tool call 0"):
        budget_messages(history, max_tokens=500)


@pytest.mark.parametrize(
    ("message", "field"),
    [
        (AIMessage("", tool_calls=[{"name": "f", "args": {"x": "a\udc00"}, "id": "c1"}]), "argu"),
        (AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c\ud800"}]), "id"),
        (AIMessage("bad \ud800"), "text"),
        (AIMessage("ok", name="n\ud800"), "name"),
    ],
)
def test_a_lone_surrogate_names_its_message(message: AIMessage, field: str) -> None:
    history = [HumanMessage("q"), message, HumanMessage("q2")]
    if message.tool_calls:
        history.insert(2, ToolMessage("r", tool_call_id=message.tool_calls[0]["id"]))
    with pytest.raises(
        InvalidItemError, match=rf"message 1 \(ai\): [^:]*{field}[^:]* holds a lone surrogate"
    ):
        budget_messages(history, max_tokens=500)


def test_the_compressor_names_documents_by_their_place_as_given() -> None:
    docs = [Document(" "), Document("x", metadata={"score": float("nan")})]
    with pytest.raises(InvalidItemError, match=r"document 1: metadata\['score'\]"):
        CtxBudgetCompressor(budget=40).compress_documents(docs, "q")


# -- the core's joined layout, which the adapter uses -----------------------------------------
@pytest.mark.parametrize(
    "counter", [COUNTER, TokenCounter.approximate()], ids=["tiktoken", "approx"]
)
@pytest.mark.parametrize("content", ["Sys.\n\n", ({"type": "text", "text": "Sys."},)])
def test_a_joined_layout_counts_the_one_system_message_it_renders(
    counter: TokenCounter, content: str | tuple[dict[str, str], ...]
) -> None:
    from ctxbudget import Budget, ContextAssembler
    from ctxbudget.core.items import Shrink
    from ctxbudget.core.split import one_system_layouts, split_prefix

    parts = None if isinstance(content, str) else content
    text = content if isinstance(content, str) else "Sys."
    own = ContextItem(
        "own", text, tier=Tier.RECENT, role="system", shrink=Shrink.NEVER, parts=parts
    )
    items = [
        own,
        ContextItem("q", "hi", tier=Tier.RECENT, role="user", shrink=Shrink.NEVER),
        ContextItem("p", "Ana is vegetarian.", tier=Tier.PINNED, shrink=Shrink.NEVER),
    ]
    assembler = ContextAssembler(counter, layouts=one_system_layouts(counter, joined=True))
    ctx = assembler.assemble(items, budget=Budget.coerce(500))
    sent = ctx.to_messages()
    assert [m["role"] for m in sent] == ["system", "user"]
    prefix, kept = split_prefix(ctx, {"own", "q"})
    assert prefix == "## Pinned facts\n- Ana is vegetarian.\n" and kept == ["own", "q"]
    expected = "Sys.\n\n" + prefix if parts is None else [*parts, {"type": "text", "text": prefix}]
    assert sent[0]["content"] == expected
    assert ctx.tokens_used == counter.count_messages(sent)
