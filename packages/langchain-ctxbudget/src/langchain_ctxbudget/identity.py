"""Who a model call belongs to: the run's session and user, and keys for its messages.

The session and user come from the middleware's arguments, the runtime context or the run's
config (`run_identity`). A session belongs to the user who started it: a run for another user
is refused (`session_owner`, `claim_owner`: `SessionOwnerError`), whether the session came
from a shared ``thread_id`` or from the middleware's own ``session_id=``.

With ``values=``, the middleware offers the run's user's saved values (`CtxBudgetStore`): the
namespace template the app names is filled with the run's user (`values_template`,
`values_scope`), as LangMem fills its tools' namespaces.

LangChain messages often have no ids; the middleware keys them by session, thread, position and
content, so a turn is stored once however many calls see it.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping, Sequence
from numbers import Integral
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage

from ctxbudget.core.ids import check_caller_id
from ctxbudget.errors import ConfigurationError, StoreInputError
from ctxbudget.memory.writing.owners import check_owner, claim_session

if TYPE_CHECKING:
    from langgraph.runtime import Runtime

    from ctxbudget.memory.context import ContextMemory
    from ctxbudget.store.sessions import Stamp

__all__ = [
    "DOOR",
    "claim_owner",
    "context_field",
    "fingerprint",
    "message_keys",
    "run_config",
    "run_identity",
    "run_thread",
    "session_owner",
    "text_value",
    "values_scope",
    "values_template",
]

#: The placeholders a ``values=`` template may hold, each naming the run's user (LangMem's own).
USER_PLACEHOLDERS = ("{user_id}", "{langgraph_user_id}")


def run_identity(
    runtime: Runtime[Any] | None, *, session_id: str | None, user_id: str | None
) -> tuple[str, str | None]:
    """The memory ``(session, user)`` of a run.

    The session: ``session_id`` when given, else ``session_id`` of the runtime context, else
    ``session_id`` or ``thread_id`` of the run's config, else the thread of the runtime. The
    user: ``user_id`` when given, else ``user_id`` of the runtime context or of the config,
    else the config's ``langgraph_user_id`` (LangMem's name for it).

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
    user = (
        user_id
        or context_field(context, "user_id")
        or text_value(configurable.get("user_id"))
        or text_value(configurable.get("langgraph_user_id"))
    )
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
    chained = 0  # messages the chain holds: digested only once a message without an id needs it
    scope = ":".join(part for part in (session, thread) if part)
    for index, message in enumerate(messages):
        if message.id:
            key = check_caller_id(message.id, f"message {index} ({message.type})")
        else:
            for earlier in range(chained, index + 1):
                chain.update(fingerprint(messages[earlier]))
            chained = index + 1
            key = f"{scope}:msg:{index}:{chain.copy().hexdigest()}".lstrip(":")
        if key in seen:
            key = f"{key}#{index}"
        seen.add(key)
        keys.append(key)
    return keys


def fingerprint(message: BaseMessage) -> bytes:
    """What tells one message from another, as bytes (its type, id, name, content, tool calls).

    A tool result's ``status="error"`` too (a success adds nothing: the bytes of every message
    stored before statuses were kept are unchanged).
    """
    calls = getattr(message, "tool_calls", None) or []
    fields: tuple[object, ...] = (
        message.type,
        message.id,
        message.name,
        message.content,
        [(c.get("id"), c.get("name"), c.get("args")) for c in calls],
        getattr(message, "tool_call_id", None),
    )
    if getattr(message, "status", None) == "error":
        fields += ("error",)
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
    """``value`` as an id: a non-empty str, or the text of an integer or a UUID; else None.

    LangGraph takes any ``thread_id`` (``{"thread_id": 1}`` is common; its checkpointers key
    threads by ``str(thread_id)``) and apps often number their users: such an id names the
    session or user by its text, never nobody (a run then found no session, or a user's run
    was not checked against the session's owner).
    """
    if isinstance(value, str):
        return value or None
    if isinstance(value, Integral | uuid.UUID) and not isinstance(value, bool):
        return str(value)
    return None


def values_template(values: object) -> tuple[str, ...] | None:
    """The middleware's ``values=``, checked: a namespace template, or None.

    A tuple of labels (LangGraph's rules: non-empty, no period), of which at most one is a
    placeholder for the run's user, ``"{user_id}"`` or ``"{langgraph_user_id}"``.

    Raises:
        ConfigurationError: not a tuple or list of such labels.
    """
    if values is None:
        return None
    example = "values=('memories', '{user_id}')"
    if isinstance(values, str) or not isinstance(values, Sequence) or not values:
        msg = f"values= is a namespace of the agent's store, like {example}; got {values!r:.80}"
        raise ConfigurationError(msg)
    template = tuple(values)
    for label in template:
        if not isinstance(label, str) or not label or "." in label:
            msg = (
                f"values={template!r:.120}: each label must be a non-empty str without '.' "
                f"(LangGraph's namespace rule), like {example}"
            )
            raise ConfigurationError(msg)
        if label.startswith("{") and label not in USER_PLACEHOLDERS:
            msg = (
                f"values={template!r:.120}: {label!r} is not a placeholder the middleware "
                f"fills; use one of {', '.join(USER_PLACEHOLDERS)} (the run's user)"
            )
            raise ConfigurationError(msg)
    if sum(label in USER_PLACEHOLDERS for label in template) > 1:
        msg = f"values={template!r:.120}: name the run's user once (one placeholder)"
        raise ConfigurationError(msg)
    return template


def values_scope(template: tuple[str, ...], user: str | None) -> tuple[tuple[str, ...], str | None]:
    """The namespace ``template`` names for a run of ``user``, and the user it belongs to.

    Either placeholder is the run's user (`run_identity`). A template without one names shared
    values (user None), like a `CtxBudgetStore` namespace shorter than its ``user_at``.

    Raises:
        StoreInputError: the template names the user and the run has none, or LangMem's
            placeholder is used and the config's ``langgraph_user_id`` (the namespace LangMem's
            tools write to) is another user than the run's.
    """
    position = next((i for i, label in enumerate(template) if label in USER_PLACEHOLDERS), None)
    if position is None:
        return template, None
    owner = user
    langmem = text_value(run_config().get("langgraph_user_id"))
    if template[position] == "{langgraph_user_id}" and langmem not in (None, owner):
        msg = (
            f"CtxBudgetMiddleware(values={template!r}): the run's user is {owner!r} but the "
            f"config's langgraph_user_id is {langmem!r}; give one user per run (the same in "
            "both), so no run is offered another user's values"
        )
        raise StoreInputError(msg)
    if owner is None:
        msg = (
            f"CtxBudgetMiddleware(values={template!r}) names the run's user, but this run has "
            "none: put user_id in the runtime context or the config's configurable (LangMem's "
            "langgraph_user_id), or pass user_id= to the middleware"
        )
        raise StoreInputError(msg)
    return (*template[:position], owner, *template[position + 1 :]), owner
