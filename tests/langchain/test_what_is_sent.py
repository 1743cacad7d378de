"""What is sent is exactly what was chosen, through the LangChain adapter.

Properties over generated agent sessions (user turns, assistant turns with one or several tool
calls, invalid tool calls, tool results, equal texts, names, caller ids drawn from ctxbudget's
own vocabulary) run through a real ``create_agent`` agent with `CtxBudgetMiddleware`:

* every request fits ``window - reserve`` (tool schemas included);
* the messages the fake model receives are exactly the report's included items, rendered
  (roles, content, names, tool calls; the state's own ids);
* after the system message, the conversation starts with a user turn, every tool call (valid or
  invalid) is answered by all its results and every result follows its call;
* the system prompt and the pinned facts are always sent, whatever ids the messages carry.

And regression tests for each bug of the issue ("What is sent is exactly what was chosen").
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain.agents.middleware import ModelRequest
from langchain.agents.middleware.types import ModelResponse
from langchain_core.language_models import FakeListChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from lc_fakes import RecordingChatModel

from ctxbudget import AssembledContext, ContextAssembler, InvalidItemError, Tier, TokenCounter
from ctxbudget.core.ids import is_internal
from ctxbudget.core.toolcalls import tool_call
from ctxbudget.embed.local import LocalEmbedder
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.policy.config import MemoryConfig
from langchain_ctxbudget import (
    ChatModelSummarizer,
    CtxBudgetChatMessageHistory,
    CtxBudgetMiddleware,
)
from langchain_ctxbudget.convert import item_of

COUNTER = TokenCounter.for_model("gpt-4o")
SYSTEM_PROMPT = "You are a careful assistant."
PINNED = ("The user is Ana.", "Answer in English.")
# Ids a caller may give that look like ctxbudget's own (before the internal id space existed,
# "system" and "pinned:0" made the middleware drop the system prompt and the pinned facts).
CALLER_IDS = ["system", "query", "pinned:0", "pinned:1", "tool:x", "summary:s:0-3", "memory:m1"]
WORDS = ["lisbon", "train", "porto", "the", "visa", "ok", "weather", "sister", "äöü", "日本"]


# -- generated sessions -----------------------------------------------------------------------
@st.composite
def sessions(draw: st.DrawFn, max_turns: int = 8) -> list[BaseMessage]:
    """A long agent session, oldest first, ending with a user turn (the question asked)."""
    texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=12).map(" ".join)
    names = st.one_of(st.none(), st.sampled_from(["ana", "bot", "search"]))
    messages: list[BaseMessage] = []
    calls = itertools.count()
    for _ in range(draw(st.integers(1, max_turns))):
        messages.append(HumanMessage(draw(texts), name=draw(names)))
        for _step in range(draw(st.integers(0, 3))):
            valid: list[dict[str, Any]] = []
            invalid: list[dict[str, Any]] = []
            for _call in range(draw(st.integers(1, 3))):
                call_id = f"call_{next(calls)}"
                if draw(st.booleans()) and draw(st.booleans()):
                    invalid.append(
                        {
                            "type": "invalid_tool_call",
                            "id": call_id,
                            "name": "search",
                            "args": '{"q": "' + draw(texts),  # malformed JSON, as models emit
                            "error": None,
                        }
                    )
                else:
                    args = {"q": draw(texts)}
                    valid.append(
                        {"type": "tool_call", "id": call_id, "name": "search", "args": args}
                    )
            content = draw(st.sampled_from(["", "Let me look.", "ok"]))
            messages.append(AIMessage(content, tool_calls=valid, invalid_tool_calls=invalid))
            ids = [c["id"] for c in [*valid, *invalid]]
            for call_id in draw(st.permutations(ids)):
                messages.append(
                    ToolMessage(draw(texts), tool_call_id=call_id, name=draw(names) or "search")
                )
        if draw(st.booleans()):
            messages.append(AIMessage(draw(texts), name=draw(names)))
    messages.append(HumanMessage(draw(texts)))
    # Caller ids: some from ctxbudget's old vocabulary, the rest LangGraph's (uuid4); unique in
    # the session, as LangGraph's add_messages keeps them.
    pool = draw(st.permutations(CALLER_IDS))
    taken = iter(pool)
    for message in messages:
        if draw(st.integers(0, 3)) == 0:
            message.id = next(taken, None)
    return messages


# -- what the model received, and the report behind it -----------------------------------------
@contextmanager
def reports() -> Iterator[list[AssembledContext]]:
    """Every AssembledContext the core makes meanwhile (the middleware's last one is sent)."""
    made: list[AssembledContext] = []
    original = ContextAssembler.assemble

    def spy(self: ContextAssembler, *args: Any, **kwargs: Any) -> AssembledContext:
        context = original(self, *args, **kwargs)
        made.append(context)
        return context

    with patch.object(ContextAssembler, "assemble", spy):
        yield made


def sent_form(message: BaseMessage) -> dict[str, Any]:
    """A message as a chat model sends it: OpenAI form, invalid tool calls included."""
    item = item_of(message, id="x", index=0)
    out: dict[str, Any] = {"role": item.role, "content": item.text}
    if item.name:
        out["name"] = item.name
    calls = item.metadata.get("tool_calls")
    if calls:
        out["tool_calls"] = [
            {"id": c["id"], "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
            for c in calls
        ]
    if item.tool_call_id:
        out["tool_call_id"] = item.tool_call_id
    return out


def rendered_form(message: dict[str, Any]) -> dict[str, Any]:
    """One of `AssembledContext.to_messages`, in the shape of `sent_form`."""
    out: dict[str, Any] = {"role": message["role"], "content": message.get("content") or ""}
    if message.get("name"):
        out["name"] = message["name"]
    calls = message.get("tool_calls")
    if calls:
        out["tool_calls"] = [
            {"id": c["id"], "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
            for c in calls
        ]
    if message.get("tool_call_id"):
        out["tool_call_id"] = message["tool_call_id"]
    return out


def conversation_problems(sent: list[BaseMessage]) -> list[str]:
    """What a provider would reject, after the system message(s)."""
    problems: list[str] = []
    conversation = list(itertools.dropwhile(lambda m: isinstance(m, SystemMessage), sent))
    if conversation and not isinstance(conversation[0], HumanMessage):
        problems.append(f"starts with a {conversation[0].type} message")
    open_calls: list[str] = []
    for index, message in enumerate(conversation):
        if isinstance(message, ToolMessage):
            if message.tool_call_id not in open_calls:
                problems.append(f"message {index}: result of {message.tool_call_id!r} has no call")
            else:
                open_calls.remove(message.tool_call_id)
            continue
        if open_calls:
            problems.append(f"message {index}: calls {open_calls} have no result")
        open_calls = []
        if isinstance(message, AIMessage):
            ids = [c["id"] for c in message.tool_calls] + [
                str(c["id"]) for c in message.invalid_tool_calls
            ]
            open_calls = list(ids)
    if open_calls:
        problems.append(f"calls {open_calls} have no result")
    return problems


def check_call(
    sent: list[BaseMessage],
    tools: list[dict[str, Any]],
    context: AssembledContext,
    available: int,
) -> None:
    """The invariants of one model call."""
    schemas = sum(COUNTER.count(json.dumps(t, sort_keys=True, ensure_ascii=False)) for t in tools)
    rendered = context.to_messages()
    # Exactly the report's included items, rendered: roles, content, names, tool calls.
    expected = [rendered_form(m) for m in rendered]
    # The middleware sends the rendered system messages (prefix, memories) as one: same text,
    # one message overhead less.
    head = list(itertools.takewhile(lambda m: m["role"] == "system", expected))
    if head:
        joined = {"role": "system", "content": "".join(m["content"] for m in head)}
        expected = [joined, *expected[len(head) :]]
    assert [sent_form(m) for m in sent] == expected
    history = [m for m in sent if not isinstance(m, SystemMessage)]
    # History items are the state's messages (memories copied from it go in the system message).
    included = [it for it in context.included if it.tier == Tier.RECENT and not is_internal(it.id)]
    assert [m.id for m in history] == [it.id for it in included]  # the state's own ids
    # Fits: what the model is billed for, counted independently of the adapter.
    billed = COUNTER.count_messages([{k: v for k, v in m.items()} for m in rendered])
    assert billed + schemas <= available
    assert conversation_problems(sent) == []
    # The system prompt and every pinned fact, whatever ids the caller's messages carry.
    assert isinstance(sent[0], SystemMessage)
    assert sent[0].text.startswith(SYSTEM_PROMPT)
    for fact in PINNED:
        assert fact in sent[0].text


def agent_of(model: RecordingChatModel, middleware: CtxBudgetMiddleware) -> Any:
    return create_agent(
        model,
        system_prompt=SYSTEM_PROMPT,
        middleware=[middleware],
        context_schema=dict,
    )


# -- properties ----------------------------------------------------------------------------
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session=sessions(), window=st.integers(min_value=180, max_value=900))
def test_every_call_sends_exactly_the_report_and_a_valid_conversation(
    session: list[BaseMessage], window: int
) -> None:
    model = RecordingChatModel(messages=itertools.repeat(AIMessage("ok")))
    reserve = 40
    middleware = CtxBudgetMiddleware(
        model="gpt-4o", budget=window, reserve=reserve, pinned=list(PINNED)
    )
    with reports() as made:
        agent_of(model, middleware).invoke({"messages": session})
    assert len(model.calls) == 1
    sent, tools = model.calls[0]
    check_call(sent, tools, made[-1], window - reserve)
    # The newest question is always sent.
    assert sent[-1].text == session[-1].text


@pytest.fixture(scope="module")
def shared_memory(tmp_path_factory: pytest.TempPathFactory, embedder: LocalEmbedder) -> Any:
    """One embedded memory for the slow properties (each example has its own session)."""
    folder: Path = tmp_path_factory.mktemp("what-is-sent")
    memory = ContextMemory(
        path=folder / "chroma", embedder=embedder, config=MemoryConfig(recent_messages=6)
    )
    yield memory
    memory.close()


@pytest.mark.slow
@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    first=sessions(max_turns=6),
    second=sessions(max_turns=6),
    window=st.integers(min_value=260, max_value=700),
)
def test_with_memory_and_a_summarizer_every_call_is_exact_and_every_message_stored_once(
    shared_memory: ContextMemory,
    first: list[BaseMessage],
    second: list[BaseMessage],
    window: int,
) -> None:
    summarizer = ChatModelSummarizer(
        FakeListChatModel(responses=["Ana asked about trains and visas."] * 50)
    )
    model = RecordingChatModel(messages=itertools.repeat(AIMessage("ok")))
    reserve = 40
    middleware = CtxBudgetMiddleware(
        model="gpt-4o",
        budget=window,
        reserve=reserve,
        pinned=list(PINNED),
        memory=shared_memory,
        summarizer=summarizer,
    )
    agent = agent_of(model, middleware)
    session = f"s-{uuid.uuid4().hex[:8]}"
    states: list[list[BaseMessage]] = []
    with reports() as made:
        # Two threads of one session; the caller's ids may be equal across them.
        for thread in (first, second):
            before = len(made)
            state = agent.invoke({"messages": thread}, context={"session_id": session})
            states.append(state["messages"])
            # The middleware's own assembly: the memory's (gathering candidates) has a query.
            own = [c for c in made[before:] if not any(it.tier == Tier.QUERY for it in c.included)]
            sent, tools = model.calls[-1]
            check_call(sent, tools, own[-1], window - reserve)
    stored = [r.id for r in shared_memory.history(session)]
    first_ids = [m.id for m in states[0]]
    # Every message of the first thread, once, in order; then the second thread's, except a
    # caller id the first thread already used (the memory keeps the first message under it).
    second_ids = [m.id for m in states[1] if m.id not in set(first_ids)]
    assert stored == first_ids + second_ids


# -- regressions ----------------------------------------------------------------------------
@pytest.mark.parametrize("caller_id", ["system", "pinned:0", "pinned:1", "query", "memory:x"])
def test_a_message_id_like_an_internal_one_never_displaces_the_prompt_or_facts(
    caller_id: str,
) -> None:
    model = RecordingChatModel(messages=iter(["ok"]))
    middleware = CtxBudgetMiddleware(model="gpt-4o", budget=400, pinned=list(PINNED))
    agent_of(model, middleware).invoke({"messages": [HumanMessage("Hello", id=caller_id)]})
    sent, _ = model.calls[0]
    assert [m.type for m in sent] == ["system", "human"]
    assert sent[0].text.startswith(SYSTEM_PROMPT)
    assert all(fact in sent[0].text for fact in PINNED)
    assert sent[1].id == caller_id


def test_a_message_id_in_the_internal_space_is_refused() -> None:
    model = RecordingChatModel(messages=iter(["ok"]))
    middleware = CtxBudgetMiddleware(model="gpt-4o", budget=400)
    with pytest.raises(InvalidItemError, match="ctxbudget:"):
        agent_of(model, middleware).invoke(
            {"messages": [HumanMessage("Hello", id="ctxbudget:system")]}
        )
    assert model.calls == []


def direct_call(
    middleware: CtxBudgetMiddleware, messages: list[BaseMessage], thread: str | None
) -> list[BaseMessage]:
    """One model call of the middleware outside an agent (messages keep no LangGraph ids)."""
    runtime = SimpleNamespace(
        context={"session_id": "shared"}, execution_info=SimpleNamespace(thread_id=thread)
    )
    request = ModelRequest(
        model=RecordingChatModel(messages=iter(["ok"])),
        messages=list(messages),
        system_message=SystemMessage(SYSTEM_PROMPT),
        runtime=runtime,  # type: ignore[arg-type]
    )
    seen: list[BaseMessage] = []

    def handler(prepared: ModelRequest[Any]) -> ModelResponse[Any]:
        seen.extend(prepared.messages)
        return ModelResponse(result=[AIMessage("ok")])

    middleware.wrap_model_call(request, handler)
    return seen


@pytest.mark.slow
def test_messages_without_ids_of_two_threads_of_one_session_are_each_stored_once(
    memory: ContextMemory,
) -> None:
    middleware = CtxBudgetMiddleware(model="gpt-4o", budget=2000, memory=memory)
    one = [HumanMessage("Hi"), AIMessage("Hello!"), HumanMessage("I live in Lisbon.")]
    two = [HumanMessage("Hi"), AIMessage("Hello again!"), HumanMessage("I moved to Porto.")]
    direct_call(middleware, one, "t1")
    direct_call(middleware, one, "t1")  # the same thread again: nothing new
    direct_call(middleware, two, "t2")  # same positions, same first text: still new messages
    direct_call(middleware, [*one, AIMessage("Noted."), HumanMessage("Thanks")], "t1")
    texts = [r.text for r in memory.history("shared")]
    assert texts == [
        "Hi",
        "Hello!",
        "I live in Lisbon.",
        "Hi",
        "Hello again!",
        "I moved to Porto.",
        "Noted.",
        "Thanks",
    ]


def test_keys_of_messages_without_ids_are_stable_and_never_shared() -> None:
    from langchain_ctxbudget.identity import message_keys

    one = [HumanMessage("Hi"), AIMessage("Hello!"), HumanMessage("Hi")]
    again = [HumanMessage("Hi"), AIMessage("Hello!"), HumanMessage("Hi"), AIMessage("Bye")]
    assert message_keys(one, "s", "t1") == message_keys(again, "s", "t1")[:3]
    assert len(set(message_keys(one, "s", "t1"))) == 3  # equal texts, different messages
    assert not set(message_keys(one, "s", "t1")) & set(message_keys(one, "s", "t2"))
    other = [HumanMessage("Hi"), AIMessage("Hello there"), HumanMessage("Hi")]
    assert message_keys(one, "s", None)[2] != message_keys(other, "s", None)[2]


def test_chat_history_keeps_an_ai_message_with_only_invalid_tool_calls(
    memory: ContextMemory,
) -> None:
    history = CtxBudgetChatMessageHistory(memory, "inv")
    bad = {"type": "invalid_tool_call", "id": "c1", "name": "search", "args": '{"q": ', "error": ""}
    messages = [
        HumanMessage("Search Lisbon"),
        AIMessage("", invalid_tool_calls=[bad]),
        ToolMessage("Error: bad arguments", tool_call_id="c1"),
        AIMessage("Sorry, again?"),
    ]
    history.add_messages(messages)
    back = history.messages
    assert [m.type for m in back] == ["human", "ai", "tool", "ai"]
    call = back[1]
    assert isinstance(call, AIMessage)
    assert call.content == ""  # no placeholder
    assert call.tool_calls == []
    assert [(c["id"], c["name"], c["args"]) for c in call.invalid_tool_calls] == [
        ("c1", "search", '{"q": ')
    ]
    assert isinstance(back[2], ToolMessage) and back[2].tool_call_id == "c1"


def test_a_stored_call_with_malformed_arguments_reads_back_as_an_invalid_call(
    memory: ContextMemory,
) -> None:
    memory.add_messages(
        "malformed",
        [
            {"role": "user", "text": "Weather?"},
            {"role": "assistant", "text": "", "tool_calls": [tool_call("c9", "weather", "{oops")]},
            {"role": "tool", "text": "unknown", "tool_call_id": "c9"},
        ],
        progress=False,
    )
    back = CtxBudgetChatMessageHistory(memory, "malformed").messages  # no JSONDecodeError
    call = back[1]
    assert isinstance(call, AIMessage) and call.content == ""
    assert call.tool_calls == []
    assert call.invalid_tool_calls[0]["args"] == "{oops"
    assert call.invalid_tool_calls[0]["id"] == "c9"


def test_a_tool_call_only_turn_reads_back_without_a_placeholder(memory: ContextMemory) -> None:
    history = CtxBudgetChatMessageHistory(memory, "calls")
    call = {"type": "tool_call", "id": "c1", "name": "search", "args": {"q": "x"}}
    history.add_messages(
        [
            HumanMessage("Search x"),
            AIMessage("", tool_calls=[call]),
            ToolMessage("found x", tool_call_id="c1"),
        ]
    )
    back = history.messages[1]
    assert isinstance(back, AIMessage)
    assert back.content == ""
    assert [(c["id"], c["args"]) for c in back.tool_calls] == [("c1", {"q": "x"})]


def test_chat_history_refuses_internal_ids(memory: ContextMemory) -> None:
    history = CtxBudgetChatMessageHistory(memory, "ids")
    with pytest.raises(InvalidItemError, match="ctxbudget:"):
        history.add_messages([HumanMessage("hi", id="ctxbudget:query")])
    assert history.messages == []


def test_with_excerpts_the_model_receives_exactly_the_excerpts_the_report_lists(
    tmp_path: Path, embedder: LocalEmbedder
) -> None:
    # `MemoryConfig.excerpts`: the memories the middleware adds are the sentences that hold the
    # question's words; what LangChain sends after converting them is exactly the report.
    memory = ContextMemory(
        path=tmp_path / "chroma",
        embedder=embedder,
        config=MemoryConfig(excerpts=True, recent_messages=4),
        write_behind=False,
    )
    hobbies = ["pottery", "camping", "violin", "painting", "swimming", "chess"]
    filler = (
        "The weather has been grey all week and the trains were late again. I finally "
        "finished the report for work, which took far longer than planned."
    )
    past = [
        {"id": f"p{n}", "role": "user", "text": f"{filler} My favourite hobby now is {hobby}."}
        for n, hobby in enumerate(hobbies)
    ]
    memory.add_messages("s-ex", past, progress=False)
    model = RecordingChatModel(messages=itertools.repeat(AIMessage("ok")))
    middleware = CtxBudgetMiddleware(
        model="gpt-4o", budget=420, reserve=40, memory=memory, pinned=list(PINNED)
    )
    try:
        with reports() as made:
            agent_of(model, middleware).invoke(
                {"messages": [HumanMessage("Which hobby did I mention?", id="q1")]},
                context={"session_id": "s-ex"},
            )
        own = [c for c in made if not any(it.tier == Tier.QUERY for it in c.included)]
        sent, tools = model.calls[-1]
        check_call(sent, tools, own[-1], 420 - 40)
        cut = [it for it in own[-1].included if "excerpt" in it.metadata]
        assert cut, "no memory was offered as an excerpt"
        system = str(sent[0].content)
        for item in cut:
            assert item.text in system and "\u2026" in item.text and "hobby" in item.text
        # The sentences without the question's words are sent only with the memories kept whole.
        memories = [it for it in own[-1].included if it.tier == Tier.RETRIEVED]
        assert system.count("trains were late") == len(memories) - len(cut)
    finally:
        memory.close()
