"""Storing a LlamaIndex conversation in a `ContextMemory`; system messages as pins of their own.

`CtxBudgetMemory` stores the messages put into it as the session's messages, except system
messages: each distinct one is a pinned record marked with `SYSTEM_KEY` (its order), sent first on
every ``get``, exactly as put, never cut (`llama_index.ctxbudget.system`), and forgotten with the
conversation.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from llama_index.core.base.llms.types import ChatMessage

from ctxbudget.memory.context import ContextMemory
from ctxbudget.store.chroma_store import Record
from llama_index.ctxbudget.convert import role_of, text_of, to_record_payload

__all__ = [
    "SYSTEM_KEY",
    "clear_session",
    "split_messages",
    "store_messages",
    "system_records",
]

SYSTEM_KEY = "li_system"
"""Metadata key of the pinned records that hold system messages (value: their order)."""


def split_messages(messages: Sequence[ChatMessage]) -> tuple[list[str], list[dict[str, Any]]]:
    """``(systems, stored)``: the texts of the system messages, the others as stored.

    Checks every message before anything is written.

    Raises:
        InvalidItemError: a malformed tool call.
    """
    systems: list[str] = []
    stored: list[dict[str, Any]] = []
    now = time.time()
    for index, message in enumerate(messages):
        if role_of(message) == "system":
            text = text_of(message)
            if text.strip():
                systems.append(text)
            continue
        entry = to_record_payload(message, index)
        if entry is not None:
            entry["timestamp"] = now
            stored.append(entry)
    return systems, stored


def store_messages(
    memory: ContextMemory,
    session_id: str,
    systems: Sequence[str],
    stored: list[dict[str, Any]],
    *,
    user_id: str | None,
) -> None:
    """Store the system messages not stored yet (in order), then the others in one batch."""
    if systems:
        known = system_records(memory, session_id)
        texts = {r.text for r in known}
        order = max((int(r.metadata.get(SYSTEM_KEY, 0)) for r in known), default=-1) + 1
        for text in systems:
            if text in texts:
                continue
            memory.pin(
                session_id,
                text,
                id=f"{session_id}:system:{order}",
                metadata={SYSTEM_KEY: order},
            )
            texts.add(text)
            order += 1
    if stored:
        memory.add_messages(session_id, stored, user_id=user_id, progress=False)


def system_records(memory: ContextMemory, session_id: str) -> list[Record]:
    """The session's stored system messages, in the order they were put."""
    found = memory.store.find(
        namespace=memory.namespace,
        kinds=["pinned"],
        session_id=session_id,
        where={SYSTEM_KEY: {"$gte": 0}},
    )
    return sorted(found, key=lambda r: (int(r.metadata.get(SYSTEM_KEY, 0)), r.id))


def clear_session(memory: ContextMemory, session_id: str, *, pins: bool = False) -> None:
    """Forget the session's conversation (`ContextMemory.clear`), its system messages too."""
    # The system messages put into memory are stored as pins of their own: conversation.
    systems = [r.id for r in system_records(memory, session_id)]
    if systems:
        memory.store.delete(systems, namespace=memory.namespace, session_id=session_id)
    memory.clear(session_id, pins=pins)
