"""`ContextMemory`'s entity methods: relations, patterns, and a session's entities.

The methods are `ContextMemory`'s own (`EntityMemory` is one of its bases). Relations and
patterns are stored as records of one session (``session_id=``) or one user (``user_id=``),
exactly one, as `ContextMemory.unpin` names a pin's scope (`ctxbudget.memory.entities.stored`);
`entities` reads a session's entities from its messages. They are offered to the model when
`MemoryConfig.entities` is on (docs/entities.md).

A pattern's outcome (`pattern_result`) is read, counted and written back: two processes
reporting outcomes of one pattern at the same moment may count one of them only.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING

from ctxbudget.errors import StoreInputError
from ctxbudget.memory.entities.index import Entity, EntityIndexes
from ctxbudget.memory.entities.names import ENTITY_TYPES, entity_key
from ctxbudget.memory.entities.reindex import IndexedDocuments, index_documents
from ctxbudget.memory.entities.stored import (
    Pattern,
    declared_aliases,
    new_pattern,
    pattern_of,
    pattern_record,
    relation_record,
    split_pins,
)
from ctxbudget.memory.inputs import check_message_id
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.memory.reading.held_indexes import SessionIndexes
from ctxbudget.memory.reading.session_state import read_session
from ctxbudget.store.records import require_name
from ctxbudget.tokens.counter import TokenCounter

if TYPE_CHECKING:
    from ctxbudget.store.chroma_store import ChromaStore

__all__ = ["EntityMemory"]


class EntityMemory:
    """Relations, patterns and entities: methods of `ContextMemory`."""

    store: ChromaStore
    namespace: str
    config: MemoryConfig
    counter: TokenCounter
    _indexes: SessionIndexes
    _entities: EntityIndexes

    def _settle(self) -> None:  # ContextMemory's: wait for acknowledged messages
        raise NotImplementedError  # pragma: no cover

    def index_document_entities(
        self,
        namespace: str | Sequence[str] | None = None,
        *,
        rebuild: bool = False,
        progress: Callable[[str, int, int], None] | None = None,
    ) -> IndexedDocuments:
        """Index the entities of documents already stored, for entity memory.

        `add_documents` indexes a chunk's entities only while `MemoryConfig.entities` is on:
        this reads the stored chunks of the document collection ``namespace`` (a name, a list
        of names, or None for every collection) and indexes them with this memory's
        extractor, whether entity memory is on or not. A chunk indexed already is not counted
        twice. ``rebuild=True`` first forgets what was indexed for these chunks (after
        changing the extractor). ``progress(collection, done, total)`` is called after each
        batch. Nothing is written to the stored chunks.

        Raises:
            StoreInputError: ``namespace`` is not a name, a non-empty list of names or None.
            ConfigurationError: the extractor's answer is malformed (the batches before it
                are indexed; run again to finish).

        >>> mem.index_document_entities("kb").chunks  # doctest: +SKIP
        120
        """
        self._settle()
        return index_documents(
            self.store,
            self.namespace,
            self._entities.extractor,
            namespace,
            rebuild=rebuild,
            progress=progress,
        )

    def relate(
        self,
        a: str,
        b: str,
        kind: str = "related",
        *,
        session_id: str | None = None,
        user_id: str | None = None,
    ) -> str:
        """Declare that ``a`` is ``kind`` of ``b`` in a session or for a user; returns its id.

        ``kind="alias"`` declares two names of one entity (``relate("Caroline", "Caro",
        "alias", ...)``). Declaring the same relation again stores nothing new.

        Raises:
            StoreInputError: neither or both of ``session_id`` and ``user_id``, a name that is
                not a name, or a kind that is not a short label. Nothing was written.

        >>> mem.relate("Ana", "Lisbon", "lives in", user_id="u1")  # doctest: +SKIP
        'relation:...'
        """
        self._settle()
        scope = _scope("relate", session_id, user_id)
        record = relation_record(a, b, kind, namespace=self.namespace, **scope)
        if self.store.get([record.id], namespace=self.namespace, **scope):
            return record.id  # declared already (perhaps spelled otherwise)
        self.store.add([record])
        return record.id

    def unrelate(
        self,
        a: str,
        b: str,
        kind: str = "related",
        *,
        session_id: str | None = None,
        user_id: str | None = None,
    ) -> bool:
        """Remove a relation declared with `relate` (same names, kind and scope); True if it was.

        Raises:
            StoreInputError: as `relate`.
        """
        self._settle()
        scope = _scope("unrelate", session_id, user_id)
        record = relation_record(a, b, kind, namespace=self.namespace, **scope)
        found = self.store.get([record.id], namespace=self.namespace, **scope)
        if not found:
            return False
        return (
            self.store.delete([record.id], namespace=self.namespace, kinds=["pinned"], **scope) > 0
        )

    def remember_pattern(
        self,
        trigger: str,
        procedure: str,
        *,
        user_id: str | None = None,
        session_id: str | None = None,
        id: str | None = None,  # noqa: A002 - the name users pass
    ) -> str:
        """Remember a procedure for queries about ``trigger``; returns the pattern's id.

        Offered (tier ENTITY, with its success rate) when a query holds at least half of the
        trigger's content words; report how it went with `pattern_result`. Remembering the
        same trigger and procedure again returns the same id and keeps its outcomes.

        Raises:
            StoreInputError: neither or both scopes, an empty or overlong trigger or procedure
                (4,000 characters), a trigger without content words, or an id in ctxbudget's
                own id space. Nothing was written.

        >>> mem.remember_pattern("refund request", "Check dates.", user_id="u1")  # doctest: +SKIP
        'pattern:...'
        """
        self._settle()
        scope = _scope("remember_pattern", session_id, user_id)
        if id is not None:
            check_message_id(id, "remember_pattern")
        pattern = new_pattern(trigger, procedure, id)
        found = self.store.get([pattern.id], namespace=self.namespace, **scope)
        if found:
            known = pattern_of(found[0])
            if known is None or (known.trigger, known.procedure) != (
                pattern.trigger,
                pattern.procedure,
            ):
                msg = (
                    f"remember_pattern: id {pattern.id!r} is already stored with other content; "
                    "give this pattern another id (nothing was written)"
                )
                raise StoreInputError(msg)
            return pattern.id  # remembered already: its outcomes stay
        self.store.add([pattern_record(pattern, namespace=self.namespace, **scope)])
        return pattern.id

    def pattern_result(
        self,
        id: str,  # noqa: A002 - the name users pass
        success: bool,
        *,
        user_id: str | None = None,
        session_id: str | None = None,
    ) -> Pattern:
        """Count one outcome of a pattern (the scope it was remembered in); returns it updated.

        Raises:
            StoreInputError: neither or both scopes, ``success`` not a bool, or no pattern
                with that id in that scope.
        """
        self._settle()
        scope = _scope("pattern_result", session_id, user_id)
        if not isinstance(success, bool):
            msg = f"pattern_result: success must be True or False, got {success!r:.40}"
            raise StoreInputError(msg)
        require_name("id", id)
        found = self.store.get([id], namespace=self.namespace, **scope)
        pattern = pattern_of(found[0]) if found else None
        if pattern is None:
            named = ", ".join(f"{k}={v!r}" for k, v in scope.items() if v is not None)
            msg = (
                f"pattern_result: no pattern {id!r} in {named}; pass the id remember_pattern "
                "returned, with the same session_id or user_id"
            )
            raise StoreInputError(msg)
        updated = Pattern(
            pattern.id,
            pattern.trigger,
            pattern.procedure,
            pattern.successes + (1 if success else 0),
            pattern.failures + (0 if success else 1),
        )
        self.store.add([pattern_record(updated, namespace=self.namespace, **scope)], replace=True)
        return updated

    def patterns(
        self, *, user_id: str | None = None, session_id: str | None = None
    ) -> list[Pattern]:
        """The patterns remembered for a session or a user, best success rate first."""
        self._settle()
        scope = _scope("patterns", session_id, user_id)
        found = self.store.find(
            namespace=self.namespace,
            kinds=["pinned"],
            session_id=scope["session_id"],
            user_id=scope["user_id"],
        )
        if user_id is not None:
            found = [r for r in found if r.session_id is None]
        _, _, patterns = split_pins(found)
        return sorted((p for _, p in patterns), key=lambda p: (-p.rate, p.id))

    def entities(
        self,
        session_id: str,
        *,
        types: Collection[str] | None = None,
        named: str | None = None,
    ) -> list[Entity]:
        """The entities a session's messages mention, most salient first.

        Read from the stored messages (nothing about entities is stored), with the aliases the
        session and its user declared. ``types`` keeps some types only; ``named`` keeps the
        entity with that name or alias (at most one).

        >>> mem.entities("s1", types=["person"])[0].name  # doctest: +SKIP
        'Caroline'
        """
        self._settle()
        if types is not None and not set(types) <= set(ENTITY_TYPES):
            msg = f"entities: types must be some of {list(ENTITY_TYPES)}, got {sorted(types)!r}"
            raise StoreInputError(msg)
        state = read_session(
            self.store, self.namespace, session_id, query="", user_id=None, recent_messages=1
        )
        with self._indexes.reading(
            self.store,
            self.namespace,
            session_id,
            state.last_seq,
            state.stamp,
            episode_gap=self.config.episode_gap,
            counter_name=self.counter.name,
            newest=state.newest,
        ) as index:
            if index is None:
                return []
            _, relations, _ = split_pins(state.pins)
            resolved = self._entities.current(index).resolved(declared_aliases(relations))
        found = sorted(resolved.entities.values(), key=lambda e: (-e.salience, e.key))
        if types is not None:
            found = [e for e in found if e.type in set(types)]
        if named is not None:
            key = resolved.of.get(entity_key(named))
            found = [e for e in found if e.key == key]
        return found


def _scope(what: str, session_id: str | None, user_id: str | None) -> dict[str, str | None]:
    if (session_id is None) == (user_id is None):
        msg = (
            f"{what} needs the scope it applies to: session_id= for one session, or user_id= "
            "for all of a user's sessions (exactly one)"
        )
        raise StoreInputError(msg)
    if session_id is not None:
        return {"session_id": require_name("session_id", session_id), "user_id": None}
    return {"session_id": None, "user_id": require_name("user_id", user_id)}
