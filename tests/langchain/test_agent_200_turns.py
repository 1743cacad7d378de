"""200 turns of a real ``create_agent`` agent with two tools under a 2,048-token window.

The chat model is a LangChain fake that records every request and answers from a script that
sometimes calls one tool, two in parallel, or two in a row. Every recorded request is counted
independently with the model's encoding: messages (``count_messages`` of their OpenAI form) plus
the tool schemas (their compact JSON, sorted keys, as the middleware documents).
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.utils import convert_to_openai_messages
from langchain_core.tools import tool
from lc_fakes import RecordingChatModel

from ctxbudget import TokenCounter
from ctxbudget.memory.context import ContextMemory
from langchain_ctxbudget import CtxBudgetMiddleware

WINDOW = 2048
RESERVE = 256
TURNS = 200
SYSTEM = "You are a concise travel assistant. Use the tools for live data."
PINNED = ["The user's name is Ana.", "Ana is vegetarian and allergic to peanuts."]
MEMORY_PIN = "Ana's passport expires in March 2027."
WORDS = (
    "the a to and of in we you it is for on that this with plan trip Lisbon Porto train budget "
    "booking dinner vegetarian museum weekend river coffee tickets hotel ferry beach market"
).split()

COUNTER = TokenCounter.for_model("gpt-4o")


def sentence(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high))).capitalize() + "."


@tool
def weather(city: str, days: int = 1) -> str:
    """Weather forecast for a city, one line per day."""
    return "\n".join(f"Day {d + 1} in {city}: sunny, {18 + d % 7} C." for d in range(days))


@tool
def search_notes(query: str, limit: int = 3) -> str:
    """Search the user's travel notes; returns the matching notes."""
    rng = random.Random(query)
    return "\n".join(f"Note {i}: {sentence(rng, 8, 40)}" for i in range(limit))


def call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def script(turns: int, seed: int = 5) -> tuple[list[str], list[AIMessage]]:
    """User messages and the model's answers, in the order the agent will ask for them."""
    rng = random.Random(seed)
    users: list[str] = []
    answers: list[AIMessage] = []
    for t in range(turns):
        users.append(" ".join(sentence(rng, 4, 30) for _ in range(rng.randint(1, 3))))
        kind = t % 5
        if kind == 0:
            days = 30 if t % 25 == 0 else rng.randint(1, 4)  # sometimes a long tool result
            answers.append(
                AIMessage(
                    "", tool_calls=[call("weather", {"city": "Lisbon", "days": days}, f"w{t}")]
                )
            )
        elif kind == 2:
            answers.append(
                AIMessage(
                    "Let me check both.",
                    tool_calls=[
                        call("weather", {"city": "Porto"}, f"pw{t}"),
                        call("search_notes", {"query": f"q{t}", "limit": 2}, f"pn{t}"),
                    ],
                )
            )
        elif kind == 3:
            answers.append(
                AIMessage("", tool_calls=[call("search_notes", {"query": f"a{t}"}, f"a{t}")])
            )
            limit = 90 if t % 50 == 3 else 3  # sometimes a result bigger than the window
            answers.append(
                AIMessage(
                    "",
                    tool_calls=[call("search_notes", {"query": f"b{t}", "limit": limit}, f"b{t}")],
                )
            )
        answers.append(AIMessage(" ".join(sentence(rng, 5, 45) for _ in range(rng.randint(1, 4)))))
    return users, answers


def request_tokens(messages: Sequence[BaseMessage], tools: Sequence[dict[str, Any]]) -> int:
    schemas = sum(
        COUNTER.count(json.dumps(t, sort_keys=True, ensure_ascii=False, default=str)) for t in tools
    )
    return COUNTER.count_messages(convert_to_openai_messages(list(messages))) + schemas


def check_integrity(history: Sequence[BaseMessage]) -> None:
    """The history starts on a human message; tool calls and results come in whole steps."""
    assert history, "a request without conversation"
    assert isinstance(history[0], HumanMessage), f"history starts with {history[0].type}"
    open_calls: set[str] = set()
    for message in history:
        if isinstance(message, ToolMessage):
            assert message.tool_call_id in open_calls, f"orphan tool result {message.tool_call_id}"
            open_calls.discard(message.tool_call_id)
            continue
        assert not open_calls, f"tool calls {open_calls} sent without their results"
        if isinstance(message, AIMessage):
            open_calls = {c["id"] for c in message.tool_calls if c["id"]}
    assert not open_calls, f"tool calls {open_calls} sent without their results"


def run_agent(
    middleware: CtxBudgetMiddleware, turns: int, *, memory: ContextMemory | None = None
) -> tuple[RecordingChatModel, list[AnyMessage], list[int]]:
    users, answers = script(turns)
    model = RecordingChatModel(messages=iter(answers))
    agent = create_agent(
        model, tools=[weather, search_notes], system_prompt=SYSTEM, middleware=[middleware]
    )
    config = {"configurable": {"thread_id": "trip"}}
    messages: list[AnyMessage] = []
    calls_per_turn: list[int] = []
    for turn, text in enumerate(users):
        before = len(model.calls)
        state = agent.invoke({"messages": [*messages, HumanMessage(text)]}, config)
        messages = state["messages"]
        calls_per_turn.append(len(model.calls) - before)
        if turn == 0 and memory is not None:
            memory.pin("trip", MEMORY_PIN)
    return model, messages, calls_per_turn


@pytest.mark.slow
def test_every_request_of_200_turns_fits_and_keeps_tool_calls_whole() -> None:
    middleware = CtxBudgetMiddleware(model="gpt-4o", budget=WINDOW, reserve=RESERVE, pinned=PINNED)
    model, state, calls_per_turn = run_agent(middleware, TURNS)
    users, answers = script(TURNS)

    # The state was not trimmed: every message of every turn is there, in order.
    assert len(state) == len(users) + len(answers) + sum(len(a.tool_calls) for a in answers)
    assert [m.content for m in state if isinstance(m, HumanMessage)] == users
    assert len(model.calls) == len(answers) == sum(calls_per_turn)

    for index, (sent, tools) in enumerate(model.calls):
        assert len(tools) == 2
        tokens = request_tokens(sent, tools)
        assert tokens <= WINDOW - RESERVE, f"request {index} needs {tokens} tokens"
        assert isinstance(sent[0], SystemMessage) and sent[0].text.startswith(SYSTEM)
        for fact in PINNED:
            assert fact in sent[0].text, f"request {index} lost the pinned fact {fact!r}"
        assert not any(isinstance(m, SystemMessage) for m in sent[1:])
        check_integrity(sent[1:])
    # The current turn is always sent: the first call of a turn ends with the user's message;
    # later calls end with tool results (or with the user's message alone when the newest
    # tool step cannot fit whole).
    position = 0
    question_only = 0
    for turn, n in enumerate(calls_per_turn):
        for step in range(n):
            sent, _ = model.calls[position + step]
            assert sent[-1].type in ("human", "tool")
            if step == 0 or sent[-1].type == "human":
                assert sent[-1].content == users[turn]
                question_only += step > 0
        position += n
    assert question_only >= 1  # a tool result larger than the window was never sent in part
    # The window really was too small for the conversation: late requests drop old turns.
    last_sent, last_tools = model.calls[-1]
    assert len(last_sent) < len(state) / 5
    assert request_tokens(state, last_tools) > 20 * WINDOW
