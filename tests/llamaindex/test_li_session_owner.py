"""A session belongs to the user who started it, at the LlamaIndex memory (issue 39, item 4).

Two `CtxBudgetMemory` objects for two users on one session id, in a real `SimpleChatEngine`
(LlamaIndex's `MockLLM`): the second user's chat is refused with `SessionOwnerError` before its
prompt is built, and nothing of theirs is stored. Without a user id nothing is checked.
"""

from __future__ import annotations

import pytest
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms import MockLLM

from ctxbudget import ContextMemory, SessionOwnerError
from llama_index.ctxbudget import CtxBudgetMemory


def test_a_second_user_on_one_session_is_refused(context_memory: ContextMemory) -> None:
    def engine(user: str | None) -> tuple[SimpleChatEngine, CtxBudgetMemory]:
        memory = CtxBudgetMemory.from_defaults(
            memory=context_memory, session_id="s1", user_id=user, token_limit=1000
        )
        return SimpleChatEngine.from_defaults(llm=MockLLM(max_tokens=8), memory=memory), memory

    alice, _ = engine("alice")
    alice.chat("alice: my bank PIN is 4321")
    context_memory.flush()
    bob, bob_memory = engine("bob")
    with pytest.raises(SessionOwnerError) as refused:
        bob.chat("bob: what is my PIN?")
    error = refused.value
    assert (error.session_id, error.owner, error.user_id) == ("s1", "alice", "bob")
    assert "CtxBudgetMemory" in str(error) and "their own session id" in str(error)
    for call in (lambda: bob_memory.get("PIN"), lambda: bob_memory.put_messages([]),
                 bob_memory.clear):  # fmt: skip
        with pytest.raises(SessionOwnerError):
            call()
    context_memory.flush()
    stored = context_memory.history("s1")
    assert stored and {r.user_id for r in stored} == {"alice"}
    assert not any("bob" in r.text for r in stored)
    # no user: nothing is checked (ContextMemory's own rule: a session may hold several users)
    anyone, _ = engine(None)
    anyone.chat("a note without a user")


def test_a_session_started_a_moment_ago_and_still_queued_is_refused_too(
    context_memory: ContextMemory,
) -> None:
    # The memory's own acknowledged messages (write-behind, not stored yet) count: the door
    # reads the owner once they are stored, as every read of the memory waits for them. Before,
    # it found no owner: alice was served bob's message, and her put claimed bob's session.
    context_memory.add_message("s1", "user", "bob: my locker code is 4471", user_id="bob")
    door = CtxBudgetMemory(
        memory=context_memory, token_limit=8000, session_id="s1", user_id="alice"
    )
    with pytest.raises(SessionOwnerError) as refused:
        door.get("what is the locker code?")
    assert refused.value.owner == "bob"
    context_memory.add_message("s2", "user", "bob: hello", user_id="bob")
    door = CtxBudgetMemory(
        memory=context_memory, token_limit=8000, session_id="s2", user_id="alice"
    )
    with pytest.raises(SessionOwnerError):
        door.put(ChatMessage(role="user", content="alice: this is my session now"))
    context_memory.flush()
    stamp = context_memory.store.session_stamp(namespace=context_memory.namespace, session_id="s2")
    assert stamp is not None and stamp.owner == "bob"
    assert [r.user_id for r in context_memory.history("s2")] == ["bob"]
