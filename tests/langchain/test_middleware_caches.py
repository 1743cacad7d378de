"""The middleware's copies (keys stored, candidates of a question) follow the session's generation.

An app's agent and an admin task share one folder: the admin deletes a user's session and
another user starts a session with the same id, with message ids that repeat (a client that
numbers its messages). The agent's next call must store and send the new user's messages, and
nothing of the old ones.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage

from ctxbudget import ContextMemory
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


def test_a_session_id_given_to_the_middleware_warns_once_when_two_users_share_it(
    app_and_admin: tuple[ContextMemory, ContextMemory], caplog: pytest.LogCaptureFixture
) -> None:
    app, _ = app_and_admin
    model = RecordingChatModel(messages=iter([AIMessage("ok", id=f"a{i}") for i in range(8)]))
    fixed = CtxBudgetMiddleware(model="gpt-4o", budget=2000, memory=app, session_id="support")
    agent = create_agent(model, middleware=[fixed], context_schema=dict)
    with caplog.at_level("WARNING", logger="langchain_ctxbudget"):
        for n, user in enumerate(["alice", "alice", "bob", "carol"]):
            message = HumanMessage(f"{user}: hello", id=f"m{n}")
            agent.invoke({"messages": [message]}, context={"user_id": user})
    said = [r.getMessage() for r in caplog.records if "share that conversation" in r.getMessage()]
    assert len(said) == 1 and "'alice' and 'bob'" in said[0] and "'support'" in said[0]
    # The session from each run's context: the app chose the ids, nothing to say.
    caplog.clear()
    per_run = CtxBudgetMiddleware(model="gpt-4o", budget=2000, memory=app)
    agent = create_agent(model, middleware=[per_run], context_schema=dict)
    with caplog.at_level("WARNING", logger="langchain_ctxbudget"):
        for user in ("dan", "erin"):
            _run(agent, [HumanMessage(f"{user}: hi", id=f"x-{user}")], user)
    assert not [r for r in caplog.records if "share that conversation" in r.getMessage()]
