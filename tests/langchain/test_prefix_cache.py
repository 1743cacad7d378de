"""Step trimming and the shared prefix through the LangChain adapter: `budget_messages` and
`CtxBudgetMiddleware` (a real ``create_agent`` agent; the chat model is the only fake)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.messages.utils import convert_to_openai_messages
from lc_fakes import RecordingChatModel

from ctxbudget import ConfigurationError, TokenCounter
from ctxbudget.core.prefix import shared_message_tokens
from ctxbudget.memory.context import ContextMemory
from langchain_ctxbudget import CallContext, CtxBudgetMiddleware, budget_messages

COUNTER = TokenCounter.for_model("gpt-4o")
WORDS = "plan trip Lisbon coffee river weekend review draft the a of".split()


def chat(turns: int, seed: int = 0) -> list[BaseMessage]:
    """A system message, then ``turns`` messages, human and AI in turn, of varied lengths."""
    out: list[BaseMessage] = [SystemMessage("You are a terse assistant.")]
    for i in range(turns):
        text = " ".join(WORDS[(i * 7 + k + seed) % len(WORDS)] for k in range(5 + (i * 13) % 40))
        out.append(HumanMessage(text, id=f"h{i}") if i % 2 == 0 else AIMessage(text, id=f"a{i}"))
    return out


def position(messages: list[BaseMessage], kept: list[BaseMessage]) -> int:
    first = next(m for m in kept if not isinstance(m, SystemMessage))
    return next(i for i, m in enumerate(messages) if m is first)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    turns=st.integers(20, 120),
    max_tokens=st.integers(120, 900),
    seed=st.integers(0, 10),
    step=st.sampled_from([0.1, 0.15, 0.3]),
)
def test_budget_messages_in_steps_extends_what_it_sent_or_starts_later(
    turns: int, max_tokens: int, seed: int, step: float
) -> None:
    messages = chat(turns, seed)
    before: list[BaseMessage] | None = None
    seen: list[CallContext] = []
    for count in range(2, turns + 2):
        kept = budget_messages(
            messages[:count],
            max_tokens=max_tokens,
            trim_step=step,
            previous=before,
            on_context=seen.append,
        )
        assert COUNTER.count_messages(convert_to_openai_messages(kept)) <= max_tokens
        context = seen[-1].context
        if before is not None and len(before) > 1 and len(kept) > 1:
            start, earlier = position(messages, kept), position(messages, before)
            assert start >= earlier
            sent = convert_to_openai_messages(kept)
            old = convert_to_openai_messages(before)
            assert context.prefix_tokens == shared_message_tokens(sent, old, COUNTER)
            if start == earlier and context.trim is not None and context.trim.anchored:
                assert kept[: len(before)] == before  # the previous call, then new messages
                assert context.prefix_tokens == COUNTER.count_messages(old) - 3
        before = kept


def test_budget_messages_shares_far_more_in_steps_than_by_message() -> None:
    messages = chat(400)  # about 12,000 tokens, a message of 30 on average
    shares: dict[str, list[float]] = {"step": [], "message": []}
    for mode in shares:
        before = None
        for count in range(200, 402, 2):
            seen: list[CallContext] = []
            kept = budget_messages(
                messages[:count],
                max_tokens=3000,
                history_trim=mode,  # type: ignore[arg-type]
                previous=before,
                on_context=seen.append,
            )
            context = seen[0].context
            if context.prefix_tokens is not None:
                shares[mode].append(context.prefix_tokens / context.tokens_used)
                assert seen[0].summary["prefix_tokens"] == context.prefix_tokens
                assert (seen[0].thread_id, seen[0].session_id) == (None, None)
            before = kept
    step, plain = (sum(v) / len(v) for v in (shares["step"], shares["message"]))
    assert step > 0.7 > plain


def test_budget_messages_options_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="history_trim"):
        budget_messages(chat(3), max_tokens=100, history_trim="exchange")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="trim_step"):
        budget_messages(chat(3), max_tokens=100, trim_step=2.0)
    with pytest.raises(ConfigurationError, match="on_context"):
        budget_messages(chat(3), max_tokens=100, on_context="print")  # type: ignore[arg-type]
    runnable = budget_messages(max_tokens=100, history_trim="message")
    assert runnable.invoke(chat(3))[-1].content == chat(3)[-1].content


def test_the_middleware_passes_each_threads_previous_call_and_trims_in_steps() -> None:
    model = RecordingChatModel(messages=itertools.repeat(AIMessage("Noted. " * 12)))
    seen: list[CallContext] = []
    middleware = CtxBudgetMiddleware(model="gpt-4o", budget=700, on_context=seen.append)
    agent = create_agent(model, tools=[], system_prompt="Be brief.", middleware=[middleware])
    states: dict[str, list[BaseMessage]] = {"a": [], "b": []}
    for turn in range(40):
        for thread, state in states.items():
            question = HumanMessage(f"Turn {turn} of {thread}: " + "details " * 15)
            result = agent.invoke(
                {"messages": [*state, question]}, {"configurable": {"thread_id": thread}}
            )
            states[thread] = result["messages"]
    calls = {t: [c for c in seen if c.thread_id == t] for t in ("a", "b")}
    for thread, own in calls.items():
        assert own[0].context.prefix_tokens is None  # the thread's first call
        assert all(c.context.prefix_tokens is not None for c in own[1:])
        assert all(c.context.trim is not None for c in own)
        last = middleware.last_context(thread)
        assert last is own[-1].context
        # Each call is compared with the thread's previous call, never the other thread's.
        for before, now in itertools.pairwise(own):
            expected = shared_message_tokens(
                now.context.to_messages(), before.context.to_messages(), COUNTER
            )
            assert now.context.prefix_tokens == expected
    # Trimmed in steps, most calls repeat the previous one: its prefix is cached.
    shares = [c.context.prefix_tokens / c.context.tokens_used for c in calls["a"][1:]]
    assert sum(shares) / len(shares) > 0.7
    assert any(c.context.trim.first_kept > 0 for c in calls["a"] if c.context.trim)


def test_with_memory_the_middleware_trims_by_message_unless_told(memory: ContextMemory) -> None:
    def trim_of(**options: Any) -> Any:
        seen: list[CallContext] = []
        model = RecordingChatModel(messages=itertools.repeat(AIMessage("ok")))
        middleware = CtxBudgetMiddleware(
            model="gpt-4o", budget=2000, memory=memory, on_context=seen.append, **options
        )
        agent = create_agent(model, tools=[], middleware=[middleware])
        agent.invoke({"messages": [HumanMessage("Hi")]}, {"configurable": {"thread_id": "t"}})
        return seen[0].context.trim

    # Memories recalled per query go in the system message: no prefix to keep by default.
    assert trim_of() is None
    told = trim_of(history_trim="step", trim_step=0.2)
    assert told is not None and told.step_tokens > 0
    with pytest.raises(ConfigurationError, match="trim_step"):
        CtxBudgetMiddleware(model="gpt-4o", trim_step=0)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="history_trim"):
        CtxBudgetMiddleware(model="gpt-4o", history_trim="steps")  # type: ignore[arg-type]
