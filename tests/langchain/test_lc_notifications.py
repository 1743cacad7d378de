"""A notification the agent's harness adds never takes the place of the user's question.

langchain-core 1.7.2 marks the human messages a harness adds (``add_notification_metadata``:
a background task's update, a conversation summary) with ``additional_kwargs["lc_source"]``.
Such a message after the user's request used to be taken for the question: the request became
history, so under a tight budget the model got "task t_42 finished" without what the user had
asked (and memory searched for the notification's words). Now the question is the last human
message the user wrote, and a notification last in the conversation (what the call reacts to)
is kept with it; every other message is history as before.
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
    add_notification_metadata,
)
from lc_fakes import RecordingChatModel

from ctxbudget import AssembledContext, BudgetExceededError
from ctxbudget.memory.context import ContextMemory
from langchain_ctxbudget import CtxBudgetMiddleware, budget_messages
from langchain_ctxbudget.model_request import current_turn, is_notification, never_pruned

FILLER = " about the trip to Lisbon and the train to Porto" * 4


def notification(text: str, id: str | None = None) -> HumanMessage:  # noqa: A002
    return add_notification_metadata(
        HumanMessage(text, id=id), source="async_subagent", data={"task_id": "t_42"}
    )


def waiting_session() -> list[BaseMessage]:
    """Old exchanges, the user's request, a task started, and the task's notification last."""
    messages: list[BaseMessage] = []
    for i in range(6):
        messages += [HumanMessage(f"old question {i}{FILLER}", id=f"h{i}")]
        messages += [AIMessage(f"old answer {i}{FILLER}", id=f"a{i}")]
    messages += [HumanMessage("Find flights to Lisbon in May and book the cheapest.", id="q")]
    call = {"name": "start_task", "args": {"what": "flights"}, "id": "c1"}
    messages += [AIMessage("", tool_calls=[call], id="ac")]
    messages += [ToolMessage(f"task t_42 started{FILLER}", tool_call_id="c1", id="t1")]
    messages += [AIMessage("I started the search; I will tell you.", id="as")]
    messages += [notification("Background task t_42 finished: 3 flights found.", id="n1")]
    return messages


def test_the_question_is_the_users_not_the_harness_notification() -> None:
    messages = waiting_session()
    assert is_notification(messages[-1])
    assert not is_notification(messages[12])
    assert current_turn(messages) == 12
    assert never_pruned(messages) == {12, len(messages) - 1}
    # Only notifications: the last of them is the question.
    only = [notification("a"), AIMessage("b"), notification("c")]
    assert current_turn(only) == 2
    assert never_pruned(only) == {2}
    # An earlier notification is history; a notification before the question is too.
    early = [notification("x"), HumanMessage("q"), AIMessage("a")]
    assert current_turn(early) == 1
    assert never_pruned(early) == {1}
    # A summary the harness put first (SummarizationMiddleware's message) is not the question.
    summary = HumanMessage("Here is a summary", additional_kwargs={"lc_source": "summarization"})
    assert current_turn([summary, HumanMessage("q"), AIMessage("a")]) == 1


def test_under_a_tight_budget_budget_messages_keeps_the_request_and_the_notification() -> None:
    messages = waiting_session()
    kept = [m.id for m in budget_messages(messages, max_tokens=100, model="gpt-4o")]
    # Before: ["n1"] alone, the user's request dropped as history.
    assert kept == ["q", "n1"]
    loose = [m.id for m in budget_messages(messages, max_tokens=200, model="gpt-4o")]
    assert loose == ["q", "ac", "t1", "as", "n1"]


def test_the_agent_model_receives_the_request_with_the_notification() -> None:
    messages = waiting_session()
    model = RecordingChatModel(messages=iter([AIMessage("Booked the 9:40 flight.")]))
    reports: list[AssembledContext] = []
    middleware = CtxBudgetMiddleware(
        model="gpt-4o", budget=100, reserve=0, on_context=lambda c: reports.append(c.context)
    )
    agent = create_agent(model, tools=[], middleware=[middleware])
    agent.invoke({"messages": messages})
    sent, _tools = model.calls[0]
    assert [m.id for m in sent] == ["q", "n1"]
    assert sent[1].additional_kwargs["lc_source"] == "async_subagent"  # the object as given
    report = reports[0]
    included = {it.id for it in report.included}
    pruned = {p.item.id for p in report.pruned}
    assert not included & pruned
    assert report.tokens_used <= 100


# -- property: over sessions with notifications anywhere ---------------------------------------
@st.composite
def sessions(draw: st.DrawFn) -> list[BaseMessage]:
    """User turns, tool steps and answers, with harness notifications dropped in anywhere."""
    words = st.lists(st.sampled_from(["lisbon", "train", "the", "visa", "ok", "日本"]), min_size=1)
    text = words.map(" ".join)
    calls = itertools.count()
    messages: list[BaseMessage] = []
    for _ in range(draw(st.integers(1, 5))):
        messages.append(HumanMessage(draw(text)))
        for _ in range(draw(st.integers(0, 2))):
            cid = f"c{next(calls)}"
            messages.append(AIMessage("", tool_calls=[{"name": "t", "args": {}, "id": cid}]))
            messages.append(ToolMessage(draw(text), tool_call_id=cid))
            if draw(st.booleans()):
                messages.append(notification(draw(text)))
        if draw(st.booleans()):
            messages.append(AIMessage(draw(text)))
        if draw(st.booleans()):
            messages.append(notification(draw(text)))
    return messages


@given(sessions(), st.integers(20, 400))
@settings(max_examples=120, deadline=None)
def test_the_request_and_the_last_notification_are_never_dropped(
    messages: list[BaseMessage], budget: int
) -> None:
    question = current_turn(messages)
    try:
        kept = budget_messages(messages, max_tokens=budget, model="gpt-4o")
    except BudgetExceededError:
        return  # refused with the numbers, never sent without its question
    ids = [id(m) for m in kept]
    assert id(messages[question]) in ids
    if is_notification(messages[-1]) and len(messages) - 1 > question:
        assert id(messages[-1]) in ids
    _answered(kept)


def _answered(messages: list[BaseMessage]) -> None:
    """No orphan: every tool call has its result after it, every result its call before it."""
    assert not isinstance(messages[0], AIMessage | ToolMessage)
    open_calls: set[Any] = set()
    for message in messages:
        if isinstance(message, ToolMessage):
            assert message.tool_call_id in open_calls
            open_calls.discard(message.tool_call_id)
        elif open_calls:
            raise AssertionError(f"calls {open_calls} unanswered before {message!r}")
        if isinstance(message, AIMessage):
            open_calls = {c["id"] for c in message.tool_calls}
    assert not open_calls


def test_memory_searches_for_the_request_not_the_notification(memory: ContextMemory) -> None:
    """What memory recalls answers the user's request, though a notification came after it."""
    chatter = [f"We talked about the weather on day {i}, sunny and warm." for i in range(60)]
    stored = [{"role": "user", "content": c, "id": f"old{i}"} for i, c in enumerate(chatter)]
    fact = "My passport number is X-99-ALBATROSS."
    stored.insert(7, {"role": "user", "content": fact, "id": "p"})
    memory.add_messages("s1", stored, progress=False)
    memory.flush()
    model = RecordingChatModel(messages=iter([AIMessage("Done.")]))
    middleware = CtxBudgetMiddleware(model="gpt-4o", budget=160, reserve=0, memory=memory)
    agent = create_agent(model, tools=[], middleware=[middleware])
    messages = [
        HumanMessage("Book the flight with my passport number, please.", id="q"),
        AIMessage("I am checking seats first.", id="a"),
        notification("Background task t_42 finished: seat 12A is free.", id="n1"),
    ]
    agent.invoke({"messages": messages}, {"configurable": {"thread_id": "s1"}})
    sent, _tools = model.calls[0]
    assert [m.id for m in sent if m.id in {"q", "n1"}] == ["q", "n1"]
    assert "X-99-ALBATROSS" in str(sent[0].content)  # the recalled turn, in the system message
