"""What was cut, per model call: `CtxBudgetMiddleware`'s contexts, run metadata and DEBUG log.

Real ``create_agent`` agents with LangChain's fake chat model (`lc_fakes.RecordingChatModel`,
which records what it receives). Run metadata is read the way LangSmith gets it, from the
callbacks (a handler that keeps ``on_chat_model_start``'s metadata, and a `BaseTracer` that keeps
every run in memory): nothing goes to the network.

* the `CallContext` of each call (``on_context``, ``last_context``) is the assembly whose
  included history items are exactly the messages the model received;
* the chat model run, and only it, carries that context's summary under ``"ctxbudget"``;
* ``explain()`` is logged at DEBUG, and not even built otherwise;
* concurrent runs on different threads (OS threads and asyncio tasks at once, all inside their
  model calls together) each see only their own contexts and metadata.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import threading
from collections import Counter
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from uuid import UUID

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ModelRequest
from langchain.agents.middleware.types import ModelResponse
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langchain_core.tracers.base import BaseTracer
from langchain_core.tracers.schemas import Run
from lc_fakes import RecordingChatModel

from ctxbudget import AssembledContext, ConfigurationError, PruneReason, Tier
from ctxbudget.core.ids import is_internal
from ctxbudget.memory.context import ContextMemory
from langchain_ctxbudget import CallContext, CtxBudgetMiddleware
from langchain_ctxbudget.observe import METADATA_KEY, budget_summary

SYSTEM_PROMPT = "You are a careful travel assistant."
PINNED = ["The user is Ana."]
SUMMARY_KEYS = {
    "tokens_used",
    "tokens_available",
    "included",
    "pruned",
    "pruned_by_reason",
    "solver",
    "solvers",
    "prefix_tokens",
}


@tool
def lookup(query: str) -> str:
    """Look something up."""
    return f"Result for {query}: " + "details " * 30


def tool_turn(n: int) -> list[AIMessage]:
    call = {"name": "lookup", "args": {"query": f"q{n}"}, "id": f"c{n}", "type": "tool_call"}
    return [AIMessage("", tool_calls=[call]), AIMessage(f"Answer {n}. " + "blah " * 30)]


# -- what the callbacks see --------------------------------------------------------------------
class ModelStarts(BaseCallbackHandler):
    """The metadata of every chat model run, as ``on_chat_model_start`` receives it."""

    def __init__(self) -> None:
        self.metadata: list[dict[str, Any]] = []

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self.metadata.append(dict(metadata or {}))


class MemoryTracer(BaseTracer):
    """Every finished run, kept in memory (what a LangSmith tracer would send)."""

    run_inline = True

    def __init__(self) -> None:
        super().__init__()
        self.runs: list[Run] = []

    def _persist_run(self, run: Run) -> None:
        pass

    def _on_run_update(self, run: Run) -> None:
        self.runs.append(run)

    def of_type(self, run_type: str) -> list[Run]:
        return sorted((r for r in self.runs if r.run_type == run_type), key=lambda r: r.start_time)


def metadata_of(run: Run) -> dict[str, Any]:
    return dict(run.extra.get("metadata", {}))


# -- what the model received, against the context ----------------------------------------------
def assert_sent_is(sent: list[BaseMessage], context: AssembledContext) -> None:
    """The messages the model received are the context's included items, rendered."""
    history = [m for m in sent if not isinstance(m, SystemMessage)]
    kept = [it.id for it in context.included if it.tier == Tier.RECENT and not is_internal(it.id)]
    assert [m.id for m in history] == kept
    rendered = context.to_messages()
    head = list(itertools.takewhile(lambda m: m["role"] == "system", rendered))
    assert isinstance(sent[0], SystemMessage)
    assert sent[0].text == "".join(str(m["content"]) for m in head)
    assert len(sent) == 1 + len(rendered) - len(head)


def agent_with(
    model: RecordingChatModel, middleware: list[AgentMiddleware[Any, Any, Any]], **kw: Any
) -> Any:
    return create_agent(
        model,
        tools=[lookup],
        system_prompt=SYSTEM_PROMPT,
        middleware=middleware,
        context_schema=dict,
        **kw,
    )


# -- per call -----------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_each_calls_context_is_what_was_sent_and_what_the_run_metadata_says(
    mode: str,
) -> None:
    model = RecordingChatModel(messages=iter([m for n in range(4) for m in tool_turn(n)]))
    seen: list[CallContext] = []
    middleware = CtxBudgetMiddleware(
        model="gpt-4o", budget=420, reserve=40, pinned=PINNED, on_context=seen.append
    )
    agent = agent_with(model, [middleware])
    tracer, starts = MemoryTracer(), ModelStarts()
    config: Any = {"configurable": {"thread_id": "ana-1"}, "callbacks": [tracer, starts]}
    messages: list[BaseMessage] = []
    for n in range(4):
        state = {"messages": [*messages, HumanMessage(f"Question {n}: " + "trains " * 20)]}
        context = {"user_id": "ana"}
        if mode == "sync":
            messages = agent.invoke(state, config, context=context)["messages"]
        else:
            messages = (await agent.ainvoke(state, config, context=context))["messages"]

    assert len(seen) == len(model.calls) == 8  # two model calls per turn (tool call, answer)
    for call, (sent, _tools) in zip(seen, model.calls, strict=True):
        assert_sent_is(sent, call.context)
        assert (call.thread_id, call.session_id, call.user_id) == ("ana-1", "ana-1", "ana")
    # Something was cut, and the report says why.
    assert any(p.reason is PruneReason.OVER_BUDGET for p in seen[-1].context.pruned)
    assert middleware.last_context("ana-1") is seen[-1].context
    assert middleware.last_context("someone-else") is None

    # The chat model run of each call carries that call's summary (what LangSmith shows).
    chat_runs = tracer.of_type("llm")
    assert [metadata_of(r)[METADATA_KEY] for r in chat_runs] == [c.summary for c in seen]
    assert [m[METADATA_KEY] for m in starts.metadata] == [c.summary for c in seen]
    for call in seen:
        summary = call.summary
        assert set(summary) == SUMMARY_KEYS
        assert summary == budget_summary(call.context)
        assert json.loads(json.dumps(summary)) == summary  # plain JSON
        assert summary["tokens_used"] == call.context.tokens_used <= summary["tokens_available"]
        assert summary["included"] == len(call.context.included)
        assert (
            summary["pruned"]
            == len(call.context.pruned)
            == sum(summary["pruned_by_reason"].values())
        )
    assert seen[-1].summary["pruned_by_reason"]["over_budget"] > 0
    # Only the model call's runs carry it: not the agent, its nodes, or the tool runs.
    others = [r for r in tracer.runs if r.run_type != "llm"]
    assert others and all(METADATA_KEY not in metadata_of(r) for r in others)
    # LangGraph's own metadata is still there, next to ours.
    assert all(metadata_of(r)["langgraph_node"] == "model" for r in chat_runs)


async def test_astream_events_show_the_model_calls_summary() -> None:
    # A streamed call (GenericFakeChatModel streams text, not tool calls: one plain answer).
    model = RecordingChatModel(messages=iter(["The first train leaves at 06:05."]))
    seen: list[CallContext] = []
    middleware = CtxBudgetMiddleware(model="gpt-4o", budget=420, on_context=seen.append)
    events = agent_with(model, [middleware]).astream_events(
        {"messages": [HumanMessage("Trains to Porto? " * 40)]}, version="v2"
    )
    summaries = [
        e["metadata"][METADATA_KEY] async for e in events if e["event"] == "on_chat_model_start"
    ]
    assert len(summaries) == len(seen) == 1
    assert summaries == [seen[0].summary]
    assert_sent_is(model.calls[0][0], seen[0].context)


@pytest.mark.slow
async def test_with_memory_each_call_names_its_session_and_user(memory: ContextMemory) -> None:
    model = RecordingChatModel(messages=itertools.repeat("Noted."))
    seen: list[CallContext] = []
    middleware = CtxBudgetMiddleware(
        model="gpt-4o", budget=600, memory=memory, on_context=seen.append
    )
    starts = ModelStarts()
    await agent_with(model, [middleware]).ainvoke(
        {"messages": [HumanMessage("I live in Lisbon.")]},
        {"configurable": {"thread_id": "t-1"}, "callbacks": [starts]},
        context={"session_id": "ana-s", "user_id": "ana"},
    )
    [call] = seen
    assert (call.thread_id, call.session_id, call.user_id) == ("t-1", "ana-s", "ana")
    assert_sent_is(model.calls[0][0], call.context)
    assert starts.metadata[0][METADATA_KEY] == call.summary
    assert middleware.last_context("t-1") is call.context


def test_a_run_without_thread_is_observed_but_not_kept() -> None:
    model = RecordingChatModel(messages=itertools.repeat(AIMessage("ok")))
    seen: list[CallContext] = []
    middleware = CtxBudgetMiddleware(model="gpt-4o", budget=400, on_context=seen.append)
    agent_with(model, [middleware]).invoke({"messages": [HumanMessage("Hi")]})
    assert len(seen) == 1
    assert (seen[0].thread_id, seen[0].session_id, seen[0].user_id) == (None, None, None)
    assert_sent_is(model.calls[0][0], seen[0].context)


def test_only_the_threads_used_last_keep_their_context() -> None:
    model = RecordingChatModel(messages=itertools.repeat(AIMessage("ok")))
    middleware = CtxBudgetMiddleware(model="gpt-4o", budget=400, keep_contexts=2)
    agent = agent_with(model, [middleware])
    for thread in ("a", "b", "a", "c"):  # "b" is the least recently used when "c" comes
        agent.invoke(
            {"messages": [HumanMessage(f"Hi from {thread}")]},
            {"configurable": {"thread_id": thread}},
        )
    assert middleware.last_context("b") is None
    for thread in ("a", "c"):
        context = middleware.last_context(thread)
        assert context is not None
        assert context.included[-1].text == f"Hi from {thread}"

    none_kept = CtxBudgetMiddleware(model="gpt-4o", budget=400, keep_contexts=0)
    agent_with(model, [none_kept]).invoke(
        {"messages": [HumanMessage("Hi")]}, {"configurable": {"thread_id": "a"}}
    )
    assert none_kept.last_context("a") is None


def test_observer_options_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="keep_contexts must be a number of threads"):
        CtxBudgetMiddleware(model="gpt-4o", keep_contexts=-1)
    with pytest.raises(ConfigurationError, match="on_context must be a function"):
        CtxBudgetMiddleware(model="gpt-4o", on_context="print")  # type: ignore[arg-type]


# -- the DEBUG log ------------------------------------------------------------------------------
def test_explain_is_logged_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    model = RecordingChatModel(messages=iter([m for n in range(2) for m in tool_turn(n)]))
    seen: list[CallContext] = []
    middleware = CtxBudgetMiddleware(model="gpt-4o", budget=420, reserve=40, on_context=seen.append)
    agent = agent_with(model, [middleware])
    caplog.set_level(logging.DEBUG, logger="langchain_ctxbudget")
    agent.invoke({"messages": [HumanMessage("Trains to Porto? " * 30)]})
    agent.invoke(
        {"messages": [HumanMessage("And to Faro? " * 30)]}, {"configurable": {"thread_id": "t"}}
    )
    records = [r for r in caplog.records if r.name.startswith("langchain_ctxbudget")]
    assert [r.levelno for r in records] == [logging.DEBUG] * len(seen)
    for record, call in zip(records, seen, strict=True):
        assert record.getMessage().endswith("\n" + call.context.explain())
    assert "thread t " in records[-1].getMessage()


def test_nothing_is_explained_when_debug_is_off(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[AssembledContext] = []
    original = AssembledContext.explain

    def spy(self: AssembledContext, **kw: Any) -> str:
        built.append(self)
        return original(self, **kw)

    monkeypatch.setattr(AssembledContext, "explain", spy)
    caplog.set_level(logging.INFO, logger="langchain_ctxbudget")
    model = RecordingChatModel(messages=itertools.repeat(AIMessage("ok")))
    middleware = CtxBudgetMiddleware(model="gpt-4o", budget=400)
    agent_with(model, [middleware]).invoke({"messages": [HumanMessage("Hi " * 200)]})
    assert len(model.calls) == 1
    assert built == []
    assert not [r for r in caplog.records if r.name.startswith("langchain_ctxbudget")]


# -- concurrency --------------------------------------------------------------------------------
class AllInFlight(AgentMiddleware[Any, Any, Any]):
    """Holds every model call at a barrier: all runs are inside their model calls at once.

    Placed after `CtxBudgetMiddleware`, so each call waits with its context chosen and its run
    metadata set, and only then reaches the model.
    """

    def __init__(self, barrier: threading.Barrier, pool: ThreadPoolExecutor) -> None:
        super().__init__()
        self.barrier = barrier
        self.pool = pool

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> Any:
        self.barrier.wait()
        return handler(request)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> Any:
        await asyncio.get_running_loop().run_in_executor(self.pool, self.barrier.wait)
        return await handler(request)


async def test_concurrent_threads_and_tasks_each_see_only_their_own_contexts() -> None:
    sync_threads = [f"os-{i}" for i in range(3)]
    async_threads = [f"task-{i}" for i in range(3)]
    turns = 3
    everyone = len(sync_threads) + len(async_threads)
    barrier = threading.Barrier(everyone, timeout=60)
    seen: list[CallContext] = []
    model = RecordingChatModel(messages=itertools.repeat("ok " * 40))  # a new message each call
    with (
        ThreadPoolExecutor(len(async_threads)) as waits,
        ThreadPoolExecutor(len(sync_threads)) as runs,
    ):
        middleware = CtxBudgetMiddleware(
            model="gpt-4o", budget=400, reserve=40, pinned=PINNED, on_context=seen.append
        )
        agent = agent_with(model, [middleware, AllInFlight(barrier, waits)])
        starts = {thread: ModelStarts() for thread in [*sync_threads, *async_threads]}

        def turn_input(thread: str, n: int, messages: list[BaseMessage]) -> dict[str, Any]:
            question = HumanMessage(f"{thread} asks {n}: " + f"{thread} " * 40, id=f"{thread}-{n}")
            return {"messages": [*messages, question]}

        def config(thread: str) -> Any:
            return {"configurable": {"thread_id": thread}, "callbacks": [starts[thread]]}

        def sync_run(thread: str) -> list[BaseMessage]:
            messages: list[BaseMessage] = []
            for n in range(turns):
                state = agent.invoke(
                    turn_input(thread, n, messages), config(thread), context={"user_id": thread}
                )
                messages = state["messages"]
            return messages

        async def async_run(thread: str) -> list[BaseMessage]:
            messages: list[BaseMessage] = []
            for n in range(turns):
                state = await agent.ainvoke(
                    turn_input(thread, n, messages), config(thread), context={"user_id": thread}
                )
                messages = state["messages"]
            return messages

        loop = asyncio.get_running_loop()
        results = await asyncio.wait_for(
            asyncio.gather(
                *(loop.run_in_executor(runs, sync_run, t) for t in sync_threads),
                *(async_run(t) for t in async_threads),
            ),
            timeout=120,
        )
    states = dict(zip([*sync_threads, *async_threads], results, strict=True))

    assert len(seen) == len(model.calls) == everyone * turns
    for thread, messages in states.items():
        own = {m.id for m in messages}
        calls = [c for c in seen if c.thread_id == thread]
        # A call's newest message is the question of its turn, whose id names the thread.
        received = [sent for sent, _ in model.calls if str(sent[-1].id).startswith(f"{thread}-")]
        assert len(calls) == len(received) == turns
        for call, sent in zip(calls, received, strict=True):
            assert (call.session_id, call.user_id) == (thread, thread)
            history = {it.id for it in call.context.included if not is_internal(it.id)}
            assert history <= own  # only this thread's messages
            assert_sent_is(sent, call.context)
        assert middleware.last_context(thread) is calls[-1].context
        # Each run's callbacks saw its own model calls only, each with its own summary.
        metadata = starts[thread].metadata
        assert [m["thread_id"] for m in metadata] == [thread] * turns
        assert [m[METADATA_KEY] for m in metadata] == [c.summary for c in calls]
    # The later turns did not fit whole: something was cut, per thread.
    assert all(c.summary["pruned"] > 0 for c in seen if c.context.included[-1].id.endswith("-2"))


# -- a property over sessions -------------------------------------------------------------------
WORDS = ["lisbon", "train", "porto", "the", "visa", "ok", "weather", "sister", "äöü", "日本"]


@st.composite
def sessions(draw: st.DrawFn) -> list[BaseMessage]:
    """An agent session, oldest first, ending with the user's question."""
    texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=14).map(" ".join)
    messages: list[BaseMessage] = []
    numbers = itertools.count()
    for _ in range(draw(st.integers(1, 7))):
        messages.append(HumanMessage(draw(texts)))
        for _step in range(draw(st.integers(0, 2))):
            ids = [f"call_{next(numbers)}" for _ in range(draw(st.integers(1, 2)))]
            calls = [
                {"type": "tool_call", "id": i, "name": "lookup", "args": {"query": draw(texts)}}
                for i in ids
            ]
            messages.append(
                AIMessage(draw(st.sampled_from(["", "Let me look."])), tool_calls=calls)
            )
            messages.extend(ToolMessage(draw(texts), tool_call_id=i, name="lookup") for i in ids)
        if draw(st.booleans()):
            messages.append(AIMessage(draw(texts)))
    messages.append(HumanMessage(draw(texts)))
    return messages


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    session=sessions(),
    window=st.integers(min_value=260, max_value=900),
    pinned=st.lists(st.sampled_from(["Ana is vegetarian.", "Reply in English."]), max_size=2),
)
def test_every_calls_report_is_what_was_sent_and_what_its_run_metadata_says(
    session: list[BaseMessage], window: int, pinned: list[str]
) -> None:
    model = RecordingChatModel(messages=itertools.repeat(AIMessage("ok")))
    seen: list[CallContext] = []
    middleware = CtxBudgetMiddleware(
        model="gpt-4o", budget=window, reserve=40, pinned=pinned, on_context=seen.append
    )
    starts = ModelStarts()
    agent_with(model, [middleware]).invoke({"messages": session}, {"callbacks": [starts]})
    (call,) = seen
    [(sent, _tools)] = model.calls
    assert_sent_is(sent, call.context)
    assert starts.metadata[0][METADATA_KEY] == call.summary
    summary = call.summary
    # Every offered item (the prompt, each fact, each message) is included or pruned, once.
    assert summary["included"] + summary["pruned"] == 1 + len(pinned) + len(session)
    assert summary["pruned_by_reason"] == dict(Counter(p.reason.value for p in call.context.pruned))
    # The window less the reserve and the tool schemas.
    assert summary["tokens_used"] <= summary["tokens_available"] < window - 40
    assert summary["solver"] in {None, "none", "all", "exact", "greedy"}
