"""Storing a LlamaIndex conversation in a `ContextMemory`; system messages as pins of their own.

`CtxBudgetMemory` stores the messages put into it as the session's messages, except system
messages: each distinct one is a pinned record marked with `SYSTEM_KEY` (its order), sent first on
every ``get``, exactly as put, never cut (`llama_index.ctxbudget.system`), and forgotten with the
conversation (`clear_session`). A question put again when no reply followed it is a retry, stored
once (`retried_question`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from llama_index.core.base.llms.types import ChatMessage

from ctxbudget.core.numbers import shown
from ctxbudget.errors import InvalidItemError, StoreInputError
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.reading.session_state import is_stored_query
from ctxbudget.store.chroma_store import Record
from llama_index.ctxbudget.convert import role_of, text_of, to_record_payload

__all__ = [
    "SYSTEM_KEY",
    "Split",
    "LastPut",
    "check_writes",
    "clear_session",
    "last_put",
    "retried_question",
    "split_messages",
    "store_messages",
    "system_records",
]

SYSTEM_KEY = "li_system"
"""Metadata key of the pinned records that hold system messages (value: their order)."""


@dataclass(frozen=True, slots=True)
class Split:
    """Messages as they are stored.

    Attributes:
        systems: the texts of the system messages, in order.
        stored: the other messages as `ContextMemory.add_messages` takes them.
        last_given: the message given that ``stored[-1]`` was made from (None: none stored).
            A system message or one with nothing to keep after it changes nothing: it is still
            the session's last message.
        written: every message written, system messages too, in the order given (what
            `check_writes` checks).
    """

    systems: list[str]
    stored: list[dict[str, Any]]
    last_given: ChatMessage | None
    written: list[dict[str, Any]]


def split_messages(messages: Sequence[ChatMessage]) -> Split:
    """The system messages' texts and the others as stored (`Split`).

    Checks every message before anything is written.

    Raises:
        InvalidItemError: ``messages`` is not a list of ``ChatMessage``, or a malformed tool call.
    """
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
        msg = f"messages must be a list of LlamaIndex ChatMessage, got {shown(messages)}"
        raise InvalidItemError(msg)
    systems: list[str] = []
    stored: list[dict[str, Any]] = []
    written: list[dict[str, Any]] = []
    now = time.time()
    last_given: ChatMessage | None = None
    for index, message in enumerate(messages):
        if not isinstance(message, ChatMessage):
            msg = (
                f"message {index} is a {type(message).__name__}, not a LlamaIndex ChatMessage: "
                f"{shown(message)}; pass ChatMessage(role='user', content=...)"
            )
            raise InvalidItemError(msg)
        if role_of(message) == "system":
            text = text_of(message)
            if text.strip():
                systems.append(text)
                written.append({"role": "system", "text": text})
            continue
        entry = to_record_payload(message, index)
        if entry is not None:
            entry["timestamp"] = now
            stored.append(entry)
            written.append(entry)
            last_given = message
    return Split(systems, stored, last_given, written)


def check_writes(
    memory: ContextMemory, session_id: str, split: Split, *, user_id: str | None
) -> None:
    """The store's checks of every message ``split`` writes, nothing written.

    Run before a write changes anything (``set`` forgets the stored conversation first), so a
    message the store refuses (a lone surrogate, a text over ``max_message_chars``) leaves the
    session as it was.

    Raises:
        StoreInputError: the first message that cannot be stored.
    """
    if split.written:
        memory.writes.check_messages(session_id, split.written, user_id=user_id)


LastPut = tuple[str, str]
"""What a memory object stored last: its role and text (a hint for `retried_question`)."""


def last_put(stored: Sequence[dict[str, Any]]) -> LastPut | None:
    """The `LastPut` of a write that stored ``stored`` (None: it stored nothing)."""
    return (stored[-1]["role"], stored[-1]["text"]) if stored else None


def retried_question(
    memory: ContextMemory,
    session_id: str,
    stored: Sequence[dict[str, Any]],
    *,
    hint: LastPut | None = None,
) -> str | None:
    """The stored question the first of ``stored`` repeats, if it is a retry; else None.

    A retry is a user message put again when no reply followed it: the session's last
    message is a user message with the same text (`is_stored_query`) and the same speaker's
    name. The same words said after a reply, or by another speaker, are a new turn. Only the
    store decides (a retry through another memory object or process is recognised too), and it
    is read only when the writer's ``hint``
    (what it stored last; None: unknown) is that same question: reading waits for the
    messages acknowledged before (`ContextMemory.history`), which would cost every turn a
    store write of its own instead of one write for the turn. A stale hint can only miss a
    retry (the message is stored), never drop a message.
    """
    first = stored[0] if stored else None
    if first is None or first["role"] != "user" or first.get("tool_calls"):
        return None
    if hint is not None and (hint[0] != "user" or hint[1].strip() != first["text"].strip()):
        return None
    newest = memory.history(session_id, limit=1)
    last = newest[-1] if newest else None
    if last is None or not is_stored_query(last, first["text"]):
        return None
    # The same words by another speaker (a group chat) are that speaker's turn, not a retry.
    return last.id if (last.metadata.get("_name") or None) == (first.get("name") or None) else None


def store_messages(
    memory: ContextMemory,
    session_id: str,
    systems: Sequence[str],
    stored: list[dict[str, Any]],
    *,
    user_id: str | None,
) -> list[str]:
    """Store the system messages not stored yet (in order), then the others in one batch.

    Returns the ids of the others' records, in order.
    """
    if systems:
        _store_systems(memory, session_id, systems)
    if not stored:
        return []
    return memory.add_messages(session_id, stored, user_id=user_id, progress=False)


def _store_systems(memory: ContextMemory, session_id: str, systems: Sequence[str]) -> None:
    """Pin the system messages not stored yet, each at the next place of the session's.

    Another writer (a task of the same memory, another memory object or process) may take a
    place between the read and the pin: the pin is refused for that id, and the places are
    read again (until 2026-12-02 the second of two system messages put at once was refused,
    with an error asking for ``replace=True``, which ``put`` cannot pass).
    """
    texts, order = _places(memory, session_id)
    for text in systems:
        for attempt in range(_SYSTEM_TRIES):
            if text in texts:
                break
            tried = order
            try:
                memory.pin(
                    session_id,
                    text,
                    id=f"{session_id}:system:{tried}",
                    metadata={SYSTEM_KEY: tried},
                )
            except StoreInputError:
                texts, order = _places(memory, session_id)  # read again only after a refusal
                if order <= tried or attempt == _SYSTEM_TRIES - 1:
                    raise  # refused for itself, not because another writer took the place
                continue
            texts.add(text)
            order += 1
            break


def _places(memory: ContextMemory, session_id: str) -> tuple[set[str], int]:
    """The session's system messages' texts, and the next place free after them."""
    known = system_records(memory, session_id)
    last = max((int(r.metadata.get(SYSTEM_KEY, 0)) for r in known), default=-1)
    return {r.text for r in known}, last + 1


_SYSTEM_TRIES = 8


def system_records(memory: ContextMemory, session_id: str) -> list[Record]:
    """The session's stored system messages, in the order they were put."""
    found = memory.store.find(
        namespace=memory.namespace,
        kinds=["pinned"],
        session_id=session_id,
        where={SYSTEM_KEY: {"$gte": 0}},
    )
    return sorted(found, key=lambda r: (int(r.metadata.get(SYSTEM_KEY, 0)), r.id))


def clear_session(
    memory: ContextMemory, session_id: str, *, pins: bool = False, systems: bool = True
) -> None:
    """Forget the session's conversation (`ContextMemory.clear`), its system messages too.

    ``systems=False`` keeps the system messages (a ``set`` that brings none of its own).
    """
    # The system messages put into memory are stored as pins of their own: conversation.
    ids = [r.id for r in system_records(memory, session_id)] if systems else []
    if ids:
        memory.store.delete(ids, namespace=memory.namespace, session_id=session_id)
    memory.clear(session_id, pins=pins)
