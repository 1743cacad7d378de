"""Regression tests of `CtxBudgetMiddleware` found by probing it as a LangChain user would.

Each test drives a real ``create_agent`` agent (tiktoken, and where the memory is used an
embedded Chroma and the real embedder) with a fake chat model that records what it received
(`lc_fakes.RecordingChatModel`), and checks what the model got against the middleware's report:

* the structured-output tools of ``response_format`` (bound by ``create_agent`` after the
  middleware) are counted in the call's budget, so the request fits the window with them;
* a pinned fact that is not valid Unicode is refused when the middleware is made, naming it;
* a reply length (``max_tokens``) an earlier middleware sets in ``model_settings`` is kept
  free, as the chat model's own is: the provider checks the prompt against the window less it;
* with ``memory=``, what is stored is the agent's state, not what a middleware before this one
  changed for one call: tool results ``ContextEditingMiddleware`` clears stay stored whole (they
  were replaced by ``"[cleared]"``, as edits), and a reminder added to each call is not stored;
  a state that starts with a system message (the request's system message) keeps the
  question's candidates no longer than its run (the model call and the run's end named the
  question by different positions);
* an async ``on_context`` (called, never awaited: it never ran, with only a RuntimeWarning)
  is refused when the middleware is made;
* a stored turn the state no longer holds is offered once (it was offered as its memory and
  again as itself, found by the search, and the report listed the second as a duplicate);
* an ``extra=`` item with an id of ctxbudget's own (``ctxbudget:pinned:0``) is refused;
* the newest ``ChatMessage(role="user")`` is the question (an older ``HumanMessage`` was);
* a message of an image only is stored as ``[image]`` (it was not stored: the chat history
  read back started with the answer);
* options are checked when the middleware is made (``pinned=None``, a float ``session_id``),
  and numbers are ids there as in a run's config (``session_id=7`` raised a TypeError on the
  first call, ``user_id=42`` a `StoreInputError`, ``keep_contexts=np.int64(3)`` was refused).
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import (
    ClearToolUsesEdit,
    ContextEditingMiddleware,
    ModelRequest,
    wrap_model_call,
)
from langchain.agents.structured_output import ProviderStrategy, ToolStrategy
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver
from lc_fakes import RecordingChatModel
from pydantic import BaseModel, Field
from test_what_is_sent import reports

from ctxbudget import TokenCounter
from ctxbudget.errors import ConfigurationError
from ctxbudget.memory.context import ContextMemory
from langchain_ctxbudget import CtxBudgetMiddleware

COUNTER = TokenCounter.for_model("gpt-4o")


class Trip(BaseModel):
    """A trip plan with many fields that the model fills in."""

    city: str = Field(description="the city the user travels to, as the user spelled it")
    days: int = Field(description="how many days the user stays there, nights plus one")
    budget: float = Field(description="the budget of the whole trip in euros, flights included")
    notes: list[str] = Field(description="anything else the user said that matters for the plan")


def schema_tokens(tools: list[dict[str, Any]]) -> int:
    return sum(COUNTER.count(json.dumps(t, sort_keys=True, ensure_ascii=False)) for t in tools)


@pytest.mark.parametrize("response_format", [ToolStrategy(Trip), Trip], ids=["tool", "auto"])
def test_structured_output_tools_count_in_the_budget(response_format: Any) -> None:
    answer = {"city": "Lisbon", "days": 3, "budget": 900.0, "notes": []}
    model = RecordingChatModel(
        messages=iter([AIMessage("", tool_calls=[{"name": "Trip", "args": answer, "id": "s1"}])])
    )
    window, reserve = 400, 50
    middleware = CtxBudgetMiddleware(model="gpt-4o", budget=window, reserve=reserve)
    history = [HumanMessage("word " * 60), AIMessage("answer " * 150), HumanMessage("plan it")]
    with reports() as made:
        state = create_agent(
            model, middleware=[middleware], response_format=response_format
        ).invoke({"messages": history})
    assert state["structured_response"].city == "Lisbon"
    sent, tools = model.calls[0]
    assert [t["function"]["name"] for t in tools] == ["Trip"]
    billed = COUNTER.count_messages(made[-1].to_messages())
    # Without counting the Trip tool: 248 + 177 tokens were sent for 350.
    assert billed + schema_tokens(tools) <= window - reserve
    assert sent[-1].text == "plan it"


def test_a_provider_strategy_counts_its_schema_as_the_tool_it_would_be() -> None:
    from langchain_ctxbudget.call_budgets import response_tools

    tools = response_tools(ProviderStrategy(Trip))
    assert [convert_to_openai_tool(t)["function"]["name"] for t in tools] == ["Trip"]
    assert response_tools(None) == []


def test_a_pinned_fact_with_a_lone_surrogate_is_refused_when_made_naming_it() -> None:
    with pytest.raises(ConfigurationError, match=r"pinned fact 1 holds a lone surrogate U\+DC00"):
        CtxBudgetMiddleware(model="gpt-4o", budget=3000, pinned=["fine", "bad \udc00"])


def test_a_reply_length_set_by_an_earlier_middleware_is_kept_free() -> None:
    @wrap_model_call
    def long_replies(request: ModelRequest[Any], handler: Any) -> Any:
        settings = {**request.model_settings, "max_tokens": 100_000}
        return handler(request.override(model_settings=settings))

    model = RecordingChatModel(messages=iter([AIMessage("ok")]))
    middleware = CtxBudgetMiddleware(model="gpt-4o")
    with reports() as made:
        create_agent(model, middleware=[long_replies, middleware]).invoke(
            {"messages": [HumanMessage("Hello")]}
        )
    # The provider checks the prompt against 128,000 less the 100,000 the reply may take.
    assert made[-1].tokens_available == 128_000 - 100_000


def tool_turns() -> Iterator[AIMessage]:
    """A model that calls the search tool, then answers, turn after turn."""
    for turn in itertools.count(1):
        yield AIMessage(
            "", tool_calls=[{"name": "search", "args": {"q": f"x{turn}"}, "id": f"c{turn}"}]
        )
        yield AIMessage(f"answer {turn}")


@tool
def search(q: str) -> str:
    """Search the knowledge base."""
    return f"Result for {q}: the door code is 4711."


def test_tool_results_a_middleware_clears_for_one_call_stay_stored_whole(
    memory: ContextMemory,
) -> None:
    model = RecordingChatModel(messages=tool_turns(), disable_streaming=True)
    clearing = ContextEditingMiddleware(edits=[ClearToolUsesEdit(trigger=10, keep=1)])
    middleware = CtxBudgetMiddleware(model="gpt-4o", budget=3000, memory=memory)
    agent = create_agent(
        model, tools=[search], middleware=[clearing, middleware], checkpointer=InMemorySaver()
    )
    config: Any = {"configurable": {"thread_id": "codes", "user_id": "ana"}}
    for turn in range(3):
        agent.invoke({"messages": [HumanMessage(f"question {turn}")]}, config)
    sent, _ = model.calls[-1]
    assert "[cleared]" in [m.text for m in sent]  # the model got the cleared results...
    memory.flush()
    results = [r.text for r in memory.history("codes") if r.role == "tool"]
    # ...the memory keeps what the tools returned (they were replaced by "[cleared]").
    assert results == [f"Result for x{turn}: the door code is 4711." for turn in (1, 2, 3)]


def test_a_message_a_middleware_adds_to_each_call_is_not_stored(memory: ContextMemory) -> None:
    made = itertools.count()

    @wrap_model_call
    def remind(request: ModelRequest[Any], handler: Any) -> Any:
        reminder = HumanMessage(f"(reminder {next(made)}: be brief)")
        return handler(request.override(messages=[*request.messages, reminder]))

    model = RecordingChatModel(messages=tool_turns(), disable_streaming=True)
    middleware = CtxBudgetMiddleware(model="gpt-4o", budget=3000, memory=memory)
    agent = create_agent(
        model, tools=[search], middleware=[remind, middleware], checkpointer=InMemorySaver()
    )
    config: Any = {"configurable": {"thread_id": "brief", "user_id": "ana"}}
    for turn in range(2):
        agent.invoke({"messages": [HumanMessage(f"question {turn}")]}, config)
    assert model.calls[-1][0][-1].text == "(reminder 3: be brief)"  # sent, never stored
    memory.flush()
    assert [r.text for r in memory.history("brief") if r.role == "user"] == [
        "question 0",
        "question 1",
    ]


def test_options_are_checked_when_made_and_numbers_are_taken_as_ids(memory: ContextMemory) -> None:
    for options, where in [
        ({"pinned": None}, "pinned must be a list of facts"),
        ({"extra": None}, "extra= is a list of ContextItems"),
        ({"session_id": 2.5}, "session_id must be a non-empty str"),
        ({"user_id": ""}, "user_id must be a non-empty str"),
    ]:
        with pytest.raises(ConfigurationError, match=where):
            CtxBudgetMiddleware(model="gpt-4o", budget=3000, memory=memory, **options)
    middleware = CtxBudgetMiddleware(
        model="gpt-4o",
        budget=3000,
        memory=memory,
        session_id=np.int64(7),  # a numbered session, as LangGraph takes a thread_id of 7
        user_id=42,
        keep_contexts=np.int64(3),
    )
    model = RecordingChatModel(messages=iter([AIMessage("Hello Ana")]))
    create_agent(model, middleware=[middleware]).invoke(
        {"messages": [HumanMessage("Hi")]}, {"configurable": {"thread_id": "t"}}
    )
    memory.flush()
    assert [(r.text, r.user_id) for r in memory.history("7")] == [
        ("Hi", "42"),
        ("Hello Ana", "42"),
    ]
    assert middleware.last_context("t") is not None


def test_a_run_whose_state_starts_with_a_system_message_keeps_no_candidates(
    memory: ContextMemory,
) -> None:
    # The request takes that message as its system message; the run's end reads the state.
    middleware = CtxBudgetMiddleware(model="gpt-4o", budget=2000, memory=memory)
    model = RecordingChatModel(messages=iter([AIMessage("ok"), AIMessage("ok again")]))
    agent = create_agent(model, middleware=[middleware])
    config: Any = {"configurable": {"thread_id": "sys-first", "user_id": "ana"}}
    state = agent.invoke(
        {"messages": [SystemMessage("Be brief."), HumanMessage("Where is Lisbon?")]}, config
    )
    kept = middleware._recalled._items  # noqa: SLF001 - what the middleware keeps between runs
    assert not kept, "candidates kept after the run ended"
    agent.invoke({"messages": [*state["messages"], HumanMessage("And Porto?")]}, config)
    assert not kept
    assert model.calls[-1][0][0].text.startswith("Be brief.")


def test_an_async_on_context_is_refused_rather_than_never_run() -> None:
    async def report(call: Any) -> None:  # would be called, never awaited: never run
        raise AssertionError(call)

    class Reporter:
        async def __call__(self, call: Any) -> None:
            raise AssertionError(call)

    for callback in (report, Reporter()):
        with pytest.raises(ConfigurationError, match="on_context must be a plain function"):
            CtxBudgetMiddleware(model="gpt-4o", budget=500, on_context=callback)
    seen: list[int] = []
    middleware = CtxBudgetMiddleware(
        model="gpt-4o", budget=500, on_context=lambda call: seen.append(call.summary["included"])
    )
    model = RecordingChatModel(messages=iter([AIMessage("ok")]))
    asyncio.run(create_agent(model, middleware=[middleware]).ainvoke({"messages": [("user", "x")]}))
    assert seen == [1]


def test_a_stored_turn_the_state_no_longer_holds_is_offered_once(memory: ContextMemory) -> None:
    """The session's stored turns missing from the state (trimmed, summarized) are offered once.

    Each was offered both as its memory (``ctxbudget:memory:<id>``, from the session's history)
    and as itself (found again by the search): the report listed it twice, the second
    pruned as a ``duplicate`` of the first.
    """
    seen: list[Any] = []
    middleware = CtxBudgetMiddleware(
        model="gpt-4o", budget=3000, memory=memory, on_context=seen.append
    )
    model = RecordingChatModel(messages=itertools.repeat(AIMessage("ok")))
    agent = create_agent(model, middleware=[middleware])
    config = {"configurable": {"thread_id": "t1", "user_id": "ana"}}
    first = [HumanMessage("I live in Lisbon", id="m1"), AIMessage("Nice city", id="m2")]
    agent.invoke({"messages": [*first, HumanMessage("Where do I live?", id="m3")]}, config)
    agent.invoke({"messages": [HumanMessage("Where do I live, again?", id="m5")]}, config)
    context = seen[-1].context
    included = [item.id for item in context.included]
    assert "ctxbudget:memory:m1" in included
    assert [(p.item.id, p.reason.value) for p in context.pruned] == []


def test_an_extra_item_with_an_id_of_ctxbudgets_own_is_refused_when_made() -> None:
    """``extra=[ContextItem("ctxbudget:pinned:0", ...)]`` took a pinned fact's id: cut as its
    "duplicate", the one id was both included and pruned. Refused, as `budget_messages` and
    `ContextMemory.assemble` refuse it (the core's `side_items`)."""
    from ctxbudget import ContextItem, Tier
    from ctxbudget.errors import InvalidItemError

    taken = ContextItem("ctxbudget:pinned:0", "Ana is vegetarian.", tier=Tier.RETRIEVED)
    with pytest.raises(InvalidItemError, match=r"extra\[0\]: id 'ctxbudget:pinned:0'"):
        CtxBudgetMiddleware(model="gpt-4o", pinned=["Ana lives in Lisbon."], extra=[taken])


def test_a_chat_message_of_the_user_is_the_question() -> None:
    """The newest ``ChatMessage(role="user")`` is the question, never pruned; an older human
    message was taken for it (kept alone, without its answer) while the real one could be cut."""
    from langchain_core.messages import ChatMessage

    llm = RecordingChatModel(messages=iter([AIMessage("ok")]))
    seen: list[Any] = []
    middleware = CtxBudgetMiddleware(
        model="gpt-4o",
        budget=40,
        reserve=0,
        history_trim="message",
        on_context=lambda call: seen.append(call.context),
    )
    question = ChatMessage(role="user", content="Where do we eat tonight? " * 3)
    state = [HumanMessage("Old question about trams in Lisbon?"), AIMessage("Trams " * 30)]
    create_agent(llm, middleware=[middleware]).invoke({"messages": [*state, question]})
    assert [m.text for m in llm.calls[0][0]] == [question.text]
    assert {p.reason.value for p in seen[0].pruned} == {"over_budget"}


def test_a_message_of_an_image_only_is_stored_as_its_mark(memory: ContextMemory) -> None:
    """An image-only question was acknowledged and not stored (the memory keeps text): the
    history read back started with the answer. It is stored as ``[image]``, as the LlamaIndex
    adapter stores it."""
    from langchain_ctxbudget import CtxBudgetChatMessageHistory

    history = CtxBudgetChatMessageHistory(memory, "s1", user_id="ana")
    image = {"type": "image", "url": "https://example.com/cat.png"}
    history.add_messages([HumanMessage([image], id="h1"), AIMessage("A cat.", id="a1")])
    assert [(m.type, m.text) for m in history.messages] == [("human", "[image]"), ("ai", "A cat.")]
