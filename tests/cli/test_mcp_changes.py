"""Only a session's owner changes it through ``ctxbudget mcp``: group chats are read, not changed.

The app writes a session without a user (a group chat: the first message without a user, then
bob's and another without a user, and a pinned fact), as `ContextMemory.add_message` allows. A
call with a user (the server's ``--user``, or a ``user_id``) may read it and add to it, but its
changes (``forget_session``, ``forget_messages``, ``edit_message``, ``forget_fact`` with a
``session_id``) are refused with `SessionOwnerError`, nothing changed; the user's own session,
a call without a user and a session that does not exist are not refused. `MemoryTools` over a
real embedded `ContextMemory`, without the MCP SDK (the server hands a tool's error on as is).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxbudget import ContextMemory, SessionOwnerError
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.errors import StoreInputError
from ctxbudget.mcp.tools import MemoryTools
from ctxbudget.store.chroma_store import ChromaStore

Change = Callable[..., Any]

#: Each tool that changes a session, as a call on session ``s`` (its ids made by `_group`),
#: with the call's ``user_id`` if any (``forget_session`` takes none: the server's ``--user``).
CHANGES: dict[str, Change] = {
    "forget_session": lambda tools, s: tools.forget_session(s),
    "forget_messages": lambda tools, s, **user: tools.forget_messages(
        s, [f"{s}-bob", f"{s}-anon"], **user
    ),
    "edit_message": lambda tools, s, **user: tools.edit_message(
        s, f"{s}-anon", "rewritten", **user
    ),
    "forget_fact": lambda tools, s, **user: tools.forget_fact(f"{s}-pin", session_id=s, **user),
}
#: A user's calls: on a ``--user`` server, or naming ``user_id`` on a server for every user.
USER_CALLS = [
    *((tool, "--user") for tool in sorted(CHANGES)),
    *((tool, "user_id") for tool in sorted(CHANGES) if tool != "forget_session"),
]


@pytest.fixture(scope="module")
def memory(
    tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder
) -> Iterator[ContextMemory]:
    folder: Path = tmp_path_factory.mktemp("mcp-changes")
    with ContextMemory(store=ChromaStore(folder / "store", embedder=embedder)) as opened:
        yield opened


def _fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _group(memory: ContextMemory) -> str:
    """A session the app started without a user, holding bob's message too, and a pin."""
    session = _fresh("group")
    memory.add_message(session, "system", "The app opened this group chat.", id=f"{session}-0")
    memory.flush()  # its first write has no user: the session has no owner
    memory.add_message(
        session, "user", "Bob's locker code is 4417.", id=f"{session}-bob", user_id="bob"
    )
    memory.add_message(session, "user", "Someone said hello.", id=f"{session}-anon")
    memory.pin(session, "The group meets on Fridays.", id=f"{session}-pin")
    memory.flush()
    stamp = memory.store.session_stamp(namespace=memory.namespace, session_id=session)
    assert stamp is not None and stamp.owner == ""
    return session


def _contents(
    memory: ContextMemory, session: str
) -> tuple[list[tuple[str, str | None, str]], bool]:
    """The session's messages (id, user, text) and whether its pinned fact is still there."""
    memory.flush()
    messages = [(r.id, r.user_id, r.text) for r in memory.history(session)]
    pins = memory.search("group meets Fridays", session_id=session, kinds=("pinned",))
    return messages, any(hit.hit.record.id == f"{session}-pin" for hit in pins)


@pytest.mark.parametrize(("tool", "how"), USER_CALLS)
def test_a_user_cannot_change_a_session_started_without_a_user(
    memory: ContextMemory, tool: str, how: str
) -> None:
    session = _group(memory)
    before = _contents(memory, session)
    assert len(before[0]) == 3 and before[1]
    if how == "--user":
        tools, door, user = MemoryTools(memory, user="maya"), "ctxbudget mcp --user maya", {}
    else:
        tools, door, user = MemoryTools(memory), "ctxbudget mcp does not", {"user_id": "maya"}
    with pytest.raises(SessionOwnerError) as refused:
        CHANGES[tool](tools, session, **user)
    error = refused.value
    assert isinstance(error, PermissionError)
    assert (error.session_id, error.owner, error.user_id) == (session, "", "maya")
    said = str(error)
    for needle in (
        repr(session),
        "was started without a user",
        "other users' messages",
        door,
        "nothing was changed",
        "without --user",
        "ContextMemory directly",
    ):
        assert needle in said, (needle, said)
    assert _contents(memory, session) == before  # bob's message, the texts and the pin stay


def test_reads_and_new_messages_of_a_user_still_reach_a_group_chat(memory: ContextMemory) -> None:
    session = _group(memory)
    maya = MemoryTools(memory, user="maya")
    said = maya.remember(session, "user", "Maya joined the group.", id=f"{session}-maya")
    assert said["user_id"] == "maya"
    found = maya.recall("Maya joined", session_id=session)["hits"]
    assert f"{session}-maya" in [hit["id"] for hit in found]
    context = maya.context(session, "When does the group meet?", budget=2000)
    assert "Fridays" in str(context["messages"])


@pytest.mark.parametrize("tool", sorted(CHANGES))
def test_a_user_changes_their_own_session(memory: ContextMemory, tool: str) -> None:
    session = _fresh("own")
    maya = MemoryTools(memory, user="maya")  # the ids CHANGES names, all maya's here
    for suffix, text in (("bob", "My locker code is 4417."), ("anon", "Hello there.")):
        maya.remember(session, "user", text, id=f"{session}-{suffix}")
    maya.remember_fact("The group meets on Fridays.", session_id=session, id=f"{session}-pin")
    _assert_changed(memory, session, tool, CHANGES[tool](maya, session))


@pytest.mark.parametrize("tool", sorted(CHANGES))
def test_a_call_without_a_user_changes_a_group_chat(memory: ContextMemory, tool: str) -> None:
    session = _group(memory)
    _assert_changed(memory, session, tool, CHANGES[tool](MemoryTools(memory), session))


def _assert_changed(memory: ContextMemory, session: str, tool: str, got: dict[str, Any]) -> None:
    messages, pinned = _contents(memory, session)
    texts = [text for _, _, text in messages]
    if tool == "forget_session":
        assert got["removed"] >= 3 and messages == [] and not pinned
    elif tool == "forget_messages":
        assert got["removed"] == 2 and not any(
            i.endswith(("-bob", "-anon")) for i, _, _ in messages
        )
    elif tool == "edit_message":
        assert got["id"] == f"{session}-anon" and "rewritten" in texts
    else:
        assert got["removed"] is True and not pinned


def test_a_session_that_does_not_exist_is_not_refused(memory: ContextMemory) -> None:
    maya, session = MemoryTools(memory, user="maya"), _fresh("none")
    assert maya.forget_session(session)["removed"] == 0
    assert maya.forget_messages(session, ["m1"])["removed"] == 0
    assert maya.forget_fact("p1", session_id=session)["removed"] is False
    with pytest.raises(StoreInputError, match="holds no message 'm1'"):  # the core's own answer
        maya.edit_message(session, "m1", "new text")
    assert memory.store.session_stamp(namespace=memory.namespace, session_id=session) is None


def test_another_users_session_is_refused_naming_its_owner(memory: ContextMemory) -> None:
    session = _fresh("bobs")
    bob = MemoryTools(memory, user="bob")
    bob.remember(session, "user", "Bob's own conversation.", id=f"{session}-bob")
    with pytest.raises(SessionOwnerError, match="belongs to another user") as refused:
        MemoryTools(memory, user="maya").forget_session(session)
    assert (refused.value.owner, refused.value.user_id) == ("bob", "maya")
    assert [text for _, _, text in _contents(memory, session)[0]] == ["Bob's own conversation."]


def test_remember_takes_an_empty_name_as_none_and_says_so_of_a_wrong_one(
    memory: ContextMemory,
) -> None:
    tools, session = MemoryTools(memory, user="maya"), _fresh("names")
    tools.remember(session, "user", "No name given.", name="", id=f"{session}-1")
    memory.flush()
    (stored,) = memory.history(session)
    assert "_name" not in stored.metadata  # "" is no speaker's name, as None
    with pytest.raises(StoreInputError) as refused:
        tools.remember(session, "user", "A number as a name.", name=7)  # type: ignore[arg-type]
    assert 'name must be a str, the speaker\'s name (None or "": none), got 7' in str(refused.value)
    assert len(memory.history(session)) == 1
