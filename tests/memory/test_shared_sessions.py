"""Sessions with several users (a group chat): each user's words stay theirs.

`ContextMemory` takes several users in one session. A user's message in a session another user
started lives in that session's home; what reaches one user outside the session, and what
`delete_user` removes, follows whose words a record holds:

- `delete_user(U)` removes the sessions U started whole (also one where none of U's records is
  left: its entry names U), and in a session another user started only U's records (it removed
  that session whole before 2026-11-29, the other user's own messages with it);
- a summary of a stretch with several users' messages carries no user: it is offered in its
  session only, never to one of them in another session or a search by user (it carried the
  stretch's last user, who then saw the others' words elsewhere), and `delete_user(U)` removes
  a summary quoting any of U's messages.

Real parts: an embedded Chroma, the default embedder, tiktoken.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ctxbudget import ContextMemory, MemoryConfig

SECRET = "Alice's bank PIN is 4471."


@pytest.fixture
def memory(tmp_path: Path, embedder: Any) -> Any:
    memory = ContextMemory(
        path=tmp_path / "db", embedder=embedder, config=MemoryConfig(other_sessions=True)
    )
    yield memory
    memory.close()


def texts(memory: ContextMemory, session: str) -> list[str]:
    return [r.text for r in memory.history(session)]


def offered(memory: ContextMemory, session: str, query: str, user: str) -> list[str]:
    ctx = memory.assemble(session, query, budget=8000, user_id=user)
    return [it.text for it in [*ctx.included, *(p.item for p in ctx.pruned)]]


def test_deleting_a_user_leaves_another_users_session_to_that_user(
    memory: ContextMemory,
) -> None:
    memory.add_message("bobs", "user", "Welcome to the shared flat chat.", user_id="bob")
    memory.add_message("alices", "user", "My own notes.", user_id="alice")
    memory.add_message("bobs", "user", "The spare key is under the mat.", user_id="alice")
    memory.add_message("alices", "user", "Bob says hi in Alice's chat.", user_id="bob")
    memory.flush()
    memory.delete_user("alice")
    assert texts(memory, "bobs") == ["Welcome to the shared flat chat."]
    assert texts(memory, "alices") == []  # Alice's session goes whole, Bob's words in it too
    listed = memory.store.list_sessions(namespace=memory.namespace, user_id="alice")
    assert listed == []
    found = memory.store.find(namespace=memory.namespace, user_id="alice")
    assert found == []


def test_a_summary_of_two_users_reaches_neither_elsewhere(memory: ContextMemory) -> None:
    memory.add_message("shared", "user", SECRET, id="a1", user_id="alice")
    memory.add_message("shared", "user", "See you at the station.", id="b1", user_id="bob")
    memory.add_message("shared", "user", "Bob again, alone.", id="b2", user_id="bob")
    memory.add_message("shared", "user", "And once more.", id="b3", user_id="bob")
    memory.flush()
    assert memory.summarize("shared", keep_recent=0, stretch=2)
    summaries = memory.store.find(
        namespace=memory.namespace, kinds=["summary"], session_id="shared"
    )
    by_cover = {s.summary_of: s.user_id for s in summaries}
    assert by_cover == {("a1", "b1"): None, ("b2", "b3"): "bob"}
    memory.add_message("bobs", "user", "What was that number?", user_id="bob")
    memory.flush()
    assert not [t for t in offered(memory, "bobs", "What is the bank PIN?", "bob") if "4471" in t]
    hits = memory.search("bank PIN", k=20, kinds=None, user_id="bob")
    assert not [h for h in hits if "4471" in h.hit.record.text]
    # In its own session it is offered, as every summary of the session is.
    assert [t for t in offered(memory, "shared", "bank PIN?", "bob") if "4471" in t]


def test_deleting_a_user_removes_the_summaries_that_quote_them(memory: ContextMemory) -> None:
    memory.add_message("bobs", "user", "Bob opens the chat.", id="b0", user_id="bob")
    memory.add_message("bobs", "user", "Bob goes on.", id="b1", user_id="bob")
    memory.add_message("bobs", "user", SECRET, id="a1", user_id="alice")
    memory.add_message("bobs", "user", "Bob answers.", id="b2", user_id="bob")
    memory.flush()
    assert len(memory.summarize("bobs", keep_recent=0, stretch=2)) == 2
    memory.delete_user("alice")
    left = memory.store.find(namespace=memory.namespace, session_id="bobs")
    assert sorted((r.kind, r.id) for r in left) == [
        ("message", "b0"),
        ("message", "b1"),
        ("message", "b2"),
        ("summary", next(r.id for r in left if r.kind == "summary")),
    ]
    assert not [r for r in left if "4471" in r.text]
    (summary,) = [r for r in left if r.kind == "summary"]
    assert summary.summary_of == ("b0", "b1")  # the one of (a1, b2) went with a1


def test_a_session_the_user_started_goes_though_none_of_theirs_is_left(
    memory: ContextMemory,
) -> None:
    # Its entry names the user who started it: it went on naming a deleted user (and the doors
    # refused the others their conversation in that user's name).
    memory.add_message("s1", "user", "alice: hello", id="a1", user_id="alice")
    memory.add_message("s1", "user", "bob: hi alice", id="b1", user_id="bob")
    memory.flush()
    memory.store.delete(["a1"], namespace=memory.namespace, session_id="s1")
    memory.delete_user("alice")
    assert memory.history("s1") == []
    assert memory.store.session_stamp(namespace=memory.namespace, session_id="s1") is None
    memory.add_message("s1", "user", "bob: starting over", user_id="bob")
    memory.flush()
    stamp = memory.store.session_stamp(namespace=memory.namespace, session_id="s1")
    assert stamp is not None and stamp.owner == "bob"


def test_a_summary_goes_with_its_author_not_with_an_id(memory: ContextMemory) -> None:
    # Summaries list their authors: one quoting alice goes with her though her message was
    # deleted before; bob's stays though alice's message took an id it covers since.
    memory.add_message("bobs", "user", "Bob opens.", id="b0", user_id="bob")
    memory.add_message("bobs", "user", SECRET, id="a1", user_id="alice")
    memory.add_message("bobs", "user", "Bob first.", id="m1", user_id="bob")
    memory.add_message("bobs", "user", "Bob second.", id="m2", user_id="bob")
    memory.flush()
    assert len(memory.summarize("bobs", keep_recent=0, stretch=2)) == 2
    memory.store.delete(["a1", "m1"], namespace=memory.namespace, session_id="bobs")
    memory.add_message("bobs", "user", "Alice's own m1.", id="m1", user_id="alice")
    memory.flush()
    assert memory.delete_user("alice") == 2  # her m1 and the summary quoting a1
    left = memory.store.find(namespace=memory.namespace, kinds=["summary"], session_id="bobs")
    assert [(r.summary_of, r.user_id) for r in left] == [(("m1", "m2"), "bob")]
    assert [r.id for r in memory.history("bobs")] == ["b0", "m2"]


@pytest.mark.parametrize("write_behind", [True, False])
def test_the_owner_is_the_first_calls_user_however_soon_another_follows(
    tmp_path: Path, embedder: Any, write_behind: bool
) -> None:
    """Write-behind stores calls made within its 50 ms together: the first call still decides.

    A session started without a user has no owner, also when a user's call follows at once
    (it made that user the owner, and the home theirs, when the two were stored in one store
    call: the store takes the first user a write names; `store_groups` now keeps such a call
    apart). Within one call, the first user named decides (a system message has none).
    """
    memory = ContextMemory(path=tmp_path / "db", embedder=embedder, write_behind=write_behind)
    try:
        memory.add_message("group", "user", "Welcome, everyone.")
        memory.add_message("group", "user", "Hi, I am Bob.", user_id="bob")
        memory.add_message("bobs", "user", "Bob's own notes.", user_id="bob")
        memory.add_message("bobs", "user", "Alice drops by.", user_id="alice")
        memory.add_messages(
            "chat",
            [
                {"role": "system", "content": "Be kind."},
                {"role": "user", "content": "Hi", "user_id": "carol"},
            ],
        )
        memory.flush()
        assert stamp(memory, "group").owner == ""
        assert stamp(memory, "bobs").owner == "bob"
        assert stamp(memory, "chat").owner == "carol"
        assert texts(memory, "group") == ["Welcome, everyone.", "Hi, I am Bob."]
    finally:
        memory.close()


def stamp(memory: ContextMemory, session: str) -> Any:
    found = memory.store.session_stamp(namespace=memory.namespace, session_id=session)
    assert found is not None
    return found
