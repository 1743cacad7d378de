"""`CtxBudgetMiddleware` in real ``create_agent`` agents: options, errors, async, memory.

The memory tests use the real embedding model and an embedded Chroma, so they keep to a few
turns; the 200-turn run is in test_agent_200_turns.py.
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models import FakeListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import convert_to_openai_messages
from langchain_core.tools import tool
from lc_fakes import RecordingChatModel

from ctxbudget import Budget, BudgetExceededError, StoreInputError, TokenCounter, UnknownModelError
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.policy.config import MemoryConfig
from langchain_ctxbudget import ChatModelSummarizer, CtxBudgetMiddleware

COUNTER = TokenCounter.for_model("gpt-4o")


@tool
def lookup(query: str) -> str:
    """Look something up."""
    return f"Result for {query}: " + "details " * 40


def tokens_of(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> int:
    schemas = sum(COUNTER.count(json.dumps(t, sort_keys=True, ensure_ascii=False)) for t in tools)
    return COUNTER.count_messages(convert_to_openai_messages(messages)) + schemas


def tool_turn(n: int) -> list[AIMessage]:
    call = {"name": "lookup", "args": {"query": f"q{n}"}, "id": f"c{n}", "type": "tool_call"}
    return [AIMessage("", tool_calls=[call]), AIMessage(f"Answer {n}. " + "blah " * 30)]


def test_the_call_is_trimmed_the_state_is_not() -> None:
    answers = [m for n in range(6) for m in tool_turn(n)]
    model = RecordingChatModel(messages=iter(answers))
    middleware = CtxBudgetMiddleware(model="gpt-4o", budget=600, reserve=100)
    agent = create_agent(model, tools=[lookup], system_prompt="Be brief.", middleware=[middleware])
    messages: list[Any] = []
    for n in range(6):
        messages = agent.invoke({"messages": [*messages, HumanMessage(f"Question {n}")]})[
            "messages"
        ]
    assert len(messages) == 6 * 4  # human, ai call, tool result, ai answer per turn
    sent, tools = model.calls[-1]
    assert tokens_of(sent, tools) <= 500
    assert len(sent) < len(messages)
    # What is sent is the state's own message objects (ids, tool calls and all).
    state_ids = [m.id for m in messages]
    assert all(m.id in state_ids for m in sent[1:])
    assert sent[1:] == [m for m in messages if m.id in {s.id for s in sent[1:]}]


async def test_async_agent_fits_every_call() -> None:
    answers = [m for n in range(5) for m in tool_turn(n)]
    model = RecordingChatModel(messages=iter(answers))
    middleware = CtxBudgetMiddleware(model="gpt-4o", budget=500, reserve=64, pinned=["Fact A."])
    agent = create_agent(model, tools=[lookup], system_prompt="Be brief.", middleware=[middleware])
    messages: list[Any] = []
    for n in range(5):
        state = await agent.ainvoke({"messages": [*messages, HumanMessage(f"Question {n} " * 5)]})
        messages = state["messages"]
    assert len(model.calls) == 10
    for sent, tools in model.calls:
        assert tokens_of(sent, tools) <= 500 - 64
        assert "Fact A." in sent[0].text
        assert isinstance(sent[1], HumanMessage)


class NamedFakeModel(RecordingChatModel):
    """A fake that says which model it stands for, as real chat models do."""

    model_name: str = "gpt-4o-mini"


def test_model_and_window_are_read_from_the_chat_model() -> None:
    model = NamedFakeModel(messages=iter(["hi"]))
    agent = create_agent(model, middleware=[CtxBudgetMiddleware(reserve=1000)])
    agent.invoke({"messages": [HumanMessage("hello")]})
    assert model.calls[0][0][-1].content == "hello"

    anonymous = RecordingChatModel(messages=iter(["hi"]))
    agent = create_agent(anonymous, middleware=[CtxBudgetMiddleware(budget=1000)])
    with pytest.raises(UnknownModelError, match="model="):
        agent.invoke({"messages": [HumanMessage("hello")]})


class LocalFakeModel(RecordingChatModel):
    """A model ctxbudget does not know, with a LangChain model profile."""

    model_name: str = "phi3:mini"


class ChatOllama(RecordingChatModel):
    """Stands in for langchain_ollama.ChatOllama: its window is its num_ctx."""

    model: str = "llama3.1:8b"
    num_ctx: int | None = None


@pytest.mark.parametrize("name", ["openai:gpt-4o", "azure_openai:gpt-4o", "gpt-4o-2024-08-06"])
def test_a_model_named_as_create_agent_names_it(name: str) -> None:
    model = RecordingChatModel(messages=iter(["hi"]))
    middleware = CtxBudgetMiddleware(model=name, reserve=1000)
    assert middleware._budget == Budget.for_model("gpt-4o", reserve=1000)
    create_agent(model, middleware=[middleware]).invoke({"messages": [HumanMessage("hello")]})
    assert model.calls[0][0][-1].content == "hello"


def test_an_unknown_model_gets_its_window_from_the_options_or_its_profile() -> None:
    local = LocalFakeModel(messages=iter(["hi", "hi", "hi"]))
    history = [HumanMessage("word " * 300, id="old"), AIMessage("ok", id="a"), HumanMessage("hi")]
    for middleware in (
        CtxBudgetMiddleware(budget=200),  # the window given, the model from the request
        CtxBudgetMiddleware(model=local, budget=200),  # the chat model itself as model=
    ):
        create_agent(local, middleware=[middleware]).invoke({"messages": history})
        assert [m.id for m in local.calls[-1][0]][-1:] == [history[-1].id]
        assert "old" not in [m.id for m in local.calls[-1][0]]  # 300 words do not fit in 200
    profiled = LocalFakeModel(messages=iter(["hi"]), profile={"max_input_tokens": 200})
    create_agent(profiled, middleware=[CtxBudgetMiddleware()]).invoke({"messages": history})
    assert "old" not in [m.id for m in profiled.calls[-1][0]]
    with pytest.raises(UnknownModelError, match="phi3:mini"):
        unknown = LocalFakeModel(messages=iter(["hi"]))
        create_agent(unknown, middleware=[CtxBudgetMiddleware()]).invoke({"messages": history})


def test_an_ollama_model_is_budgeted_to_its_num_ctx_never_the_model_card(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Without num_ctx the middleware asks the Ollama server: none answers on a closed port.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    monkeypatch.setenv("OLLAMA_HOST", f"http://127.0.0.1:{closed}")
    history = [HumanMessage("word " * 300, id="old"), AIMessage("ok", id="a"), HumanMessage("hi")]
    served = ChatOllama(messages=iter(["hi"]), num_ctx=200)
    create_agent(served, middleware=[CtxBudgetMiddleware()]).invoke({"messages": history})
    assert "old" not in [m.id for m in served.calls[-1][0]]
    with pytest.raises(ValueError, match="num_ctx"):  # 131,072 would be cut silently by Ollama
        create_agent(ChatOllama(messages=iter(["hi"])), middleware=[CtxBudgetMiddleware()]).invoke(
            {"messages": history}
        )


def test_a_request_that_cannot_fit_raises_with_the_numbers() -> None:
    model = RecordingChatModel(messages=iter(["hi"]))
    tight = CtxBudgetMiddleware(model="gpt-4o", budget=120, pinned=["A long fact. " * 40])
    with pytest.raises(BudgetExceededError, match="120"):
        create_agent(model, middleware=[tight]).invoke({"messages": [HumanMessage("hello")]})
    tools = CtxBudgetMiddleware(model="gpt-4o", budget=30)
    with pytest.raises(BudgetExceededError, match="tool schemas"):
        create_agent(model, tools=[lookup], middleware=[tools]).invoke(
            {"messages": [HumanMessage("hi")]}
        )
    assert model.calls == []  # nothing was sent


def test_options_are_checked() -> None:
    with pytest.raises(ValueError, match="either budget"):
        CtxBudgetMiddleware(budget=Budget(window=1000), reserve=500)
    with pytest.raises(ValueError, match="budget= only"):
        CtxBudgetMiddleware(budget=1000, max_tokens=500)
    with pytest.warns(DeprecationWarning, match="max_tokens= is now budget="):
        old = CtxBudgetMiddleware(max_tokens=1000)
    assert old._max_tokens == 1000
    with pytest.warns(DeprecationWarning, match="token_counter= is now counter="):
        CtxBudgetMiddleware(token_counter="gpt-4o")
    with pytest.raises(ValueError, match="list of facts"):
        CtxBudgetMiddleware(model="gpt-4o", pinned="one fact")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="memory"):
        CtxBudgetMiddleware(
            model="gpt-4o", summarizer=ChatModelSummarizer(FakeListChatModel(responses=["x"]))
        )
    with pytest.raises(UnknownModelError):
        CtxBudgetMiddleware(model="no-such-model")


def test_a_budget_with_floors_is_used_as_given() -> None:
    model = RecordingChatModel(messages=iter(["ok"]))
    budget = Budget(window=300, reserve=50, caps={40: 100})
    agent = create_agent(model, middleware=[CtxBudgetMiddleware(model="gpt-4o", budget=budget)])
    history = [
        HumanMessage(f"turn {i} " * 10) if i % 2 == 0 else AIMessage("ok " * 10) for i in range(9)
    ]
    agent.invoke({"messages": history})
    sent, _ = model.calls[0]
    assert COUNTER.count_messages(convert_to_openai_messages(sent[-3:])) - 3 <= 100
    assert sent[-1].content == history[-1].content


def test_session_and_user_come_from_arguments_context_or_config(memory: ContextMemory) -> None:
    by_argument = CtxBudgetMiddleware(model="gpt-4o", memory=memory, session_id="s", user_id="u")
    from_context = CtxBudgetMiddleware(model="gpt-4o", memory=memory)
    runtime = SimpleNamespace(
        context={"session_id": "ctx-s", "user_id": "ctx-u"}, execution_info=None
    )
    assert by_argument._identity(runtime) == ("s", "u")  # type: ignore[arg-type]
    assert from_context._identity(runtime) == ("ctx-s", "ctx-u")  # type: ignore[arg-type]

    @dataclass
    class Context:
        session_id: str

    runtime = SimpleNamespace(context=Context("dc"), execution_info=None)
    assert from_context._identity(runtime) == ("dc", None)  # type: ignore[arg-type]
    runtime = SimpleNamespace(context=None, execution_info=SimpleNamespace(thread_id="t1"))
    assert from_context._identity(runtime) == ("t1", None)  # type: ignore[arg-type]
    with pytest.raises(StoreInputError, match="session id"):
        from_context._identity(SimpleNamespace(context=None, execution_info=None))  # type: ignore[arg-type]


@pytest.mark.slow
def test_memory_stores_the_conversation_and_recalls_what_history_lost(
    memory: ContextMemory,
) -> None:
    memory.add_documents([("visa", "Portuguese residence permits are renewed at AIMA offices.")])
    answers = [
        AIMessage("Noted, Beatriz lives in Coimbra."),
        *tool_turn(1),
        AIMessage("The train to Porto leaves at 9:05. " * 8),
        AIMessage("I will remember that."),
    ]
    model = RecordingChatModel(messages=iter(answers))
    middleware = CtxBudgetMiddleware(
        model="gpt-4o", budget=450, reserve=50, memory=memory, pinned=["Call the user Ana."]
    )
    agent = create_agent(
        model,
        tools=[lookup],
        system_prompt="You are Ana's assistant.",
        middleware=[middleware],
        context_schema=dict,
    )
    context = {"session_id": "ana-1", "user_id": "ana"}
    questions = [
        "My sister Beatriz lives in Coimbra.",
        "Look up the train times for the weekend trip, please, with all the details.",
        "And when does the first train to Porto leave on Saturday morning? " * 3,
        "Where does my sister live, by the way? And should I renew my residence permit?",
    ]
    messages: list[Any] = []
    for turn, question in enumerate(questions):
        messages = agent.invoke({"messages": [*messages, HumanMessage(question)]}, context=context)[
            "messages"
        ]
        if turn == 0:
            memory.pin(user_id="ana", text="Ana's passport expires in March 2027.")

    stored = memory.history("ana-1")
    assert [r.id for r in stored] == [m.id for m in messages]  # every message, once, in order
    assert {r.user_id for r in stored} == {"ana"}
    assert stored[3].tool_calls == ("c1",) and stored[4].tool_call_id == "c1"

    for sent, tools in model.calls:
        assert tokens_of(sent, tools) <= 400
        assert isinstance(sent[1], HumanMessage)
        # A memory never repeats a turn the history kept.
        for message in sent[1:]:
            if message.text:
                assert f": {message.text}" not in sent[0].text
    sent, tools = model.calls[-1]
    system = sent[0].text
    assert system.startswith("You are Ana's assistant.")
    assert "Call the user Ana." in system
    assert "Ana's passport expires in March 2027." in system  # a memory pin made at turn 1
    history_text = " ".join(m.text for m in sent[1:])
    assert "Coimbra" not in history_text  # the first turn was cut from the history...
    assert "Coimbra" in system  # ...and came back as a memory
    assert "AIMA" in system  # a document
    assert isinstance(sent[1], HumanMessage)


@pytest.mark.slow
def test_summaries_stand_in_for_the_turns_that_no_longer_fit(tmp_path: Any, embedder: Any) -> None:
    memory = ContextMemory(
        path=tmp_path / "m", embedder=embedder, config=MemoryConfig(recent_messages=4)
    )
    summarizer = ChatModelSummarizer(
        FakeListChatModel(responses=["Ana planned a Porto trip with Beatriz."])
    )
    old: list[BaseMessage] = []
    for i in range(17):
        old += [
            HumanMessage(f"Old question {i} " * 6, id=f"h{i}"),
            AIMessage(f"Old answer {i} " * 6, id=f"a{i}"),
        ]
    model = RecordingChatModel(messages=iter(["First.", "Second."]))
    middleware = CtxBudgetMiddleware(
        model="gpt-4o", budget=400, memory=memory, session_id="s1", summarizer=summarizer
    )
    agent = create_agent(model, middleware=[middleware])
    state = agent.invoke({"messages": [*old, HumanMessage("Hi again")]})
    summaries = memory.store.find(namespace=memory.namespace, kinds=["summary"], session_id="s1")
    assert len(summaries) == 1 and len(summaries[0].summary_of) == 30
    assert summaries[0].summary_of[0] == "h0"  # it covers the state's messages, by id

    agent.invoke({"messages": [*state["messages"], HumanMessage("What did we plan?")]})
    sent, _ = model.calls[-1]
    assert "Ana planned a Porto trip with Beatriz." in sent[0].text
    assert COUNTER.count_messages(convert_to_openai_messages(sent)) <= 400
    assert not any(m.id == "h0" for m in sent)
    memory.close()


def test_a_state_without_a_system_prompt_or_facts_sends_no_system_message() -> None:
    model = RecordingChatModel(messages=iter(["ok"]))
    agent = create_agent(model, middleware=[CtxBudgetMiddleware(model="gpt-4o", budget=200)])
    agent.invoke({"messages": [SystemMessage("From the state."), HumanMessage("hi")]})
    sent, _ = model.calls[0]
    assert [m.type for m in sent] == ["system", "human"]
    assert sent[0].text == "From the state."  # sent as given
    orphan = RecordingChatModel(messages=iter(["ok"]))
    agent = create_agent(orphan, middleware=[CtxBudgetMiddleware(model="gpt-4o", budget=200)])
    agent.invoke({"messages": [ToolMessage("stray result", tool_call_id="x"), HumanMessage("hi")]})
    assert [m.type for m in orphan.calls[0][0]] == ["human"]


@pytest.mark.slow
async def test_async_agent_with_memory_stores_and_recalls(memory: ContextMemory) -> None:
    memory.pin("async-1", "Ana prefers window seats.")
    model = RecordingChatModel(messages=iter(["Noted.", "Window seat booked."]))
    middleware = CtxBudgetMiddleware(model="gpt-4o", budget=400, memory=memory)
    agent = create_agent(model, system_prompt="Be brief.", middleware=[middleware])
    config = {"configurable": {"thread_id": "async-1"}}
    state = await agent.ainvoke({"messages": [HumanMessage("Book my train to Porto.")]}, config)
    state = await agent.ainvoke(
        {"messages": [*state["messages"], HumanMessage("Which seat?")]}, config
    )
    assert [r.id for r in memory.history("async-1")] == [m.id for m in state["messages"]]
    sent, _ = model.calls[-1]
    assert "Ana prefers window seats." in sent[0].text


def test_calls_with_memory_are_in_the_inclusion_log(memory: ContextMemory) -> None:
    model = RecordingChatModel(messages=iter([AIMessage("Noted."), AIMessage("Coimbra.")]))
    seen: list[Any] = []
    middleware = CtxBudgetMiddleware(
        model="gpt-4o", budget=400, memory=memory, on_context=seen.append
    )
    agent = create_agent(model, middleware=[middleware], context_schema=dict)
    context = {"session_id": "logged", "user_id": "u-log"}
    messages: list[Any] = []
    for question in ("My sister lives in Coimbra.", "Where does my sister live?"):
        messages = agent.invoke({"messages": [*messages, HumanMessage(question)]}, context=context)[
            "messages"
        ]
    memory.flush()
    records = memory.contexts("logged")
    assert len(records) == 2  # one per model call, newest first
    assert records[0].user_id == "u-log"
    assert [entry.id for entry in records[0].included] == seen[-1].context.included_ids
    assert records[0].tokens_used == seen[-1].context.tokens_used


def test_extra_files_go_in_the_system_message_of_every_call(tmp_path: Path) -> None:
    from ctxbudget import file_item

    (tmp_path / "notes.md").write_text("Deploy with make release.\n", encoding="utf-8")
    model = RecordingChatModel(messages=iter([AIMessage("Sure.")]))
    middleware = CtxBudgetMiddleware(
        model="gpt-4o", budget=300, extra=[file_item(tmp_path / "notes.md", root=tmp_path)]
    )
    agent = create_agent(model, system_prompt="Be brief.", middleware=[middleware])
    agent.invoke({"messages": [HumanMessage("How do I deploy?")]})
    sent, _ = model.calls[-1]
    assert sent[0].type == "system"
    assert sent[0].text.startswith("Be brief.")
    assert "notes.md" in sent[0].text
    assert "Deploy with make release." in sent[0].text
