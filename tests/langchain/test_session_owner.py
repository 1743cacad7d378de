"""A session belongs to the user who started it: two users on one thread id (issue 39, item 4).

A real `create_agent` with the middleware and a memory; the thread id (or the middleware's own
``session_id=``) names the session. The second user's run is refused with `SessionOwnerError`
before its model call, and neither user's prompt ever holds the other's message.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from ctxbudget import ContextMemory, SessionOwnerError
from langchain_ctxbudget import CtxBudgetMiddleware
from tests.lc_fakes import RecordingChatModel

PIN = "my bank PIN is 4321"
BIKE = "my bike lock code is 8765"


def sent_text(model: RecordingChatModel) -> list[str]:
    return [" ".join(str(m.content) for m in messages) for messages, _ in model.calls]


def invoke(agent: Any, message: BaseMessage, config: dict[str, Any], *, use_async: bool) -> None:
    state = {"messages": [message]}
    if use_async:
        asyncio.run(agent.ainvoke(state, config, context={}))
    else:
        agent.invoke(state, config, context={})


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("given_session", [False, True], ids=["thread_id", "session_id="])
def test_a_second_user_on_one_session_is_refused_and_sees_nothing(
    memory: ContextMemory, use_async: bool, given_session: bool
) -> None:
    model = RecordingChatModel(messages=iter([AIMessage("ok", id=f"a{i}") for i in range(6)]))
    middleware = CtxBudgetMiddleware(
        model="gpt-4o",
        budget=2000,
        memory=memory,
        session_id="support" if given_session else None,
    )
    agent = create_agent(model, middleware=[middleware], context_schema=dict)
    session = "support" if given_session else "t1"

    def config(user: str) -> dict[str, Any]:
        return {"configurable": {"thread_id": "t1", "user_id": user}}

    invoke(agent, HumanMessage(f"alice: {PIN}", id="m1"), config("alice"), use_async=use_async)
    memory.flush()
    alice_calls = len(model.calls)
    with pytest.raises(SessionOwnerError) as refused:
        invoke(agent, HumanMessage(f"bob: {BIKE}", id="m2"), config("bob"), use_async=use_async)
    error = refused.value
    assert (error.session_id, error.owner, error.user_id) == (session, "alice", "bob")
    assert f"session {session!r}" in str(error) and "'alice'" in str(error)
    assert "their own session id" in str(error) and "thread_id" in str(error)
    assert len(model.calls) == alice_calls  # bob's prompt was never sent
    assert not any("4321" in text and "8765" in text for text in sent_text(model))
    memory.flush()
    stored = memory.history(session)
    assert [r.text for r in stored] == [f"alice: {PIN}", "ok"]
    assert {r.user_id for r in stored} == {"alice"}
    # alice goes on in her session; bob in his own thread
    invoke(agent, HumanMessage(f"alice: {PIN}", id="m1"), config("alice"), use_async=use_async)
    if not given_session:
        bob = {"configurable": {"thread_id": "t2", "user_id": "bob"}}
        invoke(agent, HumanMessage(f"bob: {BIKE}", id="m2"), bob, use_async=use_async)
        assert "4321" not in sent_text(model)[-1]
    assert all("8765" not in text for text in sent_text(model)[: alice_calls + 1])
