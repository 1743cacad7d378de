"""Messages edited in an agent's state: the stored message replaced in its place.

LangGraph's ``add_messages`` replaces a message of the state that has the id of a new one (a
user editing their message: ``[RemoveMessage(id=answer.id), HumanMessage(text, id=q.id)]``).
A message stored with other content than the state's is an edit: the stored message is
replaced in its place (`ContextMemory.replace_message`: its seq kept; its vector, and what
quoted the old text, summaries and log records, follow), so the call and every later one, in
any thread of the user, recall the new text only. The run's user must be the stored message's
(another user's message keeps its text, with a warning).

Only what this middleware knows is an edit: a message it stored (`StoredKeys`: a digest per
key, in the session's newest generation it saw, or in its first turn, stored before it had
one) that the state now holds with another digest.
That is read by id and replaced before the call gathers (`store_edits`; the memory's
acknowledged messages are stored first, `ContextMemory.flush`); no read is added to other
calls. A state message the memory holds with other text that this middleware did not store
(another worker or process stored it, or this one before a restart) keeps the stored text,
with a warning (``... was not stored: a message with different content was stored under its
id first``): it cannot be told from a message replaced in the memory while the thread's state
kept the old text (an admin's `replace_message`, or a delete and add), whose new text must
stay (tests/conformance/test_removed.py). So is a message the state holds as this middleware
stored it, whatever the memory holds now.

A message removed from the state stays stored: a removal cannot be told from one that only
trims the state (``SummarizationMiddleware`` removes every message and adds a summary), whose
messages the memory is meant to keep; docs/langchain.md, "Edited and removed messages".
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from langchain_core.messages import BaseMessage

from ctxbudget import StoreInputError
from ctxbudget.store.validate import same_write
from langchain_ctxbudget.convert import to_record_payload
from langchain_ctxbudget.storing import StoredKeys

if TYPE_CHECKING:
    from ctxbudget.memory.context import ContextMemory
    from ctxbudget.store.records import Record

__all__ = ["store_edits"]

logger = logging.getLogger(__name__)


def store_edits(
    memory: ContextMemory,
    known: StoredKeys,
    messages: Sequence[BaseMessage],
    keys: Sequence[str],
    ids: tuple[str, str | None],
    digests: Sequence[int],
) -> frozenset[str]:
    """Replace the stored messages the state holds edited; the keys read as stored.

    The messages this middleware stored with another digest are read by id, after the
    memory's acknowledged messages are stored; nothing is read when there are none. Returns
    the keys read as stored (the same content, or an edit now stored), which need no write
    (`store_messages` ``held=``). ``digests``: each message's `digest`.
    """
    session, user = ids
    check = known.since_last(memory.namespace, session, keys, digests)[1]
    if not check:
        return frozenset()
    memory.flush()  # what this memory acknowledged is stored first
    wanted = [keys[i] for i in check]
    found = memory.store.get(wanted, namespace=memory.namespace, session_id=session)
    stored = {r.id: r for r in found if r.kind == "message"}
    held: set[str] = set()
    now = time.time()
    for index in check:
        old = stored.get(keys[index])
        message = messages[index]
        payload = None if old is None else to_record_payload(message, id=keys[index], timestamp=now)
        if old is None or payload is None:
            continue
        try:
            record = memory.writes.message_record(session, index, payload, user)
        except StoreInputError:
            continue  # refused where it is stored (`store_messages`), as before
        held.add(keys[index])
        if not same_write(record, old):
            _replace(memory, session, user, payload, old)
    return frozenset(held)


def _replace(
    memory: ContextMemory,
    session: str,
    user: str | None,
    payload: dict[str, object],
    old: Record,
) -> None:
    """Store the edited message over ``old``; a replacement refused is logged, not raised."""
    key = old.id
    try:
        memory.replace_message(
            session,
            key,
            str(payload["text"]),
            role=str(payload["role"]),
            user_id=user,
            name=str(payload.get("name") or ""),
            tool_calls=payload["tool_calls"],  # type: ignore[arg-type]
            tool_call_id=str(payload.get("tool_call_id") or ""),
            status=str(payload.get("status") or "success") if payload["role"] == "tool" else None,
        )
    except StoreInputError as exc:
        logger.warning(
            "ctxbudget memory kept the stored text of message %r of session %r, edited in the "
            "state: %s",
            key,
            session,
            exc,
        )
