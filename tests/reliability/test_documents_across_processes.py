"""Documents another process adds are searched by the next turn (`Stamps.has_documents`).

A turn in a namespace without documents makes no Chroma call for them: the read of the
session's entry (the middleware's read of the stamps) also reads whether the namespace's
documents partition is registered, on every call, never from a copy
(tests/memory/test_documents_held.py: two memory objects in one process). Here the writer is
another process on the same Chroma server: worker A assembles in a namespace without documents
(every cache warm), worker B adds a document, and A's next assembly offers it; the same through
the LangChain middleware in A (the recording fake chat model: what it was sent).

Real parts: a ``chroma run`` server, the default embedder, tiktoken, LangChain's
``create_agent``; the only fake is the chat model.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.worker_process import Worker

pytestmark = pytest.mark.integration

FACT = "The ferry to the island leaves from pier seven at dawn."
QUESTION = "Which pier does the ferry to the island leave from?"
TURNS = [
    {"role": "user" if n % 2 == 0 else "assistant", "text": f"Small talk {n} about the weather."}
    for n in range(6)
]


@pytest.fixture
def a_and_b(workers: list[Worker]) -> Iterator[tuple[Worker, Worker]]:
    """A and B with a memory on a fresh namespace; A's session s1 holds small talk."""
    namespace = f"docs-{uuid.uuid4().hex[:8]}"
    a, b = workers
    for worker in workers:
        worker.ask(
            {"op": "open", "namespace": namespace, "write_behind": False, "other_sessions": False}
        )
    try:
        a.ask(
            {
                "op": "add",
                "session": "s1",
                "messages": TURNS,
                "user_id": "u1",
                "first_write_wins": False,
            }
        )
        yield a, b
    finally:
        for worker in workers:
            worker.ask({"op": "close"})


def offered(worker: Worker) -> set[str]:
    reply = worker.ask({"op": "assemble", "session": "s1", "query": QUESTION, "user_id": "u1"})
    return {text for key in ("included", "pruned") for _, text in reply[key]}


def test_a_document_another_process_adds_is_offered_by_the_next_assembly(
    a_and_b: tuple[Worker, Worker],
) -> None:
    a, b = a_and_b
    for _ in range(2):  # warm: the session's index, the stamps ("no documents")
        assert FACT not in offered(a)
    b.ask({"op": "documents", "texts": [FACT], "collection": "kb"})
    assert FACT in offered(a)


def test_the_middleware_searches_a_document_another_process_adds(
    a_and_b: tuple[Worker, Worker],
) -> None:
    a, b = a_and_b
    turn = {"op": "agent", "session": "s1", "user_id": "u1", "text": QUESTION}
    for fresh in (True, False):  # warm: the middleware's stamps say "no documents"
        assert FACT not in "\n".join(a.ask({**turn, "fresh": fresh})["sent"])
    b.ask({"op": "documents", "texts": [FACT], "collection": "kb"})
    assert FACT in "\n".join(a.ask({**turn, "text": QUESTION + " Again?", "fresh": False})["sent"])
