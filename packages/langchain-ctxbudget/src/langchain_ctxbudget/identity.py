"""Who a model call belongs to: the run's session and user, and keys for its messages.

LangChain messages often have no ids; the middleware keys them by session, thread, position
and content, so a turn is stored once however many calls see it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage

from ctxbudget.core.ids import check_caller_id

if TYPE_CHECKING:
    from langgraph.runtime import Runtime

__all__ = ["context_field", "message_keys", "run_config", "run_thread", "text_value"]


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
