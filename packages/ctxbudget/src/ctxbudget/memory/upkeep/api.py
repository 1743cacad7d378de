"""`ContextMemory`'s upkeep of sessions: summaries, the task stack, forgetting, counts.

The methods are `ContextMemory`'s own (this class is one of its bases); the work is done in
`ctxbudget.memory.upkeep.summarize`, `ctxbudget.memory.upkeep.tasks` and
`ctxbudget.memory.upkeep.forget`; editing messages in `ctxbudget.memory.upkeep.edits`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ctxbudget.core.numbers import flag
from ctxbudget.core.summaries import Summarizer
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.memory.reading.held_indexes import SessionIndexes
from ctxbudget.memory.upkeep import edits, forget, tasks
from ctxbudget.memory.upkeep.summarize import summarize_session
from ctxbudget.memory.writing.behind import WriteBehind
from ctxbudget.memory.writing.opening import drain_siblings
from ctxbudget.store.records import MetadataValue
from ctxbudget.tokens.counter import TokenCounter

if TYPE_CHECKING:
    from ctxbudget.store.chroma_store import ChromaStore

__all__ = ["SessionUpkeep"]


class SessionUpkeep:
    """Summaries, tasks, clearing and deletion, counts: methods of `ContextMemory`."""

    store: ChromaStore
    namespace: str
    config: MemoryConfig
    counter: TokenCounter
    summarizer: Summarizer
    _indexes: SessionIndexes
    _behind: WriteBehind | None

    def _settle(self) -> None:  # ContextMemory's: wait for acknowledged messages
        raise NotImplementedError  # pragma: no cover

    def _settle_before_delete(self) -> None:
        # This memory's messages, then those other memories of this process acknowledged.
        self._settle()
        drain_siblings(self.store, self._behind)

    def summarize(
        self,
        session_id: str,
        summarizer: Summarizer | None = None,
        *,
        keep_recent: int | None = None,
        stretch: int = 30,
        max_tokens: int = 150,
    ) -> list[str]:
        """Fold old stretches of a session into stored summaries; returns the new summary ids.

        Only whole stretches of ``stretch`` messages older than the newest ``keep_recent`` (the
        recent window by default) that no summary covers yet are folded, so calling this after
        every turn summarizes each stretch once.
        """
        self._settle()
        return summarize_session(
            self.store,
            self.namespace,
            session_id,
            summarizer or self.summarizer,
            self.counter,
            keep=self.config.recent_messages if keep_recent is None else keep_recent,
            stretch=stretch,
            max_tokens=max_tokens,
        )

    def push_task(self, session_id: str, goal: str) -> str:
        """Start a (sub-)task under the current one; returns its id."""
        self._settle()
        return tasks.push_task(self.store, self.namespace, session_id, goal)

    def pop_task(self, session_id: str, result: str) -> str:
        """Finish the current task with its result; returns its id."""
        self._settle()
        return tasks.pop_task(self.store, self.namespace, session_id, result)

    def clear(self, session_id: str, *, pins: bool = False) -> int:
        """Forget a session's conversation: its messages and summaries; returns how many.

        Pinned facts and tasks of the session stay unless ``pins=True`` (then everything of
        the session goes, as `delete_session`). User-wide pins and documents are never touched.
        Both adapters clear a session this way (LangChain ``clear()``, LlamaIndex ``reset()``).
        ``pins`` is a bool (the string ``"false"`` is refused: it would forget them).
        """
        pins = flag(pins, "clear(pins=)")
        self._settle_before_delete()
        return forget.clear_session(
            self.store, self.namespace, self._indexes, session_id, pins=pins
        )

    def delete_session(self, session_id: str) -> int:
        """Delete every record of a session; returns how many were removed.

        Its inclusion log goes too, and so do the records of other sessions' logs that recalled
        one of its records there (with ``keep_context`` they quoted its text), those still
        queued to be written included, in every memory of this process on the store.
        """
        self._settle_before_delete()
        return forget.delete_session(self.store, self.namespace, self._indexes, session_id)

    def delete_user(self, user_id: str) -> int:
        """Delete every record of a user; returns how many were removed.

        Their sessions (those they started) go whole (messages, session pins, tasks,
        summaries), and so does anything else carrying their user id. In a session another user
        started, only their own records go. The inclusion logs keep no record of theirs, and
        no record, in any session's log, that recalled or named one of the records deleted.
        """
        self._settle_before_delete()
        # Their own log records first: each session deleted below then reads no log of theirs.
        self.store.logs.delete_user(self.namespace, user_id)
        return forget.delete_user(self.store, self.namespace, self._indexes, user_id)

    def delete_messages(self, session_id: str, ids: Sequence[str]) -> int:
        """Delete messages of a session by id; returns how many of them were stored.

        Only that session's messages are touched (an id of another session or user is another
        record). What was derived from them goes too: their vectors, the session's summaries
        that cover one of them (they quote it) and the inclusion log's records naming one; every
        copy of the session in memory, in any process, reads it again on its next call. Ids
        the session does not hold are not counted (deleting again returns 0). Messages this
        process acknowledged are stored first.

        Raises:
            StoreInputError: ``ids`` a str, or an id of the session's that is not a message
                (a pinned fact, task or summary: see `unpin`); nothing was deleted.

        >>> mem.delete_messages("s1", ["m2", "m3"])  # doctest: +SKIP
        2
        """
        self._settle_before_delete()
        return edits.delete_messages(self.store, self.namespace, self._indexes, session_id, ids)

    def replace_message(
        self,
        session_id: str,
        id: str,  # noqa: A002 - the name users pass
        text: str,
        *,
        role: str | None = None,
        user_id: str | None = None,
        timestamp: float | datetime | str | None = None,
        metadata: Mapping[str, MetadataValue] | None = None,
        name: str | None = None,
        tool_calls: Sequence[Mapping[str, Any]] | Sequence[str] | None = None,
        tool_call_id: str | None = None,
        status: str | None = None,
    ) -> str:
        """Replace a stored message of a session (an edit), keeping its place; returns its id.

        The message keeps its seq (its place in the session's order). Options left None keep
        the stored message's role, time, name, tool calls, metadata and (a tool result's)
        ``status`` (``"success"`` or ``"error"``); ``""``, ``[]`` or
        ``{}`` remove a name, tool calls or metadata. ``user_id``, when given, must be the
        stored message's user (a check, not a change). The old text leaves everything derived
        from it: the vector and token counts, the session's summaries covering the message,
        the inclusion log's records naming it; every copy of the session in memory, in any
        process, reads it again on its next call. The same content again changes nothing.
        Messages this process acknowledged are stored first; the replacement is stored when
        this returns (not in the background).

        Raises:
            StoreInputError: the session holds no message with this id, the id is a pinned
                fact's, task's or summary's, another ``user_id``, or a message
                `add_message` would refuse (empty text, too long...); nothing was changed.

        >>> mem.replace_message("s1", "m1", "I moved to Porto in May")  # doctest: +SKIP
        'm1'
        """
        given = edits.Replacement(
            text, role, user_id, timestamp, metadata, name, tool_calls, tool_call_id, status
        )
        self._settle_before_delete()
        return edits.replace_message(
            self.store,
            self.namespace,
            self._indexes,
            session_id,
            id,
            given,
            counter=self.counter,
            config=self.config,
        )

    def stats(self) -> dict[str, Any]:
        """Counts per kind, sessions and namespaces of the underlying store."""
        self._settle()
        return dict(self.store.stats())
