"""Entities in documents: read when a chunk is stored, found again when a query names them.

With `MemoryConfig.entities` on, `ContextMemory.add_documents` reads the entities of each chunk
it stores with the memory's extractor (`chunk_entities`) and the store lists the chunk under
each (`ctxbudget.store.doc_entities`). An assembly looks up the names its query holds
(`query_grams`: its words and runs of up to four words, common words alone left out), by id, in
the collections it searches (`document_matches`): a few rows and a few chunks read, however
many documents are stored. For each entity found:

- its **chunks** become candidates (tier RETRIEVED, `mention_chunks`), with the same ids
  document retrieval gives them, so one chunk is never offered twice: the better score wins;
- its **card** (`ctxbudget.memory.entities.cards`) says in how many chunks it is named and
  quotes the best of those offered nowhere else (`document_lines`); an entity of the session
  named in documents too gets these lines on its own card.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ctxbudget.core.items import ContextItem
from ctxbudget.memory.entities.lexicon import COMMON
from ctxbudget.memory.entities.names import EntityExtractor, as_mentions, entity_key, query_words
from ctxbudget.memory.entities.quotes import QUOTE_CHARS, label, sentence
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.memory.reading.lexical import lexical_terms, record_score
from ctxbudget.memory.reading.record_items import item_id, retrieved_item
from ctxbudget.store.doc_entities import ChunkEntities, DocEntity, Named
from ctxbudget.store.records import Record

if TYPE_CHECKING:
    from ctxbudget.store.chroma_store import ChromaStore

__all__ = [
    "DocumentMatch",
    "chunk_entities",
    "document_lines",
    "document_matches",
    "mention_chunks",
    "query_grams",
]

_BATCH = 64  # chunks sent to an extractor at once
_GRAMS = 256  # names looked up per query, at most
_QUERY_WORDS = 80  # words of the query read for names
_READ = 12  # chunks read per entity: its first and the newest
_SPECIFIC = 8  # an entity named in at most this many chunks is fully specific
_RELEVANCE = 0.5  # half for the entity, half for the query's other words
_QUOTES = 2
_LISTED = 3  # chunk ids named on a card


@dataclass(frozen=True, slots=True)
class DocumentMatch:
    """An entity the query names that documents name too, with the chunks read for it.

    Attributes:
        entity: its row in the documents' entity index (aliases merged in).
        chunks: the chunks read: the first that named it, then the newest (`_READ` at most).
    """

    entity: DocEntity
    chunks: tuple[Record, ...]


def chunk_entities(extractor: EntityExtractor, records: Sequence[Record]) -> list[ChunkEntities]:
    """The entities each chunk names, for the store's index (an alias is listed both ways).

    Raises:
        ConfigurationError: the extractor's answer is not one list per chunk.
    """
    out: list[ChunkEntities] = []
    where = type(extractor).__name__
    for start in range(0, len(records), _BATCH):
        batch = records[start : start + _BATCH]
        texts = [r.text for r in batch]
        given = extractor.extract(texts, speakers=[None] * len(texts))
        for record, mentions in zip(batch, as_mentions(given, len(texts), where), strict=True):
            named: dict[str, Named] = {}
            for mention in mentions:
                key = entity_key(mention.name)
                alias = entity_key(mention.alias) if mention.alias else ""
                if key and key not in named:
                    named[key] = Named(key, mention.name, mention.type, mention.weak, alias or None)
                if alias and alias != key and alias not in named and mention.alias:
                    named[alias] = Named(alias, mention.alias, mention.type, mention.weak, key)
            collection = record.metadata.get("doc_namespace")
            out.append(
                ChunkEntities(
                    collection if isinstance(collection, str) else "",
                    record.id,
                    tuple(named.values()),
                )
            )
    return out


def query_grams(query: str) -> dict[str, bool]:
    """Keys a query may name an entity by -> whether it writes them capitalized.

    Its words and runs of two to four of them (the first `_QUERY_WORDS` words, `_GRAMS` keys
    at most); a common word alone (``may``, ``Thanks``) is none. (A cache of the last queries'
    keys, read twice per call, saved under 10% of a call with entities on: it went.)
    """
    return dict(_grams(query))


def _grams(query: str) -> tuple[tuple[str, bool], ...]:
    words = query_words(query)
    words = words[:_QUERY_WORDS]
    grams: dict[str, bool] = {}
    for start in range(len(words)):
        for size in (4, 3, 2, 1):
            gram = words[start : start + size]
            if len(gram) < size:
                continue
            if size == 1 and gram[0].casefold().split("'")[0] in COMMON:
                continue
            key = entity_key(" ".join(gram))
            if key and len(grams) < _GRAMS:
                capitalized = all(w[:1].isupper() for w in gram)
                grams[key] = grams.get(key, False) or capitalized
    return tuple(grams.items())


def document_matches(
    store: ChromaStore,
    namespace: str,
    query: str,
    documents: bool | str | Sequence[str],
    config: MemoryConfig,
) -> list[DocumentMatch]:
    """The entities ``query`` names that the searched documents name, in the query's order.

    At most `MemoryConfig.entity_cards`; an entity only ever seen capitalized at a sentence
    start must be capitalized in the query; aliases said with one are merged into it.
    """
    if documents is False or not config.entities or config.entity_cards <= 0:
        return []
    collections = None if documents is True else _collections(documents)
    grams = query_grams(query)
    index = store.doc_entities
    found = index.lookup(namespace, grams, collections=collections)
    aliases = {a for e in found.values() for a in e.aliases if a not in found}
    if aliases:
        found.update(index.lookup(namespace, sorted(aliases)[:_GRAMS], collections=collections))
    wanted = set(config.entity_types)
    merged: dict[str, DocEntity] = {}
    for key in grams:
        entity = found.get(key)
        if entity is None or (entity.weak and not grams[key]):
            continue
        entity = _with_aliases(entity, found)
        if entity.key in merged or (wanted and entity.type not in wanted):
            continue
        merged[entity.key] = entity
        if len(merged) >= config.entity_cards:
            break
    out = []
    for entity in merged.values():
        refs = list(dict.fromkeys([*entity.chunks[:1], *entity.chunks[-(_READ - 1) :]]))
        chunks: list[Record] = []
        for collection in dict.fromkeys(c for c, _ in refs):
            ids = [i for c, i in refs if c == collection]
            chunks += store.get(ids, namespace=namespace, collection=collection)
        if chunks:
            out.append(DocumentMatch(entity, tuple(chunks)))
    return out


def mention_chunks(
    matches: Sequence[DocumentMatch],
    query: str,
    config: MemoryConfig,
    session_id: str,
    newest: float | None,
) -> list[ContextItem]:
    """The chunks naming the query's entities as candidates, best first (`entity_turns`).

    Half of a chunk's relevance is its entity's specificity (1 when named in at most
    `_SPECIFIC` chunks), half the share of the query's other words it holds.
    """
    terms = set(lexical_terms(query))
    found: dict[str, ContextItem] = {}
    for match in matches:
        entity = match.entity
        specific = min(1.0, _SPECIFIC / max(1, entity.count)) ** 0.5
        other = terms - set(lexical_terms(" ".join(entity.surfaces)))
        for record in match.chunks:
            if not record.text.strip():
                continue
            share = len(other & set(lexical_terms(record.text))) / len(other) if other else 0.0
            relevance = _RELEVANCE * (specific + share)
            score = record_score(config.scoring, record, relevance, newest, session_id)
            item = retrieved_item(record, score, session_id)
            if item.id in found and found[item.id].score >= item.score:
                continue
            found[item.id] = dataclasses.replace(
                item,
                metadata={"source": "entity", "entity": entity.name, "entity_key": entity.key},
            )
    ranked = sorted(found.values(), key=lambda it: (-it.score, it.id))
    return ranked[: max(0, config.entity_turns)]


def document_lines(
    match: DocumentMatch,
    terms: Collection[str],
    shown: Collection[str],
    session_id: str,
) -> tuple[str, list[str], list[str]]:
    """What a card says of an entity's documents: a line, quotes, and the items quoted.

    ``terms``: the query's lexical terms; ``shown``: item ids offered elsewhere (never quoted).
    """
    entity = match.entity
    listed = ", ".join(_ref(c, i) for c, i in entity.chunks[:_LISTED])
    more = entity.count - min(len(entity.chunks), _LISTED)
    line = f"Named in {entity.count} document chunk{'s' if entity.count != 1 else ''}: {listed}"
    line += f" and {more} more." if more > 0 else "."
    names = [entity.name, *entity.surfaces]
    ranked = []
    for record in match.chunks:
        item = item_id(record, session_id)
        if item in shown or not record.text.strip():
            continue
        share = len(set(terms) & set(lexical_terms(record.text)))
        ranked.append((-share, -min(len(record.text), QUOTE_CHARS), item, record))
    quotes, quoted = [], []
    for _, _, item, record in sorted(ranked, key=lambda r: r[:3])[:_QUOTES]:
        collection = record.metadata.get("doc_namespace")
        ref = _ref(collection if isinstance(collection, str) else "", record.id)
        quotes.append(f"{ref}: {sentence(record.text, names)}")
        quoted.append(item)
    return line, quotes, quoted


def _with_aliases(entity: DocEntity, found: Mapping[str, DocEntity]) -> DocEntity:
    """``entity`` with the rows of the aliases said with it merged in (the most named wins)."""
    group = [entity] + [found[a] for a in entity.aliases if a in found]
    if len(group) == 1:
        return entity
    head = min(group, key=lambda e: (-e.count, e.key))
    merged = DocEntity(head.key, weak=all(e.weak for e in group))
    for member in group:
        for surface, n in member.surfaces.items():
            merged.surfaces[surface] = merged.surfaces.get(surface, 0) + n
        for kind, n in member.types.items():
            merged.types[kind] = merged.types.get(kind, 0) + n
        merged.chunks += [c for c in member.chunks if c not in merged.chunks]
    for collection in {c for e in group for c in e.counts}:
        listed = sum(1 for c, _ in merged.chunks if c == collection)
        merged.counts[collection] = max([listed] + [e.counts.get(collection, 0) for e in group])
    merged.aliases = sorted({e.key for e in group} - {head.key})
    return merged


def _collections(documents: str | Sequence[str]) -> list[str]:
    return [documents] if isinstance(documents, str) else list(documents)


def _ref(collection: str, chunk_id: str) -> str:
    return label(f"{collection}/{chunk_id}" if collection else chunk_id)
