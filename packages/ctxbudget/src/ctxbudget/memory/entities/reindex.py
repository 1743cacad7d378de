"""Index the entities of documents already stored (`ContextMemory.index_document_entities`).

`ContextMemory.add_documents` indexes a chunk's entities only while `MemoryConfig.entities` is
on (`ctxbudget.memory.entities.documents`). Documents stored before it was turned on, or with
another extractor, are indexed here: the stored chunks of the chosen collections are read back
(a collection at a time, in batches), their entities read with the memory's extractor and given
to the store's index (`ctxbudget.store.doc_entities`), which lists a chunk once however often it
is given. With ``rebuild`` the chunks are first taken out of the index, so what an earlier
extractor found about them is forgotten and only what this one finds is kept.

Nothing is written to the records: a failing extractor leaves every chunk stored as it was, and
the index as it was for the batches not yet given (run again to finish).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ctxbudget.errors import StoreInputError
from ctxbudget.memory.entities.documents import chunk_entities
from ctxbudget.memory.entities.names import EntityExtractor
from ctxbudget.store.filters import document_filter
from ctxbudget.store.records import Record, require_name

if TYPE_CHECKING:
    from ctxbudget.store.chroma_store import ChromaStore

__all__ = ["IndexedDocuments", "index_documents"]

_BATCH = 256  # chunks given to the index at once


@dataclass(frozen=True, slots=True)
class IndexedDocuments:
    """What `ContextMemory.index_document_entities` read and indexed.

    Attributes:
        collections: the document collections read, sorted.
        chunks: the stored chunks read.
        naming: the chunks that name at least one entity (listed under each).
        entities: the distinct entity keys those chunks name.
    """

    collections: tuple[str, ...]
    chunks: int
    naming: int
    entities: int


def index_documents(
    store: ChromaStore,
    namespace: str,
    extractor: EntityExtractor,
    collections: str | Sequence[str] | None,
    *,
    rebuild: bool = False,
    progress: Callable[[str, int, int], None] | None = None,
) -> IndexedDocuments:
    """Index the entities of the stored chunks of ``collections`` (None: every collection).

    ``progress(collection, done, total)`` is called after each batch.

    Raises:
        StoreInputError: ``collections`` is not a name, a list of names or None.
    """
    names = _names(collections)
    chunks = store.find(
        namespace=namespace,
        kinds=["document"],
        where=None if names is None else document_filter(names),
    )
    groups: dict[str, list[Record]] = {}
    for record in chunks:
        collection = record.metadata.get("doc_namespace")
        groups.setdefault(collection if isinstance(collection, str) else "", []).append(record)
    index = store.doc_entities
    naming = 0
    keys: set[str] = set()
    for collection in sorted(groups):
        records = groups[collection]
        for start in range(0, len(records), _BATCH):
            batch = records[start : start + _BATCH]
            found = chunk_entities(extractor, batch)  # before the index is touched
            if rebuild:
                index.remove(namespace, [(collection, r.id) for r in batch])
            index.add(namespace, found)
            naming += sum(1 for c in found if c.named)
            keys.update(n.key for c in found for n in c.named)
            if progress is not None:
                progress(collection, min(start + _BATCH, len(records)), len(records))
    return IndexedDocuments(tuple(sorted(groups)), len(chunks), naming, len(keys))


def _names(collections: str | Sequence[str] | None) -> list[str] | None:
    if collections is None:
        return None
    if isinstance(collections, str):
        return [require_name("collection", collections)]
    if isinstance(collections, bytes) or not isinstance(collections, Sequence) or not collections:
        msg = (
            "index_document_entities: namespace must be a document collection's name, a "
            f"non-empty list of names or None (every collection), got {collections!r}"
        )
        raise StoreInputError(msg)
    return sorted({require_name("collection", c) for c in collections})
