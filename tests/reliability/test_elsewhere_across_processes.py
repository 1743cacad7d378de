"""A user's ``elsewhere`` is read on every call: another process's write or delete counts at once.

A user's messages in a session another user started live in that user's partition, and the
user's ``elsewhere`` entry names those partitions; every assembly reads it with the session's
entry, never from a copy (tests/memory/test_elsewhere_read.py counts the reads in one process).
Here the writer is another process on the same Chroma server. Worker A assembles for u1 in
u1's session s1 (every cache warm: the session's index, the stamps), then worker B stores a
message of u1 in the session u2 started ("theirs", u2's partition) with a fact, and flushes:
A's next assembly for u1 offers that message. After B deletes u1, A's next assembly for u1
offers none of u1's messages, and an assembly for u2 (in u2's own other session, whose other
sessions include "theirs") never offers u1's message. The same through the LangChain
middleware in A (the recording fake chat model: what it was sent).

Real parts: a ``chroma run`` server, the default embedder, tiktoken, LangChain's
``create_agent``; the only fake is the chat model.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.worker_process import Worker

pytestmark = pytest.mark.integration

MARKER = "The spare key hides under the blue flowerpot."
QUESTION = "Where is the spare key hidden?"
S1_TURNS = [
    {"role": "user" if n % 2 == 0 else "assistant", "text": f"Small talk {n} about the weather."}
    for n in range(6)
]
WELCOME = "Welcome to the shared flat chat."
S2_TURNS = [{"role": "user", "text": "I water the plants on Sundays."}]


@pytest.fixture
def a_and_b(workers: list[Worker]) -> Iterator[tuple[Worker, Worker]]:
    """A and B with a memory on a fresh namespace: u1's s1 (by A), u2's "theirs" and s2 (by B)."""
    namespace = f"els-{uuid.uuid4().hex[:8]}"
    a, b = workers
    for worker in workers:
        worker.ask(
            {"op": "open", "namespace": namespace, "write_behind": False, "other_sessions": True}
        )
    try:
        add(a, "s1", S1_TURNS, "u1")
        add(b, "theirs", [{"role": "user", "text": WELCOME}], "u2")
        add(b, "s2", S2_TURNS, "u2")
        yield a, b
    finally:
        for worker in workers:
            worker.ask({"op": "close"})


def add(worker: Worker, session: str, messages: list[dict[str, str]], user: str) -> list[str]:
    reply = worker.ask(
        {
            "op": "add",
            "session": session,
            "messages": messages,
            "user_id": user,
            "first_write_wins": False,
        }
    )
    worker.ask({"op": "flush"})
    return list(reply["ids"])


def offered(worker: Worker, session: str, user: str) -> dict[str, set[str]]:
    """The texts an assembly for ``user`` in ``session`` included and pruned (``QUESTION``)."""
    reply: dict[str, Any] = worker.ask(
        {"op": "assemble", "session": session, "query": QUESTION, "user_id": user}
    )
    return {key: {text for _, text in reply[key]} for key in ("included", "pruned")}


def every(found: dict[str, set[str]]) -> set[str]:
    return found["included"] | found["pruned"]


U1_TEXTS = {MARKER, *(t["text"] for t in S1_TURNS)}


def test_another_process_adding_and_deleting_a_users_message_elsewhere_counts_at_once(
    a_and_b: tuple[Worker, Worker],
) -> None:
    a, b = a_and_b
    for _ in range(2):  # warm: the session's index, the stamps, u1's elsewhere (none yet)
        before = offered(a, "s1", "u1")
        assert MARKER not in every(before)
        assert {t["text"] for t in S1_TURNS} <= before["included"]
    assert MARKER not in every(offered(a, "s2", "u2"))

    add(b, "theirs", [{"role": "user", "text": MARKER, "id": "fact"}], "u1")
    after = offered(a, "s1", "u1")
    assert MARKER in every(after), after
    assert MARKER in after["included"], after  # a small session: it fits
    assert MARKER not in every(offered(a, "s2", "u2"))  # theirs is u2's, the message is not

    assert b.ask({"op": "delete_user", "user_id": "u1"})["removed"] > 0
    gone = offered(a, "s1", "u1")
    assert not (every(gone) & U1_TEXTS), gone
    assert MARKER not in every(offered(a, "s2", "u2"))
    # In the session u2 started only u1's records go (docs/reliability.md, "Deleting a user"):
    # u2's own message stays, as does u2's other session.
    left = [row[2] for row in a.ask({"op": "history", "session": "theirs"})["messages"]]
    assert left == [WELCOME]
    kept = [row[2] for row in a.ask({"op": "history", "session": "s2"})["messages"]]
    assert kept == [t["text"] for t in S2_TURNS]


def agent(worker: Worker, text: str, *, user: str, session: str, fresh: bool) -> str:
    """One turn of A's agent; all it sent to the model, as one text (stored before returning)."""
    reply = worker.ask(
        {"op": "agent", "session": session, "user_id": user, "text": text, "fresh": fresh}
    )
    worker.ask({"op": "flush"})
    return "\n".join(reply["sent"])


def test_the_middleware_sees_another_process_add_and_delete_a_users_message_elsewhere(
    a_and_b: tuple[Worker, Worker],
) -> None:
    a, b = a_and_b
    sent = agent(a, "Hello again.", user="u1", session="s1", fresh=True)
    assert MARKER not in sent
    assert S1_TURNS[0]["text"] in sent  # the stored session is offered

    add(b, "theirs", [{"role": "user", "text": MARKER, "id": "fact"}], "u1")
    sent = agent(a, QUESTION, user="u1", session="s1", fresh=False)
    assert MARKER in sent

    sent = agent(a, QUESTION, user="u2", session="s2", fresh=True)
    assert MARKER not in sent

    assert b.ask({"op": "delete_user", "user_id": "u1"})["removed"] > 0
    sent = agent(a, QUESTION, user="u1", session="s1", fresh=True)
    assert MARKER not in sent
    assert "Hello again." not in sent  # the agent's earlier turns went with s1
    assert not any(t["text"] in sent for t in S1_TURNS), sent
    sent = agent(a, QUESTION, user="u2", session="s2", fresh=True)
    assert MARKER not in sent
