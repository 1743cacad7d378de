"""What an agent turn reads from the store: the session's stamps and its window, nothing more.

Issue 40 counted eight Chroma calls on a turn's own thread (the stamps; the session's entry and
window for the view; the session's entry and the ids, for the question and again for the
answer, before each was acknowledged). The view now takes the entry from the stamps read just
before, and the middleware stores with ``first_write_wins`` (the store's write finds an id it
holds): two reads a turn with write-behind (the default), whatever the session holds. What is
stored stays exact: every message once, in order, and nothing logged.

Real parts: LangChain's ``create_agent``, an embedded Chroma, the default embedder, tiktoken;
the only fake is the chat model.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage

from ctxbudget import ContextMemory
from langchain_ctxbudget import CtxBudgetMiddleware
from tests.lc_fakes import RecordingChatModel
from tests.store_calls import StoreCalls


def replies() -> Iterator[AIMessage]:
    for number in itertools.count():
        yield AIMessage(f"Reply {number}: noted.")


@pytest.mark.parametrize("write_behind", [True, False])
def test_a_turn_reads_the_stamps_and_the_window_only(
    tmp_path: Path, embedder: Any, caplog: pytest.LogCaptureFixture, write_behind: bool
) -> None:
    memory = ContextMemory(path=tmp_path / "db", embedder=embedder, write_behind=write_behind)
    try:
        memory.add_messages(
            "s1",
            [
                {"id": f"h{n}", "role": "user" if n % 2 == 0 else "assistant", "text": f"turn {n}"}
                for n in range(200)
            ],
        )
        memory.flush()
        middleware = CtxBudgetMiddleware(model="gpt-4o", budget=2000, memory=memory)
        agent = create_agent(RecordingChatModel(messages=replies()), middleware=[middleware])
        config = {"configurable": {"thread_id": "s1"}}
        state: list[Any] = []

        def turn(n: int) -> None:
            nonlocal state
            question = HumanMessage(f"Question {n}: what was said at turn {n}?", id=f"q{n}")
            state = list(agent.invoke({"messages": [*state, question]}, config)["messages"])

        for n in range(3):  # the session's copy is built; the caches warm
            turn(n)
        memory.flush()
        probe = StoreCalls(memory)
        with caplog.at_level(logging.WARNING):
            for n in range(3, 8):
                turn(n)
                memory.flush()  # between turns, as a user's pause would
        if write_behind:  # the default; a synchronous write reads what it writes over, itself
            assert probe.reads() == 2 * 5, probe.calls
        stored = memory.history("s1")
        asked = [r.text for r in stored if r.id.startswith("q")]
        assert asked == [f"Question {n}: what was said at turn {n}?" for n in range(8)]
        assert len(stored) == 200 + 16 and len({r.id for r in stored}) == 216
        assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    finally:
        memory.close()
