"""Two worker processes on one Chroma server: a log record queued before a delete stays gone.

A delete discards the matching queued records of every store of its own process; a worker in
another process has its own queue. Its writer takes back what it wrote for a generation the
session no longer has, so a session deleted (and maybe started again by another user) while
another worker still held a record of it never shows that record, its user or its counts.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator

import pytest

from ctxbudget.memory.context import ContextMemory
from ctxbudget.store.chroma_store import ChromaStore
from ctxbudget.store.partitions import log_partition
from ctxbudget.testing import ChromaServer
from tests.memory.test_inclusion_log import NS, TURNS

pytestmark = pytest.mark.integration

_WORKER = textwrap.dedent(
    """
    import sys
    from ctxbudget.embed.base import default_embedder
    from ctxbudget.memory.context import ContextMemory
    from ctxbudget.store.chroma_store import ChromaStore

    url, collection, via = sys.argv[1:4]
    store = ChromaStore(url=url, collection=collection, embedder=default_embedder())
    store.logs.linger = store.logs.max_wait = 600.0  # queued until told to write
    memory = ContextMemory(store=store)
    if via == "llamaindex":  # its get logs what it assembled through record_context
        from llama_index.ctxbudget import CtxBudgetMemory

        chat = CtxBudgetMemory(memory=memory, token_limit=300, session_id="s1", user_id="u1")
        chat.get("Where does Ana live?")
    elif via == "langchain":  # an agent's call, logged by the middleware
        from langchain.agents import create_agent
        from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
        from langchain_core.messages import AIMessage, HumanMessage
        from langchain_ctxbudget import CtxBudgetMiddleware

        model = GenericFakeChatModel(messages=iter([AIMessage("Porto.")]))
        middleware = CtxBudgetMiddleware(model="gpt-4o", budget=300, memory=memory)
        agent = create_agent(model, middleware=[middleware], context_schema=dict)
        agent.invoke(
            {"messages": [HumanMessage("Where does Ana live?", id="q1")]},
            {"configurable": {"thread_id": "t1"}},
            context={"session_id": "s1", "user_id": "u1"},
        )
    else:
        memory.assemble("s1", "Where does Ana live?", budget=300)
    print("queued", flush=True)
    sys.stdin.readline()
    memory.flush()
    memory.close()
    print("written", flush=True)
    """
)


class Worker:
    """Another process with a ContextMemory on the server: it assembles ``s1``, then waits."""

    def __init__(self, url: str, collection: str, via: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", _WORKER, url, collection, via],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._line() == "queued"

    def _line(self) -> str:
        assert self.process.stdout is not None
        return self.process.stdout.readline().strip()

    def write(self) -> None:
        """Let it write what it queued, and wait until it has."""
        assert self.process.stdin is not None
        self.process.stdin.write("go\n")
        self.process.stdin.flush()
        assert self._line() == "written"
        assert self.process.wait(timeout=60) == 0

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=60)
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()


@pytest.fixture(params=["memory", "llamaindex", "langchain"])
def worker(
    memory: ContextMemory, chroma_server: ChromaServer, request: pytest.FixtureRequest
) -> Iterator[Worker]:
    """A worker that assembled ``s1`` of ``memory``'s collection; its record is still queued."""
    started = Worker(chroma_server.url, memory.store.collection, str(request.param))
    yield started
    started.close()


@pytest.fixture
def memory(chroma_server: ChromaServer, embedder: object) -> Iterator[ContextMemory]:
    store = ChromaStore(
        url=chroma_server.url,
        collection=f"t-{uuid.uuid4().hex[:16]}",
        embedder=embedder,  # type: ignore[arg-type]
    )
    mem = ContextMemory(store=store)
    mem.add_messages("s1", TURNS, user_id="u1", progress=False)
    yield mem
    mem.close()


def test_a_record_queued_in_another_worker_does_not_outlive_the_session(
    memory: ContextMemory, worker: Worker
) -> None:
    memory.delete_session("s1")
    worker.write()
    assert memory.contexts("s1") == []
    assert memory.history("s1") == []  # the agent's turn, queued before the delete, neither
    assert memory.inclusion_log.sessions() == []
    assert memory.inclusion_log.sessions(user_id="u1") == []
    # The log's collection may stay, empty (another worker may be writing a new life's record).
    partition = log_partition(memory.store.collection, NS, "s1")
    assert memory.store._collections.part_rows(partition, documents=False) == []


def test_a_session_started_again_by_another_user_shows_none_of_the_old_records(
    memory: ContextMemory, worker: Worker
) -> None:
    memory.delete_session("s1")
    memory.add_messages("s1", TURNS, user_id="u2", progress=False)  # the same ids
    memory.assemble("s1", "What is my dog called?", budget=300)
    worker.write()
    memory.flush()
    assert [r.user_id for r in memory.contexts("s1")] == ["u2"]
    assert {r.user_id for r in memory.history("s1")} == {"u2"}  # the agent's turn neither
    assert memory.inclusion_log.sessions(user_id="u1") == []
    assert memory.inclusion_log.sessions(user_id="u2") == ["s1"]
    assert set(memory.access_counts("s1").values()) == {1}  # u2's one assembly, not u1's


def test_a_record_of_the_live_generation_is_kept(memory: ContextMemory, worker: Worker) -> None:
    worker.write()
    assert [r.user_id for r in memory.contexts("s1")] == ["u1"]
    assert memory.inclusion_log.sessions(user_id="u1") == ["s1"]
