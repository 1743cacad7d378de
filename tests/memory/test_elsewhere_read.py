"""Where a user's other sessions live is read with the session's entry, not by a read of its own.

A user's messages in a session another user started live in that user's partition; the user's
``elsewhere`` entry names those partitions, and the search of the user's other sessions reads
them all. Issue 40: `assemble` read that entry by itself, a third read before the search (on a
server, a round trip of every call). Now the view reads it with the session's entry, and the
middleware's stamps with theirs: two reads, then one search per partition the user's
messages are in, and the
message in the other user's session is still found.

Real parts: an embedded Chroma, the default embedder, tiktoken, LangChain's ``create_agent``;
the only fake is the chat model.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage

from ctxbudget import ContextMemory, MemoryConfig
from ctxbudget.errors import StoreInputError
from langchain_ctxbudget import CtxBudgetMiddleware
from tests.lc_fakes import RecordingChatModel
from tests.store_calls import StoreCalls

MARKER = "The spare key hides under the blue flowerpot."


def stored(memory: ContextMemory) -> None:
    """u1's own session s1, and a message of u1 in the session u2 started (u2's partition)."""
    memory.add_messages(
        "s1",
        [{"role": "user" if n % 2 == 0 else "assistant", "text": f"turn {n}"} for n in range(20)],
        user_id="u1",
    )
    memory.add_message("theirs", "user", "Welcome to the shared flat chat.", user_id="u2")
    memory.add_message("theirs", "user", MARKER, user_id="u1")
    memory.flush()
    assert memory.store._sessions.elsewhere(memory.namespace, "u1")  # noqa: SLF001 - the setup


@pytest.mark.parametrize("write_behind", [True, False])
def test_assemble_reads_twice_and_finds_the_users_message_elsewhere(
    tmp_path: Path, embedder: Any, write_behind: bool
) -> None:
    memory = ContextMemory(
        path=tmp_path / "db",
        embedder=embedder,
        write_behind=write_behind,
        config=MemoryConfig(other_sessions=True),
    )
    try:
        stored(memory)
        memory.assemble("s1", "Where is the spare key?", user_id="u1")  # warm
        probe = StoreCalls(memory)
        ctx = memory.assemble("s1", "Where is the spare key hidden?", user_id="u1")
        assert any(MARKER in item.text for item in ctx.included), ctx.included
        assert probe.count("read") == 2, probe.calls  # the entry (with elsewhere), the window
        assert probe.count("search") == 2, probe.calls  # the user's partition, and u2's
    finally:
        memory.close()


def replies() -> Iterator[AIMessage]:
    for number in itertools.count():
        yield AIMessage(f"Reply {number}: noted.")


def test_an_agent_turn_of_a_user_reads_the_stamps_and_the_window(
    tmp_path: Path, embedder: Any
) -> None:
    memory = ContextMemory(
        path=tmp_path / "db", embedder=embedder, config=MemoryConfig(other_sessions=True)
    )
    try:
        stored(memory)
        model = RecordingChatModel(messages=replies())
        middleware = CtxBudgetMiddleware(
            model="gpt-4o", budget=2000, memory=memory, session_id="s1", user_id="u1"
        )
        agent = create_agent(model, middleware=[middleware])
        state: list[Any] = []

        def turn(text: str) -> None:
            nonlocal state
            question = HumanMessage(text)
            state = list(agent.invoke({"messages": [*state, question]})["messages"])

        turn("Hello again.")
        memory.flush()
        probe = StoreCalls(memory)
        turn("Where is the spare key hidden?")
        sent = " ".join(str(m.content) for m in model.calls[-1][0])
        assert MARKER in sent
        assert probe.count("read") == 2, probe.calls  # the stamps (with elsewhere), the window
        assert probe.count("search") == 2, probe.calls
    finally:
        memory.close()


@pytest.mark.parametrize("bad", ["u2-partition", [1], [""], 3, [None]])
def test_a_bad_elsewhere_is_refused_with_what_to_pass(
    tmp_path: Path, embedder: Any, bad: Any
) -> None:
    memory = ContextMemory(path=tmp_path / "db", embedder=embedder, write_behind=False)
    try:
        stored(memory)
        with pytest.raises(StoreInputError, match="elsewhere must be a list of partition names"):
            memory.store.search_many(
                ["spare key"], namespace=memory.namespace, k=3, user_id="u1", elsewhere=bad
            )
        found = memory.store.search_many(
            ["spare key"], namespace=memory.namespace, k=3, user_id="u1"
        )
        assert any(hit.record.text == MARKER for hit in found[0])  # nothing lost, still found
    finally:
        memory.close()
