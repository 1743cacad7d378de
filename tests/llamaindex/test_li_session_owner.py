"""A session belongs to the user who started it, at the LlamaIndex memory (issue 39, item 4).

Two `CtxBudgetMemory` objects for two users on one session id, in a real `SimpleChatEngine`
(LlamaIndex's `MockLLM`): the second user's chat is refused with `SessionOwnerError` before its
prompt is built, and nothing of theirs is stored. Without a user id nothing is checked.
"""

from __future__ import annotations

import pytest
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
