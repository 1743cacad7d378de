"""What one call reads of a session: its newest turns, its pins and tasks, its summaries.

`read_session` is the one place `ContextMemory.candidates` (and so `assemble`, the middleware
and the LlamaIndex memory) reads a session's state from the store, before it searches; the
search itself is `ctxbudget.memory.retrieval`. `session_pins` and `session_summaries` are the
reads `push_task`/`pop_task` and `summarize` share with it; `is_stored_query` is the test of
whether the caller stored the question already (LlamaIndex's memory makes it too).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ctxbudget.store.records import Record

if TYPE_CHECKING:
    from ctxbudget.store.chroma_store import ChromaStore

__all__ = [
    "SessionState",
    "is_stored_query",
    "read_session",
    "session_pins",
    "session_summaries",
]


@dataclass(frozen=True, slots=True)
class SessionState:
    """A session as one call sees it.

    Attributes:
        last_seq: the seq of the session's newest stored message (None: no messages); the
            session's lexical index is brought up to it.
        recent: the recent window (`MemoryConfig.recent_messages`), oldest first, without a
            stored copy of the query (it is rendered as the query).
        skip: the id of that stored copy of the query, if any: never a candidate.
        user_id: the user given, or the one stored with the window's newest messages.
        pins: the session's pinned records (facts and tasks: a task has ``metadata["_task"]``)
            and then the user's user-wide pins.
        summaries: the session's stored summaries.
    """

    last_seq: int | None
    recent: list[Record]
    skip: frozenset[str]
    user_id: str | None
    pins: list[Record]
    summaries: list[Record]


def read_session(
    store: ChromaStore,
    namespace: str,
    session_id: str,
    *,
    query: str,
    user_id: str | None,
    recent_messages: int,
) -> SessionState:
    """The state of ``session_id`` for answering ``query`` (see `SessionState`)."""
    newest = store.recent(namespace=namespace, session_id=session_id, limit=max(1, recent_messages))
    last_seq = max((r.seq for r in newest if r.seq is not None), default=None)
    # With no recent window, one message was read only to see whether the index is current.
    recent = newest if recent_messages else []
    skip: frozenset[str] = frozenset()
    if recent and is_stored_query(recent[-1], query):
        skip = frozenset({recent[-1].id})
        recent = recent[:-1]
    user = user_id or next((r.user_id for r in reversed(recent) if r.user_id), None)
    pins = session_pins(store, namespace, session_id)
    if user is not None:
        pins += store.find(
            namespace=namespace, kinds=["pinned"], user_id=user, where={"_scope": "user"}
        )
    return SessionState(
        last_seq=last_seq,
        recent=recent,
        skip=skip,
        user_id=user,
        pins=pins,
        summaries=session_summaries(store, namespace, session_id),
    )


def is_stored_query(record: Record | None, query: str) -> bool:
    """Whether ``record`` is the stored copy of ``query``: a user message with the same text.

    Chat engines and agents store the user's message before they ask, so the session's newest
    record may be the question itself: then it is rendered once, as the query, never also as
    history or as a memory. Text is compared without surrounding whitespace; a blank query is
    no stored message's copy.

    >>> stored = Record(id="m1", kind="message", text="Hi ", session_id="s1", role="user")
    >>> is_stored_query(stored, "Hi")
    True
    """
    return (
        record is not None
        and record.role == "user"
        and bool(query.strip())
        and record.text.strip() == query.strip()
    )


def session_pins(store: ChromaStore, namespace: str, session_id: str) -> list[Record]:
    """The session's pinned records: facts and tasks (not the user's user-wide pins)."""
    return store.find(namespace=namespace, kinds=["pinned"], session_id=session_id)


def session_summaries(store: ChromaStore, namespace: str, session_id: str) -> list[Record]:
    """The session's stored summaries (see `ContextMemory.summarize`)."""
    return store.find(namespace=namespace, kinds=["summary"], session_id=session_id)
