"""Sessions have one owner at the doors that serve users: who started a session, and the check.

A session's entry in the store names its **owner**, the user of its first write (`Stamp.owner`,
"" for a session started without a user). `ContextMemory.add_message` itself takes several
users in one session (a group chat); the doors that serve one user per call (the MCP server,
the LangChain middleware, the LlamaIndex memory) call these functions so that a session
started by one user is never silently continued by another:

- `check_owner`: refuse a call whose user is not the owner of a stamp the door already read
  (no extra read).
- `check_session_owner`: before a read, read the session's stamp and check it.
- `check_session_changer`: before a change (a delete, an edit, an unpin) in an existing
  session, read its stamp and refuse a user who does not own it: another user's session, and a
  session started without a user too (it may hold other users' messages, a group chat).
- `claim_session`: before a write, make the user the owner of a new session (the entry is
  created with Chroma's ``add``, first write wins, and read back), then check. Of two users
  writing a new session id at the same moment (two processes on one server), one owns it and
  the other is refused: never both into one conversation.

Both read the stamp once the memory's own acknowledged messages are stored (as every read of
the memory does): a session whose first message this memory acknowledged a moment ago, still
queued by write-behind, has its owner already (it had none, and another user was served that
message, or claimed the session, before 2026-11-29).

>>> claim_session(memory, "s1", user_id="maya", door="ctxbudget mcp")  # doctest: +SKIP
Stamp(generation='...', last=-1, version=0, owner='maya')
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctxbudget.errors import SessionOwnerError

if TYPE_CHECKING:
    from ctxbudget.memory.context import ContextMemory
    from ctxbudget.store.sessions import Stamp

__all__ = ["check_owner", "check_session_changer", "check_session_owner", "claim_session"]

# What `check_session_changer` tells a user refused a change in a session without an owner.
_WITHOUT_A_USER = "make the change from a call without a user, or with ContextMemory directly"


def check_owner(
    stamp: Stamp | None, *, namespace: str, session_id: str, user_id: str | None, door: str
) -> None:
    """Refuse ``user_id`` if the session of ``stamp`` was started by another user.

    Args:
        stamp: the session's stamp as the door read it (None: no entry, a new session).
        namespace: the session's namespace (named in the message).
        session_id: the session.
        user_id: the call's user (None: no user, nothing to check).
        door: what the caller used, named in the message (``"CtxBudgetMiddleware"``).

    Raises:
        SessionOwnerError: the session has an owner and it is not ``user_id``.
    """
    if stamp is None or user_id is None or not stamp.owner or stamp.owner == user_id:
        return
    msg = (
        f"session {session_id!r} belongs to another user: it was started by user "
        f"{stamp.owner!r} (namespace {namespace!r}), and {door} does not continue one user's "
        f"session for another (user {user_id!r}), so nothing was read or written; give each "
        "user their own session id (with LangChain, their own thread_id)"
    )
    raise SessionOwnerError(msg, session_id=session_id, owner=stamp.owner, user_id=user_id)


def claim_session(
    memory: ContextMemory, session_id: str, *, user_id: str | None, door: str
) -> Stamp | None:
    """Claim a new session for ``user_id`` (or check an existing one's owner) before a write.

    One read by id for a session that exists; for a new one, its entry is created with
    ``user_id`` as owner (Chroma's ``add``: the first of two concurrent writers wins) and read
    back. Without a user, nothing is read, claimed or checked.

    Returns:
        The session's stamp after the claim (None: no user, nothing read).

    Raises:
        SessionOwnerError: the session was started (or, at the same moment, claimed) by
            another user; nothing was written.
    """
    if user_id is None:
        return None
    store, namespace = memory.store, memory.namespace
    stamp = _settled_stamp(memory, session_id)
    if stamp is None and user_id is not None:
        stamp = store.claim_session(namespace=namespace, session_id=session_id, user_id=user_id)
    check_owner(stamp, namespace=namespace, session_id=session_id, user_id=user_id, door=door)
    return stamp


def check_session_owner(
    memory: ContextMemory, session_id: str, *, user_id: str | None, door: str
) -> Stamp | None:
    """Before a read: refuse ``user_id`` a session another user started (one read by id).

    Returns:
        The session's stamp (None: no user, nothing read; or no such session yet).

    Raises:
        SessionOwnerError: the session was started by another user; nothing was read.
    """
    if user_id is None:
        return None
    stamp = _settled_stamp(memory, session_id)
    namespace = memory.namespace
    check_owner(stamp, namespace=namespace, session_id=session_id, user_id=user_id, door=door)
    return stamp


def check_session_changer(
    memory: ContextMemory,
    session_id: str,
    *,
    user_id: str | None,
    door: str,
    change: str,
    instead: str = _WITHOUT_A_USER,
) -> Stamp | None:
    """Before a change in a session (a delete, an edit, an unpin): only its owner may make it.

    A read or a new message may go to a session started without a user (a group chat, several
    users' messages); a change may not, for a call with a user: it could delete or rewrite
    another user's messages there. One read by id. A session with no entry (none, or deleted)
    is not refused: there is nothing of anyone's to change. Without a user, nothing is read or
    checked (`ContextMemory`'s own rule).

    Args:
        memory: the memory the change is made in.
        session_id: the session.
        user_id: the call's user (None: no user, nothing to check).
        door: what the caller used, named in the message (``"ctxbudget mcp --user maya"``).
        change: what the call would do, named in the message (``"delete messages"``).
        instead: how to make the change at this door, named in the message (the default:
            a call without a user, or `ContextMemory` directly).

    Returns:
        The session's stamp (None: no user, nothing read; or no such session).

    Raises:
        SessionOwnerError: the session was started by another user, or without a user
            (``owner`` is then ""); nothing was changed.
    """
    if user_id is None:
        return None
    stamp = _settled_stamp(memory, session_id)
    namespace = memory.namespace
    if stamp is not None and not stamp.owner:
        msg = (
            f"session {session_id!r} (namespace {namespace!r}) was started without a user, so "
            f"it may hold other users' messages (a group chat): {door} does not let user "
            f"{user_id!r} {change} there (only a session's owner may delete, edit or unpin in "
            f"it), so nothing was changed; {instead}"
        )
        raise SessionOwnerError(msg, session_id=session_id, owner="", user_id=user_id)
    check_owner(stamp, namespace=namespace, session_id=session_id, user_id=user_id, door=door)
    return stamp


def _settled_stamp(memory: ContextMemory, session_id: str) -> Stamp | None:
    """The session's stamp once this memory's acknowledged messages are stored."""
    memory._settle()  # noqa: SLF001 - the memory's own rule for its reads
    return memory.store.session_stamp(namespace=memory.namespace, session_id=session_id)
