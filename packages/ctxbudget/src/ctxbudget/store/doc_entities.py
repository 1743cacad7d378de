"""The entities a namespace's documents name: entity key -> the chunks that name it.

`ContextMemory.add_documents` (with `MemoryConfig.entities` on) reads each chunk's entities when
it stores the chunk and gives them here (`DocEntities.add`); an assembly whose query names an
entity looks its key up (`DocEntities.lookup`), by id: the cost of a call is that of reading a
few rows, whatever the documents hold. The store never extracts anything: it keeps what the
memory layer found (`ctxbudget.memory.entities.documents`).

**Layout.** One collection per namespace, ``<store>.e-<digest of namespace>``
(`ctxbudget.store.partitions.entity_partition`), outside the record partitions: no search, read,
``count`` or ``stats`` of records visits it. Each row has a fixed one-dimensional vector
(Chroma needs one; nothing searches by it) and its data as JSON in the metadata value ``r``:

- ``k:<key>`` per entity: how it was written (``s``: surface -> count), its types by votes
  (``t``), whether every mention was weak (``w``), other keys said with it (``a``), how many
  chunks of each collection name it (``n``) and the chunks, as ``[collection, chunk id]``:
  the first ones and the newest, `CHUNKS_KEPT` at most;
- ``c:<collection, chunk id>`` per chunk: the keys it named, so deleting the chunk
  (`ChromaStore.delete` in a collection) takes it out of its entities' rows; an entity named
  by no chunk any more is deleted.

A row is read, merged and written back under the store's lock: one process at a time on an
embedded store. Two processes adding documents that name one entity through one Chroma server at
the same moment may each write their own version of its row, and the chunks of one of them are
then not listed under it (the chunks themselves are stored; adding them again lists them).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxbudget.store.layout import Collections
from ctxbudget.store.partitions import entity_partition
from ctxbudget.store.records import json_key

__all__ = ["CHUNKS_KEPT", "ChunkEntities", "DocEntities", "DocEntity", "Named"]

CHUNKS_KEPT = 64
"""Chunks listed per entity: its first ones and the newest (`DocEntity.chunks`)."""

_FIRST = 8  # of `CHUNKS_KEPT`, the first chunks kept; the rest are the newest
_VECTOR = [1.0]  # every row's vector: Chroma needs one, nothing searches by it


@dataclass(frozen=True, slots=True)
class Named:
    """One entity a chunk names, as the memory layer's extractor found it.

    Attributes:
        key: its `entity_key`.
        surface: the name as written.
        type: ``"person"``, ``"place"``, ``"org"`` or ``"other"``.
        weak: only evidence is a capitalized word starting a sentence.
        alias: the key of another name said with it (``"Acme Corp (ACME)"``), or None.
    """

    key: str
    surface: str
    type: str = "other"
    weak: bool = False
    alias: str | None = None


@dataclass(frozen=True, slots=True)
class ChunkEntities:
    """A stored chunk (its collection and id) and the entities it names."""

    collection: str
    chunk_id: str
    named: tuple[Named, ...]


@dataclass(slots=True)
class DocEntity:
    """One entity as a namespace's documents name it (a row read back).

    Attributes:
        key: its entity key.
        surfaces: how it is written -> how many chunks write it so.
        types: its types -> votes.
        weak: every mention was weak.
        aliases: keys of other names said with it.
        counts: collection -> how many of its chunks name it (all, not only those listed).
        chunks: ``(collection, chunk id)``: the first ones that named it, then the newest.
    """

    key: str
    surfaces: dict[str, int] = field(default_factory=dict)
    types: dict[str, int] = field(default_factory=dict)
    weak: bool = True
    aliases: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    chunks: list[tuple[str, str]] = field(default_factory=list)

    @property
    def count(self) -> int:
        """How many chunks name it, in every collection read."""
        return sum(self.counts.values())

    @property
    def name(self) -> str:
        """The name it is written with most often (ties: the first in sort order)."""
        if not self.surfaces:
            return self.key
        return min(self.surfaces, key=lambda s: (-self.surfaces[s], s))

    @property
    def type(self) -> str:
        """Its type by votes (``"other"`` when nothing says)."""
        if not self.types:
            return "other"
        return min(self.types, key=lambda t: (-self.types[t], t))

    def document(self) -> str:
        """The row's stored JSON (what `parse` reads back)."""
        return json.dumps(
            {
                "s": self.surfaces,
                "t": self.types,
                "w": self.weak,
                "a": self.aliases,
                "n": self.counts,
                "c": [list(c) for c in self.chunks],
            },
            ensure_ascii=False,
            separators=(",", ":"),
        )

    @classmethod
    def parse(cls, key: str, text: str) -> DocEntity | None:
        """A row's entity, or None when its document does not decode (skipped, never raised)."""
        try:
            data = json.loads(text)
            chunks = [(str(c), str(i)) for c, i in data.get("c", [])]
            counts = data.get("n", {})
            if not isinstance(counts, dict):  # a total of every collection: count those listed
                counts = {c: sum(1 for o, _ in chunks if o == c) for c, _ in chunks}
            return cls(
                key,
                {str(s): int(n) for s, n in dict(data.get("s", {})).items()},
                {str(t): int(n) for t, n in dict(data.get("t", {})).items()},
                bool(data.get("w", True)),
                [str(a) for a in data.get("a", [])],
                {str(c): int(n) for c, n in counts.items()},
                chunks,
            )
        except (ValueError, TypeError, AttributeError):
            return None


class DocEntities:
    """The documents' entity index of one store (see the module docstring)."""

    def __init__(self, collections: Collections) -> None:
        self._collections = collections

    def add(self, namespace: str, chunks: Sequence[ChunkEntities]) -> None:
        """List each chunk under the entities it names (a chunk listed already is not again)."""
        chunks = [c for c in chunks if c.named]
        if not chunks:
            return
        cols = self._collections
        partition = entity_partition(cols.name, namespace)
        with cols.conn.lock:
            keys = sorted({n.key for c in chunks for n in c.named})
            known = self._read(partition, keys)
            listed = {_chunk_id(c.collection, c.chunk_id) for c in chunks}
            again = {key for key, _, _ in cols.part_rows(partition, ids=sorted(listed))}
            done: dict[str, str] = {}
            for chunk in chunks:
                ref = (chunk.collection, chunk.chunk_id)
                if _chunk_id(*ref) in again:
                    continue  # stored already (the same text): listed under its entities
                for named in chunk.named:
                    entity = known.setdefault(named.key, DocEntity(named.key))
                    _merge(entity, named, ref)
                done[_chunk_id(*ref)] = json.dumps(sorted({n.key for n in chunk.named}))
            # Entities first: a chunk's own row says it is indexed, so it is written last.
            self._write(partition, {_entity_id(k): e.document() for k, e in known.items()})
            self._write(partition, done)

    def lookup(
        self, namespace: str, keys: Iterable[str], *, collections: Collection[str] | None = None
    ) -> dict[str, DocEntity]:
        """The entities with these keys that documents name (in ``collections`` only, if given).

        An entity whose listed chunks are all in other collections is left out.
        """
        cols = self._collections
        partition = entity_partition(cols.name, namespace)
        found = self._read(partition, sorted(set(keys)))
        if collections is not None:
            allowed = set(collections)
            for key in list(found):
                entity = found[key]
                entity.chunks = [c for c in entity.chunks if c[0] in allowed]
                entity.counts = {c: n for c, n in entity.counts.items() if c in allowed}
                if not entity.chunks:
                    del found[key]
        return found

    def remove(self, namespace: str, chunks: Sequence[tuple[str, str]]) -> None:
        """Take deleted chunks (collection, chunk id) out of the entities that list them."""
        if not chunks:
            return
        cols = self._collections
        partition = entity_partition(cols.name, namespace)
        with cols.conn.lock:
            ids = sorted({_chunk_id(c, i) for c, i in chunks})
            rows = cols.part_rows(partition, ids=ids, documents=False)
            if not rows:
                return
            refs = {_chunk_id(c, i): (c, i) for c, i in chunks}
            named: dict[str, list[tuple[str, str]]] = {}  # entity key -> its chunks deleted
            for row_id, _, meta in rows:
                try:
                    keys = {str(k) for k in json.loads(str(meta.get("r", "[]")))}
                except ValueError:
                    continue
                for key in keys:
                    named.setdefault(key, []).append(refs[row_id])
            entities = self._read(partition, sorted(named))
            emptied: list[str] = []
            kept: dict[str, str] = {}
            for key, entity in entities.items():
                gone = set(named[key])  # counted even when no longer listed (`CHUNKS_KEPT`)
                for collection, _ in gone:
                    entity.counts[collection] = entity.counts.get(collection, 0) - 1
                entity.chunks = [c for c in entity.chunks if c not in gone]
                entity.counts = {c: n for c, n in entity.counts.items() if n > 0}
                if entity.count == 0 or not entity.chunks:
                    emptied.append(_entity_id(key))
                else:
                    kept[_entity_id(key)] = entity.document()
            self._write(partition, kept)
            cols.delete_in(partition, [key for key, _, _ in rows] + emptied)

    def drop(self, namespace: str) -> None:
        """Drop a namespace's whole index (its documents are all gone)."""
        cols = self._collections
        with cols.conn.lock:
            cols.drop(entity_partition(cols.name, namespace))

    def _read(self, partition: str, keys: Sequence[str]) -> dict[str, DocEntity]:
        if not keys:
            return {}
        rows = self._collections.part_rows(
            partition, ids=[_entity_id(k) for k in keys], documents=False
        )
        found: dict[str, DocEntity] = {}
        for row_id, _, meta in rows:
            key = row_id[2:]
            entity = DocEntity.parse(key, str(meta.get("r", "")))
            if entity is not None:
                found[key] = entity
        return found

    def _write(self, partition: str, rows: Mapping[str, str]) -> None:
        if not rows:
            return
        cols = self._collections
        ids = list(rows)

        def upsert(collection: Any) -> None:
            for start in range(0, len(ids), cols.batch):
                chunk = ids[start : start + cols.batch]
                cols.conn.call(
                    "write the documents' entity index",
                    functools.partial(
                        collection.upsert,
                        ids=chunk,
                        embeddings=[_VECTOR] * len(chunk),
                        metadatas=[{"r": rows[k]} for k in chunk],
                    ),
                    wrote=(
                        "; the chunks are stored: index them with "
                        "ContextMemory.index_document_entities()"
                    ),
                )

        cols.run(partition, upsert, create=True)


def _merge(entity: DocEntity, named: Named, ref: tuple[str, str]) -> None:
    if ref in entity.chunks:
        return
    entity.surfaces[named.surface] = entity.surfaces.get(named.surface, 0) + 1
    if named.type != "other":
        entity.types[named.type] = entity.types.get(named.type, 0) + 1
    entity.weak = entity.weak and named.weak
    if named.alias and named.alias != entity.key and named.alias not in entity.aliases:
        entity.aliases.append(named.alias)
        entity.aliases.sort()
    entity.counts[ref[0]] = entity.counts.get(ref[0], 0) + 1
    entity.chunks.append(ref)
    if len(entity.chunks) > CHUNKS_KEPT:
        entity.chunks = entity.chunks[:_FIRST] + entity.chunks[-(CHUNKS_KEPT - _FIRST) :]


def _entity_id(key: str) -> str:
    return "k:" + key


def _chunk_id(collection: str, chunk_id: str) -> str:
    return "c:" + json_key(collection, chunk_id)
