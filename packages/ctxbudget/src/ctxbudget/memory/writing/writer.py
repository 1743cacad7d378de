"""How `ContextMemory` stores messages, pinned facts and documents.

Every write goes the same way: the caller's input becomes records (`Writer.message_record`,
`Writer.pin`, `Writer.documents`), every record is checked before the first is written
(`ChromaStore.check`, then `id_check.refuse_changes`: an id stored with other content), tokens are
counted once and kept with the record, and the records are stored in batches (`Writer.write`,
with a progress bar on long imports). A bad input names its index, and nothing is written.

A record the store (or the write-behind queue) already holds is the same write again
(`ctxbudget.store.validate.same_write`: the same content, or the same message with another
timestamp): it is not written again, and its id is returned as if it had been.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ctxbudget.core.numbers import shown
from ctxbudget.errors import StoreError, StoreInputError
from ctxbudget.memory.entities.documents import chunk_entities
from ctxbudget.memory.entities.names import EntityExtractor
from ctxbudget.memory.inputs import (
    check_batch_size,
    check_message_id,
    user_metadata,
)
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.memory.reading.record_items import with_tokens
from ctxbudget.memory.writing.behind import WriteBehind
from ctxbudget.memory.writing.documents import document_records
from ctxbudget.memory.writing.id_check import UNWRITTEN, refuse_changes
from ctxbudget.memory.writing.message_records import check_length, message_record
from ctxbudget.store.first_write import add_acknowledged
from ctxbudget.store.records import MetadataValue, Record, require_name, same_content, scope_of
from ctxbudget.telemetry.operations import refused_write, write_span
from ctxbudget.tokens.counter import TokenCounter

if TYPE_CHECKING:
    from ctxbudget.store.chroma_store import ChromaStore

__all__ = ["Writer"]

_PROGRESS_AT = 200


@dataclass(frozen=True, slots=True)
class Writer:
    """Writes of one `ContextMemory`: its store, tenant, default counter and settings."""

    store: ChromaStore
    namespace: str
    counter: TokenCounter
    config: MemoryConfig
    behind: WriteBehind | None = None  # messages acknowledged at once, stored in the background
    extractor: EntityExtractor | None = None  # documents' entities are indexed (entity memory)
    stored: Callable[[Sequence[Record]], None] | None = None  # messages acknowledged (entities)

    def messages(
        self,
        session_id: str,
        messages: Iterable[Mapping[str, Any] | tuple[str, str]],
        *,
        user_id: str | None,
        progress: bool | None,
        batch_size: int,
        first_write_wins: bool = False,
    ) -> list[str]:
        """`ContextMemory.add_messages`: check every message, then store them in order."""
        given: list[Any] = []
        with self._refusals("message", given, session_id, user_id):
            if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Iterable):
                msg = (
                    f"messages must be a list of message dicts or (role, text) tuples, got a "
                    f"{type(messages).__name__}; for one message use add_message"
                )
                raise StoreInputError(msg)
            batch_size = check_batch_size(batch_size)
            require_name("session_id", session_id)
            given.extend(messages)
            records = [
                self.message_record(session_id, index, message, user_id)
                for index, message in enumerate(given)
            ]
        # Ids made here are new by construction: no stored record can conflict with them.
        made = {
            r.id
            for r, m in zip(records, given, strict=True)
            if not isinstance(m, Mapping) or m.get("id") in (None, "")
        }
        ids = self.write(
            records, "message", progress, batch_size, made=made, first_write_wins=first_write_wins
        )
        if self.stored is not None:
            self.stored(records)
        return ids

    def check_messages(
        self, session_id: str, messages: Sequence[Mapping[str, Any]], *, user_id: str | None
    ) -> None:
        """Every check `messages` makes of each message, nothing written (for the doors).

        A door that stores a call's messages in the background (the LangChain middleware)
        refuses the call with the error `ContextMemory.add_messages` would raise (a message
        over `MemoryConfig.max_message_chars`, a lone surrogate...), before the model is called.

        Raises:
            StoreInputError: the first message that cannot be stored, by its index.
        """
        with self._refusals("message", messages, session_id, user_id):
            records = [
                self.message_record(session_id, index, message, user_id)
                for index, message in enumerate(messages)
            ]
            self.check_records(records, "message")

    @contextlib.contextmanager
    def _refusals(
        self, kind: str, given: Sequence[object], session_id: object, user_id: object
    ) -> Iterator[None]:
        """A `StoreInputError` raised while the records are made ends a write span of its own."""
        try:
            yield
        except StoreInputError as exc:
            refused_write(self, kind, len(given), session_id, user_id, exc)

    def check_records(self, records: list[Record], noun: str) -> None:
        """The store's checks of ``records`` (called ``noun`` in its message), none written."""
        try:
            self.store.check(records)
        except StoreInputError as exc:
            problem = str(exc).replace("record ", noun + " ", 1).removesuffix(UNWRITTEN)
            msg = problem.replace("in one add()", "in one call") + UNWRITTEN
            raise StoreInputError(msg) from exc

    @write_span
    def write(
        self,
        records: list[Record],
        noun: str,
        progress: bool | None,
        batch_size: int = 256,
        *,
        made: set[str] | frozenset[str] = frozenset(),
        first_write_wins: bool = False,
    ) -> list[str]:
        """Check every record, count tokens once, then store in batches with a progress bar.

        ``first_write_wins``: an id stored with other content keeps its record (a warning, the
        rest stored) instead of refusing the write, and the store is not read before (`id_check`).
        """
        self.check_records(records, noun)  # all of them, before the first batch is written
        behind = self.behind if noun == "message" else None
        held = refuse_changes(
            self.store,
            self.namespace,
            [r for r in records if r.id not in made],
            noun,
            pending=None if self.behind is None else self.behind.pending,
            keep_first=first_write_wins,
        )
        todo = [i for i, r in enumerate(records) if (scope_of(r), r.id) not in held]
        counts = self.counter.count_many([records[i].text for i in todo])
        for index, tokens in zip(todo, counts, strict=True):
            records[index] = with_tokens(records[index], {self.counter.name: tokens})
        bar = _progress(len(records), f"storing {noun}s", progress)
        ids: list[str] = []
        for start in range(0, len(records), batch_size):
            chunk = records[start : start + batch_size]
            # What is held already is not written again (a retry keeps the first timestamp).
            new = [r for r in chunk if (scope_of(r), r.id) not in held]
            try:
                if new and behind is None and first_write_wins:
                    add_acknowledged(self.store.add, self.store.get, new, reported=set())
                elif new and behind is None:
                    self.store.add(new)
                elif new and behind is not None:
                    behind.submit(new)  # acknowledged: journaled, stored in the background
                ids.extend(r.id for r in chunk)
            except StoreError as exc:
                if not ids:
                    raise
                done = "stored" if behind is None else "acknowledged"
                msg = (
                    f"{exc} (for {noun}s {start} to {start + len(chunk) - 1}); the {start} "
                    f"before were {done} (ids {ids[0]!r} to {ids[-1]!r}): add {noun}s {start} "
                    "on again"
                )
                raise type(exc)(msg) from exc
            if bar is not None:
                bar.update(len(chunk))
        if bar is not None:
            bar.close()
        return ids

    def message_record(
        self, session_id: str, index: int, message: object, user_id: str | None
    ) -> Record:
        """The record of message ``index`` of a call (a dict or a ``(role, text)`` pair)."""
        return message_record(
            session_id, index, message, user_id, namespace=self.namespace, config=self.config
        )

    def check_length(self, what: str, text: str) -> None:
        """Refuse a message or pinned fact over `MemoryConfig.max_message_chars`."""
        check_length(self.config, what, text)

    def pin(
        self,
        session_id: str | None,
        text: str | None,
        *,
        user_id: str | None,
        id: str | None,  # noqa: A002 - as ContextMemory.pin takes it
        metadata: Mapping[str, MetadataValue] | None,
    ) -> str:
        """`ContextMemory.pin`: store one pinned fact of a session or of a user."""
        given: object = text
        with self._refusals("pinned", [given], session_id, user_id):
            given = self._pin_text(given, session_id, user_id, id)
        scope = "session" if session_id is not None else "user"
        record = Record(
            # Without an id, the text's: pinning the same fact again stores nothing new.
            id=id or f"pin:{hashlib.sha256(given.encode(errors='surrogatepass')).hexdigest()[:16]}",
            kind="pinned",
            text=given,
            namespace=self.namespace,
            session_id=session_id,
            user_id=user_id,
            metadata={**user_metadata("pin", metadata), "_scope": scope},
        )
        if not id:
            owner = {"session_id": session_id} if session_id is not None else {"user_id": user_id}
            stored = self.store.get([record.id], namespace=self.namespace, **owner)
            if stored and stored[0].text == given:  # the same fact: keep it, with this metadata
                if not same_content(record, stored[0]):
                    self.store.add([record], replace=True)
                return record.id
        return self.write([record], "pinned fact", progress=False)[0]

    def _pin_text(
        self,
        given: object,
        session_id: str | None,
        user_id: str | None,
        id: str | None,  # noqa: A002 - as ContextMemory.pin takes it
    ) -> str:
        """The pinned fact's text, checked with the rest of `pin`'s arguments."""
        if not isinstance(given, str) or not given.strip():
            msg = (
                "pin needs the text of the fact as a non-empty str, e.g. "
                f"mem.pin('s1', 'User is vegetarian'); got {shown(given)}"
            )
            raise StoreInputError(msg)
        self.check_length("the pinned fact", given)
        if session_id is None and user_id is None:
            msg = "pin needs a session_id or a user_id to attach the fact to"
            raise StoreInputError(msg)
        if id:
            check_message_id(id, "pin")
        return given

    def unpin(self, id: str, *, session_id: str | None, user_id: str | None) -> bool:  # noqa: A002
        """`ContextMemory.unpin`: remove a pinned fact (never a task) of one scope."""
        if (session_id is None) == (user_id is None):
            msg = (
                f"unpin({id!r}) needs the scope the fact was pinned to: pass session_id= for a "
                "session's pin or user_id= for a user-wide pin (exactly one)"
            )
            raise StoreInputError(msg)
        require_name("id", id)
        check_message_id(id, "unpin")
        scope = {"session_id": session_id} if session_id is not None else {"user_id": user_id}
        found = self.store.get([id], namespace=self.namespace, **scope)
        # Tasks and entity memory's relations and patterns are pinned records too, never pins.
        pins = [
            r.id
            for r in found
            if r.kind == "pinned" and "_task" not in r.metadata and "_entity" not in r.metadata
        ]
        if not pins:
            return False
        return self.store.delete(pins, namespace=self.namespace, kinds=["pinned"], **scope) > 0

    def documents(
        self,
        documents: Iterable[str | Mapping[str, Any] | tuple[str, str]],
        *,
        collection: str,
        chunk_tokens: int,
        overlap: int,
        source: str | None,
        progress: bool | None,
    ) -> list[str]:
        """`ContextMemory.add_documents`: cut documents into chunks, then store the chunks."""
        given = documents if isinstance(documents, Sequence) else ()
        with self._refusals("document", given, None, None):
            records, ids = document_records(
                documents,
                namespace=self.namespace,
                collection=collection,
                chunk_tokens=chunk_tokens,
                overlap=overlap,
                source=source,
                counter=self.counter,
            )
        # Entities are read before anything is written: an extractor that fails writes nothing.
        extractor = self.extractor if self.config.entities else None
        found = chunk_entities(extractor, records) if extractor is not None else []
        self.write(records, "document chunk", progress)
        if found:
            self.store.doc_entities.add(self.namespace, found)
        return ids


def _progress(total: int, label: str, progress: bool | None) -> Any:
    if progress is False or (progress is None and total <= _PROGRESS_AT):
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=label, unit="rec")
