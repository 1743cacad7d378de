"""A deleted session's, or user's, messages leave the inclusion logs of other sessions too.

With ``keep_context``, an assembly of one session that recalled a message of another session
of the same user keeps its text in that session's log (named by its scoped id,
``ctxbudget:session:["gym","q1"]``). Until 2026-11-30 `delete_session` dropped the deleted
session's own log only (`replace_message` and `delete_messages` already dropped the records
that recalled an edited message), so a deleted session's text stayed in the store, readable
with ``contexts()``; `delete_user` kept it in the logs of the other users who wrote in their
sessions, or in whose sessions they wrote. Records that quote none of it stay, and so does
what another user's logs hold of their own. Records still queued in the write-behind log queue
(of the memory that deletes, or of another memory on the same folder or server in this
process) are never written. Embedded Chroma and a Chroma server; the default embedder.
"""

from __future__ import annotations

import pytest

from ctxbudget import ContextMemory
from ctxbudget.core.assemble import ContextAssembler
from ctxbudget.core.ids import scoped_id
from ctxbudget.core.items import ContextItem, Tier
from ctxbudget.tokens.counter import TokenCounter
from tests.conftest import StoreFactory
from tests.memory.test_message_edits_logs import OLD, QUERY, logged, seeded

UNRELATED = "an unrelated note about tulips"
BOBS = "Bob keeps his bike in the shed by the gym"
ANAS = "Ana's spare locker key is under the mat"


def unrelated(memory: ContextMemory, session: str, user: str | None) -> None:
    """Log a record of ``session`` that quotes nothing of another session."""
    counter = TokenCounter.for_model("gpt-4o")
    items = [
        ContextItem("n1", UNRELATED, tier=Tier.RETRIEVED),
        ContextItem("ctxbudget:query", "tulips?", tier=Tier.QUERY, role="user"),
    ]
    result = ContextAssembler(counter).assemble(items, budget=200)
    memory.inclusion_log.log(
        result, session_id=session, user_id=user, model="gpt-4o", counter=counter
    )


def hold(memory: ContextMemory) -> None:
    """Keep what this memory logs queued until `release`."""
    memory.store.logs.linger = memory.store.logs.max_wait = 60.0


def release(memory: ContextMemory) -> None:
    memory.store.logs.linger, memory.store.logs.max_wait = 0.05, 5.0


@pytest.mark.parametrize("by", ["itself", "another memory"])
def test_delete_session_drops_other_sessions_records_that_recalled_it(
    open_store: StoreFactory, by: str
) -> None:
    memory = seeded(open_store)
    admin = ContextMemory(store=open_store()) if by == "another memory" else memory
    assert OLD in str(memory.assemble("chat", QUERY, budget=2000, user_id="ana").to_messages())
    unrelated(memory, "chat", "ana")
    memory.assemble("bob-s", QUERY, budget=2000, user_id="bob")
    assert OLD in logged(memory, "chat")
    bobs = logged(memory, "bob-s")
    admin.delete_session("gym")
    for reader in {id(m): m for m in (memory, admin)}.values():
        chat = logged(reader, "chat")
        assert OLD not in chat and UNRELATED in chat
        assert len(reader.contexts("chat")) == 1
        assert logged(reader, "bob-s") == bobs
        assert reader.contexts("gym") == []
    admin.close()
    memory.close()


def test_clear_drops_other_sessions_records_that_recalled_what_it_cleared(
    open_store: StoreFactory,
) -> None:
    # clear() without pins deletes the session's messages by id (`ChromaStore.delete`): until
    # 2026-11-30 it dropped only the session's own log records naming them.
    memory = seeded(open_store)
    memory.assemble("chat", QUERY, budget=2000, user_id="ana")
    unrelated(memory, "chat", "ana")
    assert OLD in logged(memory, "chat")
    memory.clear("gym")
    chat = logged(memory, "chat")
    assert OLD not in chat and UNRELATED in chat
    memory.close()


@pytest.mark.parametrize("by", ["itself", "another memory"])
def test_queued_records_that_recalled_a_deleted_session_are_never_written(
    open_store: StoreFactory, by: str
) -> None:
    memory = seeded(open_store)
    admin = ContextMemory(store=open_store()) if by == "another memory" else memory
    hold(memory)
    memory.assemble("chat", QUERY, budget=2000, user_id="ana")
    unrelated(memory, "chat", "ana")
    assert memory.store.logs.read(memory.namespace, "chat") == []  # both queued
    admin.delete_session("gym")
    release(memory)
    chat = logged(memory, "chat")
    assert OLD not in chat and UNRELATED in chat
    assert len(memory.contexts("chat")) == 1
    admin.close()
    memory.close()


def shared(memory: ContextMemory) -> None:
    """Bob writes in Ana's session "gym", and Ana in Bob's session "team"."""
    memory.add_message("gym", "user", BOBS, id="b2", user_id="bob")
    memory.add_message("team", "user", "Bob's team meets on Fridays", id="t1", user_id="bob")
    memory.add_message("team", "user", ANAS, id="t2", user_id="ana")
    memory.flush()


@pytest.mark.parametrize("queued", [False, True])
def test_delete_user_drops_other_users_records_that_recalled_what_went_with_them(
    open_store: StoreFactory, queued: bool
) -> None:
    memory = seeded(open_store)
    admin = ContextMemory(store=open_store())
    shared(memory)
    if not queued:  # Bob recalls his own words in Ana's session from his other session
        memory.assemble("bob-s", "where is Bob's bike?", budget=4000, user_id="bob")
        assert BOBS in logged(memory, "bob-s")
    hold(memory)
    if queued:
        memory.assemble("bob-s", "where is Bob's bike?", budget=4000, user_id="bob")
    unrelated(memory, "bob-s", "bob")
    memory.assemble("team", "when does the team meet?", budget=4000, user_id="bob")
    assert memory.store.logs.read(memory.namespace, "team") == []  # queued
    admin.delete_user("ana")  # Ana's session "gym" goes whole, Bob's words with it
    release(memory)
    for reader in (memory, admin):
        bobs = logged(reader, "bob-s")
        assert BOBS not in bobs and UNRELATED in bobs
        assert [r.user_id for r in reader.contexts("bob-s")] == ["bob"]
        assert ANAS not in logged(reader, "team")
        assert reader.contexts("gym") == []
    # Bob's words in his own sessions stay, and are logged when recalled.
    memory.assemble("bob-s", "when does the team meet?", budget=4000, user_id="bob")
    assert "on Fridays" in logged(memory, "bob-s")
    admin.close()
    memory.close()


def test_a_store_level_delete_user_drops_records_without_a_user_that_recalled_them(
    open_store: StoreFactory,
) -> None:
    """`ChromaStore.delete_user` keeps sessions with other records; their recall goes anyway.

    A record logged without a user (an adapter's own, `ContextMemory.record`) in a session
    Ana started recalls as her: it names her message of "gym" by its scoped id. "gym" and
    "desk" stay (Bob's message, one without a user), and Ana's entries in ``meta`` are gone
    when the logs are dropped: the sessions she was a member of are read all the same.
    """
    memory = seeded(open_store)
    memory.add_message("gym", "user", BOBS, id="b2", user_id="bob")
    memory.add_message("desk", "user", "Ana's desk is by the window", id="d1", user_id="ana")
    memory.add_message("desk", "user", "A note left without a user", id="d2")
    memory.flush()
    counter = TokenCounter.for_model("gpt-4o")
    items = [
        ContextItem(scoped_id(("session", "gym"), "q1"), OLD, tier=Tier.RETRIEVED),
        ContextItem("ctxbudget:query", QUERY, tier=Tier.QUERY, role="user"),
    ]
    result = ContextAssembler(counter).assemble(items, budget=200)
    memory.inclusion_log.log(
        result, session_id="desk", user_id=None, model="gpt-4o", counter=counter
    )
    unrelated(memory, "desk", None)
    assert OLD in logged(memory, "desk")
    memory.store.delete_user(namespace=memory.namespace, user_id="ana")
    desk = logged(memory, "desk")
    assert OLD not in desk and UNRELATED in desk
    assert [r.id for r in memory.contexts("gym")] == []
    memory.close()
