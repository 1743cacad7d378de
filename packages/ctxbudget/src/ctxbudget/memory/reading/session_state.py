"""What one call reads of a session: its newest turns, its pins and tasks, its summaries.

`read_session` is the one place `ContextMemory.candidates` (and so `assemble`, the middleware
and the LlamaIndex memory) reads a session's state from the store, before it searches; the
search itself is `ctxbudget.memory.reading.retrieval`. `session_pins` and
`session_summaries` are the reads `push_task`/`pop_task` and `summarize` share with it;
`is_stored_query` is the test of whether the caller stored the question already (LlamaIndex's
memory makes it too).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ctxbudget.memory.reading.tool_steps import tool_steps_together
from ctxbudget.store.records import Record
from ctxbudget.store.sessions import Stamp, Stamps

if TYPE_CHECKING:
    from ctxbudget.memory.reading.session_index import SessionIndex
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
            session's index is brought up to it.
        stamp: the store's stamp of the session (`SessionView.stamp`): an index kept from an
            earlier call of another generation is read again.
        newest: the newest messages read, with their vectors, by seq (the session's index
            takes new messages from here instead of reading them again).
        recent: the recent window (`MemoryConfig.recent_messages`), oldest first, without a
            stored copy of the query (it is rendered as the query).
        skip: the id of that stored copy of the query, if any: never a candidate.
        user_id: the user given, or the one stored with the window's newest messages.
        pins: the session's pinned records (facts and tasks: a task has ``metadata["_task"]``)
            and then the user's user-wide pins.
        summaries: the session's stored summaries.
        elsewhere: the partitions of other owners that hold ``user_id``'s messages, read with
            the session's entry (None: not read; the search reads them).
        has_documents: whether the namespace has documents, read with the session's entry
            (`Stamps.has_documents`; None: not read; the search looks).
    """

    last_seq: int | None
    stamp: Stamp | None
    newest: dict[int, tuple[Record, Any]]
    recent: list[Record]
    skip: frozenset[str]
    user_id: str | None
    pins: list[Record]
    summaries: list[Record]
    elsewhere: tuple[str, ...] | None = None
    has_documents: bool | None = None


def read_session(
    store: ChromaStore,
    namespace: str,
    session_id: str,
    *,
    query: str,
    user_id: str | None,
    recent_messages: int,
    held: SessionIndex | None = None,
    known: Stamps | None = None,
) -> SessionState:
    """The state of ``session_id`` for answering ``query`` (see `SessionState`).

    One `ChromaStore.session_view` (one or two Chroma calls), and one more read only when the
    user asked about is not the one whose pins the view holds. ``held``: the session's index
    kept in memory; while it is current, only the messages after it are read. ``known``: the
    session's `Stamps` the caller read just before (their entry is not read again).
    """
    view = store.session_view(
        namespace=namespace,
        session_id=session_id,
        recent=recent_messages,
        user_id=user_id,
        held=None if held is None or not len(held) else held.stamp._replace(last=held.last_seq),
        known=known,
    )
    newest = view.recent
    window = newest
    if held is not None and view.since is not None:
        # The copy has every message up to view.since: the window's older part comes from it.
        size = max(1, recent_messages)
        older = [r for r in held.records[-size:] if r.seq is not None and r.seq <= view.since]
        window = (older + newest)[-size:]
    last_seq = max((r.seq for r in window if r.seq is not None), default=None)
    # With no recent window, one message was read only to see whether the index is current.
    recent = window if recent_messages else []
    skip: frozenset[str] = frozenset()
    if recent and is_stored_query(recent[-1], query):
        skip = frozenset({recent[-1].id})
        recent = recent[:-1]
    # Two writers' messages interleave in the store: keep each tool step whole (`tool_steps`).
    recent = tool_steps_together(recent)
    user = user_id or next((r.user_id for r in reversed(recent) if r.user_id), None)
    pins = list(view.pins)
    if user is not None and user == view.user_id:
        pins += view.user_pins
    elif user is not None:
        pins += store.find(
            namespace=namespace, kinds=["pinned"], user_id=user, where={"_scope": "user"}
        )
    return SessionState(
        last_seq=last_seq,
        stamp=view.stamp,
        newest={
            r.seq: (r, view.vectors[r.id])
            for r in newest
            if r.seq is not None and r.id in view.vectors
        },
        recent=recent,
        skip=skip,
        user_id=user,
        pins=pins,
        summaries=view.summaries,
        elsewhere=view.elsewhere[1] if view.elsewhere and view.elsewhere[0] == user else None,
        has_documents=view.has_documents,
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
