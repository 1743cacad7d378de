"""A message given to `ContextMemory` as the record the store keeps, every check made.

No store is needed: `ctxbudget ingest` checks every message of a file with these before it
opens (or creates) a store, and `Writer.message_record` is this with the memory's settings.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from ctxbudget.core.items import ROLES
from ctxbudget.core.numbers import shown
from ctxbudget.errors import InvalidItemError, StoreInputError
from ctxbudget.memory.inputs import given_id, message_calls, to_timestamp, user_metadata
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.store.records import Record, require_name

__all__ = ["check_length", "message_record"]


def message_record(
    session_id: str,
    index: int,
    message: object,
    user_id: str | None,
    *,
    namespace: str,
    config: MemoryConfig,
) -> Record:
    """The record of message ``index`` of a call (a dict or a ``(role, text)`` pair).

    A message without an id gets a new random one (``"<session>:<hex>"``).

    Raises:
        StoreInputError: the message cannot be stored; the message names its index.
    """
    if isinstance(message, tuple) and len(message) == 2:
        message = {"role": message[0], "text": message[1]}
    if not isinstance(message, Mapping):
        msg = (
            f"message {index} is a {type(message).__name__}; pass dicts with 'role' and "
            "'text' (or 'content'), or (role, text) tuples"
        )
        raise StoreInputError(msg)
    role = message.get("role")
    if not isinstance(role, str) or role not in ROLES:
        msg = f"message {index}: role must be one of {sorted(ROLES)}, got {shown(role)}"
        raise StoreInputError(msg)
    text = message.get("text", message.get("content"))
    if not isinstance(text, str):
        msg = f"message {index}: text must be a str, got {type(text).__name__}"
        raise StoreInputError(msg)
    check_length(config, f"message {index}", text)
    metadata = user_metadata(f"message {index}", message.get("metadata"))
    call_ids = message_calls(index, message.get("tool_calls"), metadata)
    if call_ids and role != "assistant":  # no provider takes calls in another turn
        msg = (
            f"message {index}: only an assistant message calls tools, got tool_calls on a "
            f"{role} message; store the calls as the assistant's turn"
        )
        raise StoreInputError(msg)
    status = _status(index, role, message.get("status"))
    if status == "error":  # "success", the default, is not stored
        metadata["_status"] = status
    name = message.get("name")
    if name is not None and name != "":  # None or "": a message without a speaker's name
        if not isinstance(name, str):
            msg = (
                f'message {index}: name must be a str, the speaker\'s name (None or "": '
                f"none), got {shown(name)}"
            )
            raise StoreInputError(msg)
        metadata["_name"] = require_name(f"message {index}: name", name)  # Unicode checked
    if not text.strip() and not call_ids and not (role == "tool" and message.get("tool_call_id")):
        msg = (
            f"message {index} has empty text; store only messages with content (a turn "
            "that calls tools, or a tool result, may be empty)"
        )
        raise StoreInputError(msg)
    try:
        timestamp = to_timestamp(message.get("timestamp"))
    except InvalidItemError as exc:
        msg = f"message {index}: {exc}"
        raise StoreInputError(msg) from exc
    given = given_id(f"message {index}", message.get("id"), "None for a new one")
    return Record(
        id=given or f"{session_id}:{uuid.uuid4().hex[:16]}",
        kind="message",
        # A turn that only calls tools has no text: no placeholder is stored or sent.
        text=text if text.strip() else "",
        namespace=namespace,
        session_id=session_id,
        user_id=user_id or message.get("user_id"),
        role=role,
        timestamp=timestamp,
        tool_calls=call_ids,
        tool_call_id=message.get("tool_call_id"),
        metadata=metadata,
    )


def _status(index: int, role: str, status: object) -> str | None:
    """A tool result's ``status``: ``"success"`` or ``"error"``, as LangChain's ``ToolMessage``.

    Read for a tool result only: on another message it is one of the fields ignored (chat
    exports mark every message with a status of their own).
    """
    if status is None or role != "tool":
        return None
    if status not in ("success", "error"):
        msg = (
            f"message {index}: a tool result's status must be 'success' or 'error', got "
            f"{shown(status)}"
        )
        raise StoreInputError(msg)
    return str(status)


def check_length(config: MemoryConfig, what: str, text: str) -> None:
    """Refuse a message or pinned fact over `MemoryConfig.max_message_chars`."""
    limit = config.max_message_chars
    if len(text) > limit:
        msg = (
            f"{what} is {len(text):,} characters; the limit is {limit:,} "
            "(MemoryConfig.max_message_chars): store long text with add_documents (it is cut "
            "into chunks), or raise the limit"
        )
        raise StoreInputError(msg)
