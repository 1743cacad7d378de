"""The middleware's copies (keys stored, candidates of a question) follow the session's generation.

An app's agent and an admin task share one folder: the admin deletes a user's session and
another user starts a session with the same id, with message ids that repeat (a client that
numbers its messages). The agent's next call must store and send the new user's messages, and
nothing of the old ones.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage

from ctxbudget import ContextMemory
from langchain_ctxbudget import CtxBudgetMiddleware
from tests.lc_fakes import RecordingChatModel


def _run(agent: Any, messages: list[Any], user: str) -> list[Any]:
    context = {"session_id": "s1", "user_id": user}
    return list(agent.invoke({"messages": messages}, context=context)["messages"])


def test_a_session_deleted_by_another_memory_and_reused_keeps_nothing_of_the_old(
    tmp_path: Path, embedder: Any
) -> None:
    app = ContextMemory(path=tmp_path / "chroma", embedder=embedder, write_behind=False)
    admin = ContextMemory(path=tmp_path / "chroma", embedder=embedder, write_behind=False)
    model = RecordingChatModel(messages=iter([AIMessage("ok", id=f"a{i}") for i in range(6)]))
    middleware = CtxBudgetMiddleware(model="gpt-4o", budget=2000, memory=app)
    agent = create_agent(model, middleware=[middleware], context_schema=dict)
    try:
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
    finally:
        app.close()
        admin.close()
