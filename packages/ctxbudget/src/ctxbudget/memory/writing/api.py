"""`ContextMemory`'s writes: messages, pinned facts and documents.

The methods are `ContextMemory`'s own (this class is one of its bases); the work is done in
`ctxbudget.memory.writing.writer` (checks, ids, the store) and `ctxbudget.memory.writing.behind`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ctxbudget.compat import renamed
from ctxbudget.core.numbers import flag
from ctxbudget.errors import StoreInputError
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.memory.writing.opening import drain_siblings
from ctxbudget.memory.writing.writer import Writer
from ctxbudget.store.records import MetadataValue
from ctxbudget.telemetry.spans import spanned_as
from ctxbudget.tokens.counter import TokenCounter

if TYPE_CHECKING:
    from ctxbudget.memory.entities.index import EntityIndexes
    from ctxbudget.memory.writing.behind import WriteBehind
    from ctxbudget.store.chroma_store import ChromaStore

__all__ = ["MemoryWrites"]


def _progress(given: object) -> bool | None:
    return None if given is None else flag(given, "progress", error=StoreInputError)


class MemoryWrites:
    """Storing messages, pins and documents: methods of `ContextMemory`."""

    store: ChromaStore
    namespace: str
    config: MemoryConfig
    counter: TokenCounter
    _behind: WriteBehind | None
    _entities: EntityIndexes

    def _settle(self) -> None:  # ContextMemory's: wait for acknowledged messages
        raise NotImplementedError  # pragma: no cover

    def wait_for_writes(self, session_id: str, *, held: Collection[str] = ()) -> None:
        """Wait until what was acknowledged is stored, but ``session_id``'s messages in ``held``.

        What every read of this memory does first (this memory's writes and those of the
        process's other memories on the store), for a caller that reads the store itself and
        holds some of the messages it just added (an agent's state: ``held``, their ids): when
        only those wait, it goes on at once. Until 2026-12-01 the LangChain middleware never
        waited, and missed messages an app added with `add_messages` just before the turn.

        Raises:
            StoreError: this memory's writes kept failing or were refused (as a read raises).
        """
        behind = self._behind
        if behind is not None:
            ids = set(held)
            ns = self.namespace
            if all(
                r.kind == "message" and r.namespace == ns and r.session_id == session_id
                and r.id in ids
                for r in behind.waiting()
            ):  # fmt: skip
                behind.check()
            else:
                behind.settle()
        drain_siblings(self.store, behind, strict=False)  # another's failure is its own

    @property
    def writes(self) -> Writer:
        """This memory's write path (`ctxbudget.memory.writing.writer.Writer`), for batch tools."""
        entities = self._entities
        stored = entities.prepare if self.config.entities else None
        return Writer(
            self.store,
            self.namespace,
            self.counter,
            self.config,
            self._behind,
            entities.extractor,
            stored,
        )

    @spanned_as("ctxbudget.write")
    def add_message(
        self,
        session_id: str,
        role: str,
        text: str,
        *,
        id: str | None = None,  # noqa: A002 - the name users pass
        user_id: str | None = None,
        timestamp: float | datetime | str | None = None,
        metadata: Mapping[str, MetadataValue] | None = None,
        name: str | None = None,
        tool_calls: Sequence[Mapping[str, Any]] | Sequence[str] = (),
        tool_call_id: str | None = None,
    ) -> str:
        """Store one message of a session; returns its id (the one given, or a new one)."""
        message = {
            "role": role,
            "text": text,
            "id": id,
            "timestamp": timestamp,
            "metadata": metadata,
            "name": name,
            "tool_calls": tool_calls,
            "tool_call_id": tool_call_id,
        }
        return self.add_messages(session_id, [message], user_id=user_id, progress=False)[0]

    @spanned_as("ctxbudget.write")
    def add_messages(
        self,
        session_id: str,
        messages: Iterable[Mapping[str, Any] | tuple[str, str]],
        *,
        user_id: str | None = None,
        progress: bool | None = None,
        batch_size: int = 256,
        first_write_wins: bool = False,
    ) -> list[str]:
        """Store messages in order (dicts with role and text/content, or ``(role, text)``).

        Everything is checked before anything is written; a bad message raises an error naming
        its index. A progress bar shows on long imports (``progress=None``: over 200 messages).
        An id the session holds with other content refuses the call (`StoreInputError`,
        nothing written), or with ``first_write_wins`` keeps the stored message, logged as a
        warning, and the other messages are stored: then the ids are not read before the
        messages are acknowledged (with write-behind, the background writer finds them as it
        stores), and the ids returned include those kept from before.
        """
        progress = _progress(progress)
        return self.writes.messages(
            session_id,
            messages,
            user_id=user_id,
            progress=progress,
            batch_size=batch_size,
            first_write_wins=flag(first_write_wins, "first_write_wins", error=StoreInputError),
        )

    @spanned_as("ctxbudget.write")
    def pin(
        self,
        session_id: str | None = None,
        text: str | None = None,
        *,
        user_id: str | None = None,
        id: str | None = None,  # noqa: A002
        metadata: Mapping[str, MetadataValue] | None = None,
    ) -> str:
        """Pin a fact to a session or to a user; pinned facts are offered on every assembly.

        ``pin("s1", "User is vegetarian")`` or ``pin(user_id="u1", text=...)``. Without an
        ``id``, pinning the same text to the same scope again returns the same pin.

        Raises:
            StoreInputError: no text or no session or user, a text over
                `MemoryConfig.max_message_chars`, reserved or unstorable metadata, or an id
                already pinned with other text. Nothing was written.
        """
        self._settle()
        return self.writes.pin(session_id, text, user_id=user_id, id=id, metadata=metadata)

    def unpin(
        self,
        id: str,  # noqa: A002
        *,
        session_id: str | None = None,
        user_id: str | None = None,
    ) -> bool:
        """Remove a pinned fact of a session or of a user; True when it existed.

        Pin ids are scoped like every record id: name the session (``session_id=``) or the
        user (``user_id=``) the fact was pinned to, as `pin` took it. Only a pinned fact with
        that id in that scope is removed: a message, task, summary or document with the same
        id, and pins of other sessions or users, are never touched.

        Raises:
            StoreInputError: neither or both of ``session_id`` and ``user_id``, or an id in
                ctxbudget's own id space.

        >>> mem.unpin("diet", user_id="u1")  # doctest: +SKIP
        True
        """
        self._settle()
        return self.writes.unpin(id, session_id=session_id, user_id=user_id)

    @spanned_as("ctxbudget.write")
    def add_documents(
        self,
        documents: Iterable[str | Mapping[str, Any] | tuple[str, str]],
        *,
        collection: str | None = None,
        chunk_tokens: int = 200,
        overlap: int = 30,
        source: str | None = None,
        progress: bool | None = None,
        namespace: str | None = None,
    ) -> list[str]:
        """Store documents, cut into chunks of ``chunk_tokens`` tokens with ``overlap``.

        Documents are strings, ``(id, text)`` pairs or dicts with ``text`` (and optional ``id``,
        ``source``, ``metadata``). ``collection`` (default ``"kb"``) names the collection of
        documents within this memory's namespace (its tenant): ``assemble(documents=["kb"])``
        and the retrievers' ``collections=`` restrict to it. Returns chunk ids
        (``<document id>#<n>``). A document given without an id gets one from what it holds
        (`ctxbudget.memory.writing.chunking.document_id`: the collection, the text, its source
        and metadata and how it is cut), so adding the same documents again stores nothing new.
        A document of any length is taken: chunking costs time in proportion to its length.

        ``namespace=`` is the old name of ``collection=`` (a `DeprecationWarning`; it goes in
        the next release): everywhere else a namespace is the tenant.

        Raises:
            StoreInputError: a malformed document, reserved or unstorable metadata, bad
                chunking options, or a chunk id already stored with other text. Nothing was
                written.
            ConfigurationError: both ``collection=`` and its old name ``namespace=``.

        >>> mem.add_documents(["Alfama has many small restaurants."], collection="kb")
        ... # doctest: +SKIP
        ['doc:5d0c...#0']
        """
        given = {"collection": collection, "namespace": namespace}
        options = {name: value for name, value in given.items() if value is not None}
        where = "ContextMemory.add_documents"
        named = renamed(options, {"namespace": "collection"}, where, stacklevel=0)
        progress = _progress(progress)
        self._settle()
        return self.writes.documents(
            documents,
            collection=named.get("collection", "kb"),
            chunk_tokens=chunk_tokens,
            overlap=overlap,
            source=source,
            progress=progress,
        )
