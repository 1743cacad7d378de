"""An edited message's old text leaves the inclusion logs of the user's other sessions too.

With ``keep_context``, an assembly of one session that recalled a message of another session
of the same user keeps the old text in that other session's log (named by its scoped id,
``ctxbudget:session:["gym","q1"]``). Until 2026-11-30 `replace_message` and `delete_messages`
dropped the records of the edited session's own log only, so the old text stayed in the store,
readable with ``contexts()``. Another user's logs are kept. Embedded Chroma and a Chroma
server; the default embedder.
"""

from __future__ import annotations

import json

import pytest

from ctxbudget import ContextMemory
from ctxbudget.memory import InclusionLogConfig
from tests.conftest import StoreFactory

OLD = "My locker code at the gym is 4471"
NEW = "My locker code at the gym is 9902"
QUERY = "what is my gym locker code?"
LOG = InclusionLogConfig(keep_context=True)


def logged(memory: ContextMemory, session: str) -> str:
    memory.flush()
    return json.dumps([r.context for r in memory.contexts(session)], default=str)


def seeded(open_store: StoreFactory) -> ContextMemory:
    memory = ContextMemory(store=open_store(), inclusion_log=LOG)
    memory.add_messages(
        "gym",
        [
            {"id": "q1", "role": "user", "text": OLD},
            {"id": "a1", "role": "assistant", "text": "Noted, I will remember it."},
        ],
        user_id="ana",
    )
    memory.add_message("chat", "user", "Hello again.", id="q1", user_id="ana")  # same id
    memory.add_message("bob-s", "user", "Bob's words about a gym locker", id="b1", user_id="bob")
    memory.flush()
    return memory


@pytest.mark.parametrize("edit", ["replace", "delete"])
def test_another_sessions_log_that_recalled_the_message_loses_the_old_text(
    open_store: StoreFactory, edit: str
) -> None:
    memory = seeded(open_store)
    admin = ContextMemory(store=open_store())  # another object edits
    assert OLD in str(memory.assemble("chat", QUERY, budget=2000, user_id="ana").to_messages())
    memory.assemble("bob-s", QUERY, budget=2000, user_id="bob")
    assert OLD in logged(memory, "chat")
    bobs = logged(memory, "bob-s")
    if edit == "replace":
        admin.replace_message("gym", "q1", NEW)
    else:
        admin.delete_messages("gym", ["q1"])
    for reader in (memory, admin):
        assert OLD not in logged(reader, "chat")
        assert logged(reader, "bob-s") == bobs
    memory.close()
    admin.close()


def test_a_queued_record_that_recalled_the_message_is_never_written(
    open_store: StoreFactory,
) -> None:
    memory = seeded(open_store)
    memory.store.logs.linger = 5.0  # the assembly's record waits in the queue
    memory.assemble("chat", QUERY, budget=2000, user_id="ana")
    memory.replace_message("gym", "q1", NEW)
    memory.store.logs.linger = 0.05
    assert OLD not in logged(memory, "chat")
    memory.close()
