"""Deleting some messages of a session, and replacing one in its place (an edit).

`ContextMemory.delete_messages` and `ContextMemory.replace_message`, after the messages
acknowledged by this process's memories on the store are stored (`_settle_before_delete`).
The store does the rest under its lock (`ctxbudget.store.message_edits`): the message's vector,
token counts and text in one record, the summaries and log records quoting it, new stamps.
This memory's copy of the session (`SessionIndexes`) is dropped at once; every other copy sees
the session's new generation on its next call.

A replacement is the stored message with what the call gives: a field left None keeps the
stored value (role, time, user, name, tool calls, metadata), so ``replace_message(s, id, text)``
changes the text only. A name, tool calls or metadata are removed with ``""``, ``[]``, ``{}``.
A message deleted by another process while it is replaced stays deleted, and the replace is
refused (``... was deleted while it was replaced``; `ctxbudget.store.tombstones`). A task's id
(`push_task`) is refused as one: these calls edit messages only.

Every refusal is a `StoreInputError` that names the call (``replace_message of 'm1': ...``,
``delete_messages: ...``) and ends with what happened (``nothing was changed``/``deleted``):
the arguments and the whole replacement are checked (the store's own checks included, a lone
surrogate in the text too) before anything is read or written (`_refusing`).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ctxbudget.core.ids import INTERNAL_PREFIX, internal_id
from ctxbudget.core.numbers import shown
from ctxbudget.errors import StoreInputError
from ctxbudget.memory.inputs import check_message_id
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.memory.reading.held_indexes import SessionIndexes
from ctxbudget.memory.reading.record_items import with_tokens
from ctxbudget.memory.writing.message_records import message_record
from ctxbudget.store.records import MetadataValue, Record, require_name
from ctxbudget.tokens.counter import TokenCounter

if TYPE_CHECKING:
    from ctxbudget.store.chroma_store import ChromaStore

__all__ = ["Replacement", "delete_messages", "replace_message"]

_TASK_IDS = internal_id("task", "")  # push_task's ids: "ctxbudget:task:<n>"


@dataclasses.dataclass(frozen=True, slots=True)
class Replacement:
    """What `ContextMemory.replace_message` was given: None keeps the stored value."""

    text: str
    role: str | None = None
    user_id: str | None = None
    timestamp: float | datetime | str | None = None
    metadata: Mapping[str, MetadataValue] | None = None
    name: str | None = None
    tool_calls: Sequence[Mapping[str, Any]] | Sequence[str] | None = None
    tool_call_id: str | None = None
    status: str | None = None


def delete_messages(
    store: ChromaStore,
    namespace: str,
    indexes: SessionIndexes,
    session_id: str,
    ids: Sequence[str],
) -> int:
    """Delete these messages of the session (and what quotes them); how many existed."""
    with _refusing("delete_messages", "deleted"):
        session_id = str(require_name("session_id", session_id))
        if isinstance(ids, str | bytes) or not isinstance(ids, Sequence):
            msg = f"ids must be a list of message ids, got {shown(ids)}" + (
                f"; pass [{ids!r}]" if isinstance(ids, str) else ""
            )
            raise StoreInputError(msg)
        wanted = [str(require_name("id", given)) for given in ids]
        for given in wanted:
            _check_id(given, "delete_messages", "deletes")
    if not wanted:
        return 0
    try:
        return store.delete_messages(wanted, namespace=namespace, session_id=session_id)
    finally:
        indexes.forget(session_id)  # whatever went, this copy is not trusted


def replace_message(
    store: ChromaStore,
    namespace: str,
    indexes: SessionIndexes,
    session_id: str,
    id: str,  # noqa: A002 - as ContextMemory.replace_message takes it
    given: Replacement,
    *,
    counter: TokenCounter,
    config: MemoryConfig,
) -> str:
    """Replace the session's message ``id`` with ``given`` over its stored fields; its id."""
    with _refusing("replace_message", "changed"):
        session_id = str(require_name("session_id", session_id))
        id = str(require_name("id", id))  # noqa: A001 - a numpy str is taken as its str
        _check_id(id, "replace_message", "replaces")
        if given.user_id is not None:
            require_name("user_id", given.user_id)
    with _refusing(f"replace_message of {id!r}", "changed"):
        old = _stored_message(store, namespace, session_id, id)
        record = _record(session_id, id, given, old, namespace=namespace, config=config)
        try:
            store.check([record])  # before the tokens are counted: a lone surrogate too
        except StoreInputError as exc:
            problem = str(exc).replace(f"record 0 (id {id!r}): ", "", 1)
            raise StoreInputError(problem) from exc
        record = with_tokens(record, {counter.name: counter.count(record.text)})
    try:
        with _refusing(f"replace_message of {id!r}", "changed"):  # deleted meanwhile, say
            store.replace_message(record)
    finally:
        indexes.forget(session_id)
    return id


def _check_id(given: str, where: str, does: str) -> None:
    """Refuse a task's id (`push_task`) as one, then any other id of ctxbudget's own."""
    if given.startswith(_TASK_IDS):
        msg = (
            f"{given!r} is the id of a task (push_task; an id that starts with "
            f"{INTERNAL_PREFIX!r} is one of ctxbudget's own), not of a message: {where} {does} "
            "messages only; end a task with pop_task"
        )
        raise StoreInputError(msg)
    check_message_id(given, where)


@contextlib.contextmanager
def _refusing(where: str, nothing: str) -> Iterator[None]:
    """A `StoreInputError` raised in it names ``where`` and says nothing was ``nothing``."""
    try:
        yield
    except StoreInputError as exc:
        problem = str(exc)
        for done in ("; nothing was written", "; nothing was changed", "; nothing was deleted"):
            problem = problem.removesuffix(done)
        if not problem.startswith(where.split(" ", 1)[0]):
            problem = f"{where}: {problem}"
        msg = f"{problem}; nothing was {nothing}"
        raise StoreInputError(msg) from exc


def _stored_message(store: ChromaStore, namespace: str, session_id: str, id: str) -> Record:  # noqa: A002
    found = store.get([id], namespace=namespace, session_id=session_id)
    if not found:
        msg = (
            f"session {session_id!r} of namespace {namespace!r} holds no message {id!r} to "
            "replace; store a new message with add_message; nothing was changed"
        )
        raise StoreInputError(msg)
    if found[0].kind != "message":
        msg = (
            f"{id!r} of session {session_id!r} is a {found[0].kind} record, not a message: "
            "replace_message replaces messages only; nothing was changed"
        )
        raise StoreInputError(msg)
    return found[0]


def _record(
    session_id: str,
    id: str,  # noqa: A002
    given: Replacement,
    old: Record,
    *,
    namespace: str,
    config: MemoryConfig,
) -> Record:
    """The message to store: ``given`` over ``old``, checked as `add_message` checks one."""
    if given.user_id is not None and given.user_id != old.user_id:
        stored = "without a user" if old.user_id is None else f"by user {old.user_id!r}"
        msg = (
            f"message {id!r} of session {session_id!r} was stored {stored}, not by user "
            f"{given.user_id!r}: a replacement keeps its message's user; nothing was changed"
        )
        raise StoreInputError(msg)
    if given.role not in (None, "assistant") and given.tool_calls is None and old.tool_calls:
        msg = (
            f"message {id!r} of session {session_id!r} calls tools ({', '.join(old.tool_calls)}) "
            f"and only an assistant message does: pass tool_calls=[] with role={given.role!r}; "
            "nothing was changed"
        )
        raise StoreInputError(msg)
    own = {k: v for k, v in old.metadata.items() if not k.startswith("_")}
    name = old.metadata.get("_name") if given.name is None else given.name
    role = old.role if given.role is None else given.role
    status = given.status
    if status is None and role == "tool":  # a tool result's stored status; none for others
        status = old.metadata.get("_status")  # type: ignore[assignment]
    message = {
        "role": role,
        "status": status,
        "text": given.text,
        "id": id,
        "timestamp": old.timestamp if given.timestamp is None else given.timestamp,
        "metadata": own if given.metadata is None else given.metadata,
        "name": name,
        "tool_calls": list(old.tool_calls) if given.tool_calls is None else given.tool_calls,
        "tool_call_id": old.tool_call_id if given.tool_call_id is None else given.tool_call_id,
    }
    try:
        record = message_record(
            session_id, 0, message, old.user_id, namespace=namespace, config=config
        )
    except StoreInputError as exc:
        problem = str(exc).replace("message 0: ", "", 1)
        problem = problem.replace("message 0 ", "the replacement ", 1)
        raise StoreInputError(problem) from exc
    if given.tool_calls is None and "_tool_calls" in old.metadata:  # the calls as stored
        record = dataclasses.replace(
            record, metadata={**record.metadata, "_tool_calls": old.metadata["_tool_calls"]}
        )
    if record.tool_call_id == "":
        record = dataclasses.replace(record, tool_call_id=None)
    return record
