"""Who a model call belongs to: the run's session and user, and keys for its messages.

The session and user come from the middleware's arguments, the runtime context or the run's
config (`run_identity`). A session belongs to the user who started it: a run for another user
is refused (`session_owner`, `claim_owner`: `SessionOwnerError`), whether the session came
from a shared ``thread_id`` or from the middleware's own ``session_id=``.

LangChain messages often have no ids; the middleware keys them by session, thread, position and
content, so a turn is stored once however many calls see it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage

from ctxbudget.core.ids import check_caller_id
from ctxbudget.errors import StoreInputError
from ctxbudget.memory.writing.owners import check_owner, claim_session

if TYPE_CHECKING:
    from langgraph.runtime import Runtime

    from ctxbudget.memory.context import ContextMemory
    from ctxbudget.store.sessions import Stamp

__all__ = [
    "DOOR",
    "claim_owner",
    "context_field",
    "message_keys",
    "run_config",
    "run_identity",
    "run_thread",
    "session_owner",
    "text_value",
]


def run_identity(
    runtime: Runtime[Any] | None, *, session_id: str | None, user_id: str | None
) -> tuple[str, str | None]:
    """The memory ``(session, user)`` of a run.

    The session: ``session_id`` when given, else ``session_id`` of the runtime context, else
    ``session_id`` or ``thread_id`` of the run's config, else the thread of the runtime. The
    user: ``user_id`` when given, else ``user_id`` of the runtime context or of the config.

    Raises:
        StoreInputError: no session id anywhere.
    """
    context = getattr(runtime, "context", None)
    configurable = run_config()
    session = (
        session_id
        or context_field(context, "session_id")
        or text_value(configurable.get("session_id"))
        or text_value(configurable.get("thread_id"))
    )
    if session is None:
        info = getattr(runtime, "execution_info", None)
        session = text_value(getattr(info, "thread_id", None))
    if session is None:
        msg = (
            "CtxBudgetMiddleware(memory=...) needs a session id: pass session_id=, put "
            "session_id in the runtime context, or run the agent with a thread_id"
        )
        raise StoreInputError(msg)
    user = user_id or context_field(context, "user_id") or text_value(configurable.get("user_id"))
    return session, user


#: The door named in a refusal (`ctxbudget.memory.writing.owners`).
DOOR = "CtxBudgetMiddleware"


def session_owner(
    memory: ContextMemory, stamp: Stamp | None, session: str, user: str | None
) -> None:
    """Refuse a run whose user is not the owner of the session (``stamp``: as already read).

    The session's stamp, which the middleware reads anyway, names the user who started it: a
    run for another user (a shared ``thread_id``, or the middleware's own ``session_id=``)
    would read and write that user's conversation. No extra read.

    Raises:
        SessionOwnerError: the session was started by another user.
    """
    check_owner(stamp, namespace=memory.namespace, session_id=session, user_id=user, door=DOOR)


def claim_owner(memory: ContextMemory, session: str, user: str | None) -> None:
    """Before the first write to a session: claim it for the run's user (`claim_session`).

    Raises:
        SessionOwnerError: another user started (or, at the same moment, claimed) it.
    """
    claim_session(memory, session, user_id=user, door=DOOR)


def message_keys(
    messages: Sequence[BaseMessage], session: str | None, thread: str | None
) -> list[str]:
    """Item (and record) ids: the message ids; for a message without one, a derived key.

    The derived key holds the session, the thread, the position and a digest of the
    conversation up to and including the message: the same message of the same conversation
    gets the same key on every call, and two different messages (another thread of the
    session, another text at that place, another history before it) never share one.

    Raises:
        InvalidItemError: a message id in ctxbudget's own id space.
    """
    keys: list[str] = []
    seen: set[str] = set()
    chain = hashlib.blake2b(digest_size=8)
    scope = ":".join(part for part in (session, thread) if part)
    for index, message in enumerate(messages):
        chain.update(_fingerprint(message))
        if message.id:
            key = check_caller_id(message.id, f"message {index} ({message.type})")
        else:
            key = f"{scope}:msg:{index}:{chain.copy().hexdigest()}".lstrip(":")
        if key in seen:
            key = f"{key}#{index}"
        seen.add(key)
        keys.append(key)
    return keys


def _fingerprint(message: BaseMessage) -> bytes:
    """What tells one message from another, as bytes (for the digest of a conversation)."""
    calls = getattr(message, "tool_calls", None) or []
    fields = (
        message.type,
        message.id,
        message.name,
        message.content,
        [(c.get("id"), c.get("name"), c.get("args")) for c in calls],
        getattr(message, "tool_call_id", None),
    )
    return repr(fields).encode("utf-8", "surrogatepass") + b"\x00"


def run_thread(runtime: Runtime[Any] | None) -> str | None:
    """The LangGraph thread of the run (None without a checkpointer)."""
    thread = text_value(run_config().get("thread_id"))
    if thread is None:
        info = getattr(runtime, "execution_info", None)
        thread = text_value(getattr(info, "thread_id", None))
    return thread


def run_config() -> Mapping[str, Any]:
    """The configuration of the running graph (empty outside one)."""
    from langgraph.config import get_config

    try:
        config = get_config()
    except RuntimeError:  # outside a runnable (a direct call in a test or a script)
        return {}
    configurable = config.get("configurable")
    return configurable if isinstance(configurable, Mapping) else {}


def context_field(context: object, name: str) -> str | None:
    """A str field of the runtime context (a dict or an object), or None."""
    if context is None:
        return None
    value = context.get(name) if isinstance(context, Mapping) else getattr(context, name, None)
    return text_value(value)


def text_value(value: object) -> str | None:
    """`value` if it is a non-empty str, else None."""
    return value if isinstance(value, str) and value else None
