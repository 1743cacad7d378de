"""The middleware's copies (keys stored, candidates of a question) follow the session's generation.

An app's agent and an admin task share one folder: the admin deletes a user's session and
another user starts a session with the same id, with message ids that repeat (a client that
numbers its messages). The agent's next call must store and send the new user's messages, and
nothing of the old ones.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool

from ctxbudget import ContextMemory
from ctxbudget.store.chroma_store import ChromaStore
from langchain_ctxbudget import CtxBudgetMiddleware
from tests.lc_fakes import RecordingChatModel


def _run(agent: Any, messages: list[Any], user: str) -> list[Any]:
    context = {"session_id": "s1", "user_id": user}
    return list(agent.invoke({"messages": messages}, context=context)["messages"])


@pytest.fixture
def app_and_admin(tmp_path: Path, embedder: Any) -> Iterator[tuple[ContextMemory, ContextMemory]]:
    """Two memories on one folder (an app's and an admin task's), no write-behind."""
    folder = tmp_path / "chroma"
    app = ContextMemory(path=folder, embedder=embedder, write_behind=False)
    admin = ContextMemory(path=folder, embedder=embedder, write_behind=False)
    yield app, admin
    app.close()
    admin.close()


def _agent(model: Any, memory: ContextMemory) -> Any:
    middleware = CtxBudgetMiddleware(model="gpt-4o", budget=2000, memory=memory)
    return create_agent(model, middleware=[middleware], context_schema=dict)


def test_a_session_deleted_by_another_memory_and_reused_keeps_nothing_of_the_old(
    app_and_admin: tuple[ContextMemory, ContextMemory],
) -> None:
    app, admin = app_and_admin
    model = RecordingChatModel(messages=iter([AIMessage("ok", id=f"a{i}") for i in range(6)]))
    agent = _agent(model, app)
    _run(agent, [HumanMessage("alice: my PIN is 4321", id="m1")], "alice")
    _run(
        agent,
        [
            HumanMessage("alice: my PIN is 4321", id="m1"),
            AIMessage("ok", id="a0"),
            HumanMessage("alice: and my dog is Rex", id="m2"),
        ],
        "alice",
    )
    app.flush()
    assert [r.text for r in app.history("s1")][0] == "alice: my PIN is 4321"

    admin.delete_session("s1")
    admin.add_message("s1", "user", "bob: hello there", id="m0", user_id="bob")
    admin.flush()
    _run(agent, [HumanMessage("bob: my name is Bob", id="m1")], "bob")
    app.flush()

    stored = [(r.id, r.text) for r in admin.history("s1")]
    assert ("m1", "bob: my name is Bob") in stored  # stored, though "m1" was alice's key
    assert not any("alice" in text for _, text in stored)
    sent, _ = model.calls[-1]
    text = " ".join(str(m.content) for m in sent)
    assert "4321" not in text and "Rex" not in text
    assert "bob: hello there" in text


class _DeletingModel(RecordingChatModel):
    """A chat model whose call runs while an admin deletes the session (in its first call)."""

    admin: Any = None

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
        if self.admin is not None:
            self.admin.delete_session("s1")
            self.admin.flush()
            self.admin = None
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kw)


def test_a_session_deleted_during_the_model_call_gets_the_answer_and_not_the_deleted_turns(
    app_and_admin: tuple[ContextMemory, ContextMemory],
) -> None:
    # Stored as acknowledged (a write-behind's pending messages are not the other object's to
    # delete before they are flushed: docs/architecture.md).
    app, admin = app_and_admin
    model = _DeletingModel(messages=iter([AIMessage("noted", id=f"a{i}") for i in range(4)]))
    agent = _agent(model, app)
    turns = [HumanMessage("my PIN is 4321", id="m1"), AIMessage("ok", id="a-1")]
    _run(agent, [*turns, HumanMessage("my dog is Rex", id="m2")], "alice")
    app.flush()
    assert [r.id for r in admin.history("s1")] == ["m1", "a-1", "m2", "a0"]
    model.admin = admin  # the next run's call: the session is deleted while the model runs
    messages = [*turns, HumanMessage("my dog is Rex", id="m2"), AIMessage("noted", id="a0")]
    _run(agent, [*messages, HumanMessage("and my cat is Tom", id="m3")], "alice")
    app.flush()
    # The deletion acknowledged during the call holds: the run stores its answer (a new
    # message) and nothing the deletion removed.
    assert [(r.id, r.text) for r in admin.history("s1")] == [("a1", "noted")]


def test_a_thread_used_again_after_its_session_was_deleted_shares_no_prefix_with_its_old_life(
    app_and_admin: tuple[ContextMemory, ContextMemory],
) -> None:
    app, admin = app_and_admin
    calls: list[Any] = []
    model = RecordingChatModel(messages=iter([AIMessage("ok", id=f"a{i}") for i in range(8)]))
    middleware = CtxBudgetMiddleware(
        model="gpt-4o", budget=2000, memory=app, on_context=calls.append
    )
    agent = create_agent(model, middleware=[middleware], context_schema=dict)

    def run(messages: list[Any], user: str) -> None:
        config: Any = {"configurable": {"thread_id": "t1"}}
        agent.invoke({"messages": messages}, config, context={"session_id": "s1", "user_id": user})

    first = [HumanMessage("alice: my PIN is 4321", id="m1")]
    run(first, "alice")
    run([*first, AIMessage("ok", id="a0"), HumanMessage("alice: and my dog", id="m2")], "alice")
    app.flush()
    # The session's second call (its first was made before the session had records) shares
    # the system prompt and the first turn with it.
    assert calls[1].context.prefix_tokens > 0

    admin.delete_session("s1")
    admin.add_message("s1", "user", "alice: my PIN is 4321", id="m0", user_id="bob")
    admin.flush()
    # The same thread id, a new life of the session: its first call starts with what the old
    # life's last call started with, but shares no prefix with it.
    run([HumanMessage("alice: my PIN is 4321", id="m1")], "bob")
    assert calls[2].context.prefix_tokens is None
    assert middleware.last_context("t1") is calls[2].context


# Two users' runs naming one session (the middleware's session_id=, or one thread id): the
# second is refused (tests/langchain/test_session_owner.py).


# -- what a question's candidates draw from beyond the session (issue 39, item 3) ---------------

LOCKER, ALLERGY, HINGE = "7788", "peanuts", "olive oil"
QUESTION = "What is my locker code, what am I allergic to, and how do I oil the zebra gate hinge?"


@pytest.fixture(params=["embedded", pytest.param("server", marks=pytest.mark.integration)])
def app_and_admin_anywhere(
    request: pytest.FixtureRequest, tmp_path: Path, embedder: Any
) -> Iterator[tuple[ContextMemory, ContextMemory, Callable[[], ContextMemory]]]:
    """An app's memory, an admin's on the same folder or server collection, and fresh ones."""
    opened: list[ContextMemory] = []
    collection = f"t-{uuid.uuid4().hex[:12]}"

    def open_memory() -> ContextMemory:
        if request.param == "embedded":
            store = ChromaStore(tmp_path / "chroma", embedder=embedder)
        else:
            server = request.getfixturevalue("chroma_server")
            store = ChromaStore(url=server.url, embedder=embedder, collection=collection)
        opened.append(ContextMemory(store=store))
        return opened[-1]

    yield open_memory(), open_memory(), open_memory
    for memory in opened:
        memory.close()


def _seed(admin: ContextMemory) -> None:
    """Alice's other session, her user-wide pin and a document chunk, stored by the admin."""
    admin.add_message("s-old", "user", f"My locker code is {LOCKER}.", id="o1", user_id="alice")
    admin.pin(user_id="alice", text=f"Alice is allergic to {ALLERGY}.", id="diet")
    text = f"Zebra gate manual: oil the hinge with {HINGE} every May."
    assert admin.add_documents([("zebra", text)], collection="kb") == ["zebra#0"]
    admin.flush()


def _remove(admin: ContextMemory) -> None:
    """The admin deletes the other session, unpins the fact, deletes the chunk, and flushes."""
    assert admin.delete_session("s-old") == 1
    assert admin.unpin("diet", user_id="alice")
    assert admin.store.delete(["zebra#0"], namespace=admin.namespace, collection="kb") == 1
    admin.flush()


def _sent(call: tuple[list[Any], list[Any]]) -> str:
    return " ".join(str(m.content) for m in call[0])


@pytest.mark.parametrize("who", ["given", "the session's"])
@pytest.mark.parametrize("when", ["sync", "async", "next run"])
def test_a_question_gathered_before_an_admin_removal_offers_nothing_it_removed(
    app_and_admin_anywhere: tuple[ContextMemory, ContextMemory, Callable[[], ContextMemory]],
    when: str,
    who: str,
) -> None:
    # The user is the run's (given), or none: then the user of the session's newest turn.
    app, admin, open_memory = app_and_admin_anywhere
    _seed(admin)
    if who != "given":
        admin.add_message("s1", "user", "Hello, it is Alice.", id="e0", user_id="alice")
        admin.flush()

    @tool
    def lookup(topic: str) -> str:
        """Look a topic up."""
        if when != "next run":  # between the question's model calls
            _remove(admin)
        return f"nothing found on {topic}"

    answers = [
        AIMessage("hello", id="a0"),
        AIMessage("", tool_calls=[{"name": "lookup", "args": {"topic": "x"}, "id": "c1"}]),
        AIMessage("done", id="a1"),
        AIMessage("done again", id="a2"),
    ]
    model = RecordingChatModel(messages=iter(answers))
    middleware = CtxBudgetMiddleware(model="gpt-4o", budget=2000, memory=app)
    agent = create_agent(model, tools=[lookup], middleware=[middleware], context_schema=dict)
    context = {"session_id": "s1", "user_id": "alice"} if who == "given" else {"session_id": "s1"}
    # The session has a turn already: its question's calls keep one generation.
    greeting = [HumanMessage("hi", id="q0")]
    agent.invoke({"messages": greeting}, context=context)
    app.flush()
    model.calls.clear()
    question = [*greeting, AIMessage("hello", id="a0"), HumanMessage(QUESTION, id="q1")]
    if when == "async":
        asyncio.run(agent.ainvoke({"messages": question}, context=context))
    else:
        agent.invoke({"messages": question}, context=context)
    first = _sent(model.calls[0])
    assert LOCKER in first and ALLERGY in first and HINGE in first  # all three were offered
    if when == "next run":
        _remove(admin)
        # The app runs the same question again (a retry): the next model call.
        model.messages = iter([AIMessage("done again", id="a2")])
        agent.invoke({"messages": question}, context=context)
    after = _sent(model.calls[-1])
    assert LOCKER not in after and ALLERGY not in after and HINGE not in after

    fresh = open_memory().candidates("s1", QUESTION, budget=2000, user_id="alice")
    offered = " ".join(item.text for item in fresh.items)
    assert LOCKER not in offered and ALLERGY not in offered and HINGE not in offered


def test_a_finished_run_keeps_none_of_its_candidates(tmp_path: Path, embedder: Any) -> None:
    """A long-lived agent keeps no candidate pool per question asked: only runs in flight.

    Kept for every question (1,024), the pools were most of what a process allocated and kept
    (684 objects a turn), which every full garbage collection walks.
    """
    memory = ContextMemory(path=tmp_path / "chroma", embedder=embedder, write_behind=False)
    middleware = CtxBudgetMiddleware(model="gpt-4o", budget=2000, memory=memory)
    model = RecordingChatModel(messages=iter([AIMessage("ok", id=f"a{i}") for i in range(4)]))
    agent = create_agent(model, middleware=[middleware], context_schema=dict)
    kept = middleware._recalled._items  # noqa: SLF001 - what the middleware keeps between runs
    state: list[Any] = []
    for turn in range(3):
        state = _run(
            agent, [*state, HumanMessage(f"question {turn} about Lisbon", id=f"q{turn}")], "ana"
        )
        assert not kept, f"turn {turn}: candidates kept after the run ended"
    assert len(model.calls) == 3
    memory.close()


def test_a_new_message_the_memory_cannot_keep_fails_the_call_after_stored_turns(
    tmp_path: Path, embedder: Any
) -> None:
    """Only messages not stored yet are checked before a call: the new one still is."""
    from ctxbudget import MemoryConfig, StoreInputError

    memory = ContextMemory(
        path=tmp_path / "chroma",
        embedder=embedder,
        write_behind=False,
        config=MemoryConfig(max_message_chars=200),
    )
    middleware = CtxBudgetMiddleware(model="gpt-4o", budget=2000, memory=memory)
    model = RecordingChatModel(messages=iter([AIMessage("ok", id=f"a{i}") for i in range(4)]))
    agent = create_agent(model, middleware=[middleware], context_schema=dict)
    state = _run(agent, [HumanMessage("where do I live?", id="q0")], "ana")
    state = _run(agent, [*state, HumanMessage("and my dog?", id="q1")], "ana")
    for bad in ("x" * 201, "lone \ud800 surrogate"):
        with pytest.raises(StoreInputError):
            _run(agent, [*state, HumanMessage(bad, id="q2")], "ana")
    assert len(model.calls) == 2  # the model was not called with either
    memory.flush()
    assert [r.id for r in memory.history("s1")] == ["q0", "a0", "q1", "a1"]
    memory.close()
