"""A healthy run is quiet: no warning, no error span; a message written again is the same write.

Issue 39 ("noise on healthy runs"): the middleware with a memory (write-behind by default) stores
the state's messages on every model call and when the agent finishes, each time stamped with the
time of that call. The store took the same message with a new timestamp for other content: the
first turn of every new session logged "refused a batch ... already stored with different
content" and "did not store", more with a checkpointer and back-to-back turns, and the write
spans ended in ERROR (`StoreInputError`) although nothing was lost.

Real parts: LangChain's ``create_agent`` with LangGraph's ``InMemorySaver``, an embedded Chroma,
the default embedder, tiktoken; the only fake is the chat model. Spans go to the SDK's in-memory
exporter through `ctxbudget.telemetry.configure`.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from lc_fakes import RecordingChatModel
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from ctxbudget import StoreInputError
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.writing.behind import WriteBehind
from ctxbudget.store.chroma_store import ChromaStore
from ctxbudget.store.journal import WriteJournal, replay
from ctxbudget.store.records import Record
from langchain_ctxbudget import CtxBudgetMiddleware

OURS = ("ctxbudget", "langchain_ctxbudget")


def loud(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The warnings and errors ctxbudget's loggers wrote."""
    return [
        f"{r.levelname} {r.name}: {r.getMessage()}"
        for r in caplog.records
        if r.levelno >= logging.WARNING and r.name.split(".")[0] in OURS
    ]


def replies() -> Iterator[AIMessage]:
    for number in itertools.count():
        yield AIMessage(f"Reply {number}: noted.")


def test_a_run_of_three_users_with_a_checkpointer_logs_nothing_and_no_span_fails(
    memory: ContextMemory, traced: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    memory.pin(None, "Ana is vegetarian.", user_id="ana")
    memory.add_documents([("trains", "The Porto train leaves at 9.")], collection="kb")
    model = RecordingChatModel(messages=replies())
    middleware = CtxBudgetMiddleware(model="gpt-4o", budget=1200, memory=memory)
    agent = create_agent(
        model, system_prompt="Be brief.", middleware=[middleware], checkpointer=InMemorySaver()
    )
    users = ("ana", "ben", "eva")
    for turn in range(20):  # back-to-back: the write-behind queue is rarely empty
        for user in users:
            agent.invoke(
                {"messages": [HumanMessage(f"Turn {turn}: when does the Porto train leave?")]},
                {"configurable": {"thread_id": f"trip-{user}"}},
                context={"user_id": user},
            )
    memory.flush()
    assert loud(caplog) == []
    spans = traced.get_finished_spans()
    assert {"ctxbudget.write", "ctxbudget.assemble"} <= {s.name for s in spans}
    failed = [
        (s.name, s.status.description) for s in spans if s.status.status_code is StatusCode.ERROR
    ]
    assert failed == []
    for user in users:  # every message once, in order
        stored = memory.history(f"trip-{user}")
        assert [r.text for r in stored if r.role == "user"] == [
            f"Turn {turn}: when does the Porto train leave?" for turn in range(20)
        ]
        assert len(stored) == 40 and len({r.id for r in stored}) == 40


def test_a_message_reused_under_one_id_with_other_text_is_still_logged(
    memory: ContextMemory, caplog: pytest.LogCaptureFixture
) -> None:
    # The fallback fires on a real conflict: the first message stays, the other is logged.
    # A conflict is a message this middleware did not store (another worker stored "q1"):
    # one it stored, given again with other text, is an edit, in the first turn too
    # (tests/langchain/test_lc_store_stateful.py).
    caplog.set_level(logging.INFO)
    model = RecordingChatModel(messages=replies())
    middleware = CtxBudgetMiddleware(model="gpt-4o", budget=1200, memory=memory)
    agent = create_agent(model, system_prompt="Be brief.", middleware=[middleware])
    context = {"session_id": "reused", "user_id": "ana"}
    memory.add_message("reused", "user", "First wording", id="q1", user_id="ana")
    agent.invoke({"messages": [HumanMessage("Other wording", id="q1")]}, context=context)
    memory.flush()
    assert [r.text for r in memory.history("reused") if r.id == "q1"] == ["First wording"]
    warned = loud(caplog)
    assert warned and all("'q1'" in line and "different content" in line for line in warned)


# -- the memory: the same message again is the same write ----------------------------------
@pytest.fixture(params=["write-behind", "sync"])
def either(
    request: pytest.FixtureRequest, tmp_path: Path, embedder: OnnxEmbedder
) -> Iterator[ContextMemory]:
    behind = request.param == "write-behind"
    mem = ContextMemory(path=tmp_path / "chroma", embedder=embedder, write_behind=behind)
    yield mem
    mem.close()


def test_the_same_message_with_another_timestamp_is_a_no_op_and_other_text_is_refused(
    either: ContextMemory, traced: InMemorySpanExporter
) -> None:
    first = either.add_message("s1", "user", "Hi there", id="m1", timestamp=1_000.0)
    # Before it is stored (write-behind: still queued) and after.
    again = either.add_message("s1", "user", "Hi there", id="m1", timestamp=2_000.0)
    either.flush()
    later = either.add_message("s1", "user", "Hi there", id="m1", timestamp=3_000.0)
    assert first == again == later == "m1"
    with pytest.raises(StoreInputError, match=r"already stored with different content.*'m1'"):
        either.add_message("s1", "user", "Hi here", id="m1", timestamp=1_000.0)
    with pytest.raises(StoreInputError, match="different content"):
        either.add_message("s1", "assistant", "Hi there", id="m1", timestamp=1_000.0)
    with pytest.raises(StoreInputError, match="different content"):
        either.add_message("s1", "user", "Hi there", id="m1", name="Ana", timestamp=1_000.0)
    (stored,) = either.history("s1")
    assert (stored.id, stored.text, stored.timestamp) == ("m1", "Hi there", 1_000.0)
    writes = [s for s in traced.get_finished_spans() if s.name == "ctxbudget.write"]
    assert [s.status.status_code is StatusCode.ERROR for s in writes] == [False] * 3 + [True] * 3


def test_the_store_and_the_journal_replay_take_a_message_again_with_another_timestamp(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    store = ChromaStore(tmp_path / "chroma", embedder=embedder)
    try:
        message = Record("m1", "message", "Hi", session_id="s1", role="user", timestamp=1.0)
        (kept,) = store.add([message])
        later = dataclasses.replace(message, timestamp=5.0)
        assert store.add([later]) == [kept]  # a no-op: the first timestamp stays
        with pytest.raises(StoreInputError, match="different content"):
            store.add([dataclasses.replace(message, text="Hello")])
        # A writer that acknowledged the same message again (another memory object): stored
        # as a no-op, nothing refused, nothing left in its journal.
        writer = WriteBehind(store.add, WriteJournal(tmp_path / "j"))
        writer.submit([dataclasses.replace(message, timestamp=9.0)])
        writer.settle()
        writer.close()
        assert not list((tmp_path / "j").glob("*.jsonl"))
        journal = WriteJournal(tmp_path / "k")  # a writer that died with it acknowledged
        journal.append("b1", [dataclasses.replace(message, timestamp=7.0)])
        journal.close(remove=False)
        assert replay(tmp_path / "k", store.add) == 1
        assert not list((tmp_path / "k").iterdir())  # nothing refused, nothing kept
        (stored,) = store.session_messages(namespace="default", session_id="s1")
        assert (stored.text, stored.timestamp) == ("Hi", 1.0)
        # replace=True still sets a new timestamp.
        store.add([dataclasses.replace(message, timestamp=4.0)], replace=True)
        (stored,) = store.session_messages(namespace="default", session_id="s1")
        assert stored.timestamp == 4.0
    finally:
        store.close()
