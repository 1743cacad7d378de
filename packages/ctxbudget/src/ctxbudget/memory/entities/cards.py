"""Entity memory as candidates: a card per entity, the turns that mention it, patterns.

`entity_candidates` is what `ContextMemory.candidates` adds when `MemoryConfig.entities` is on:

- a **card** (tier `ENTITY`) for each entity the query names (by any of its names or aliases;
  ``my sister`` is the asking user's), for those related to them within
  `MemoryConfig.entity_depth` (breadth-first, nearest first), and for the session's most
  salient ones, `MemoryConfig.entity_cards` in all. A card holds the entity's name, type and
  other names, when it was first and last mentioned (turn ids, dates), what it is related to,
  and short quotes of the mentions that match the query best among those *not offered
  otherwise*: a card never repeats a turn that history or retrieval offers;
- the **turns that mention** an entity the query names, as retrieved candidates (at most
  `MemoryConfig.entity_turns`, those not offered already; relevance half a full match, more
  when they share the query's other words), so the evidence about "my sister" is found even
  when the question shares no word with it;
- **patterns** whose trigger the query is about, best success rate first (tier `ENTITY`).

Every item says where it came from: ``source`` ``"entity"`` or ``"pattern"`` and the same in
its metadata (with the entity's key, type and turns), so reports explain it like any other.
`MemoryConfig.entity_types` keeps only entities of some types.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from ctxbudget.core.ids import internal_id
from ctxbudget.core.items import ContextItem, Shrink, Tier
from ctxbudget.memory.entities.documents import (
    DocumentMatch,
    document_lines,
    mention_chunks,
    query_grams,
)
from ctxbudget.memory.entities.graph import DECLARED_WEIGHT, Graph
from ctxbudget.memory.entities.index import Entity, EntityIndex, Resolved
from ctxbudget.memory.entities.lexicon import KIN, MODIFIERS, PETS, ROLES
from ctxbudget.memory.entities.names import entity_key, query_words
from ctxbudget.memory.entities.quotes import QUOTE_CHARS, label, sentence
from ctxbudget.memory.entities.stored import (
    Pattern,
    Relation,
    declared_aliases,
    match_patterns,
)
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.memory.reading.lexical import lexical_terms, record_score
from ctxbudget.memory.reading.record_items import retrieved_item
from ctxbudget.store.records import Record, json_key, scope_of

__all__ = ["EntityScope", "entity_candidates", "named_in"]

_QUOTES = 2  # quoted mentions per card
_RELATED = 5  # related entities named per card
_PATTERNS = 3  # patterns offered per query
_TURN_RELEVANCE = 0.5  # a mention turn's relevance: half for its entity, half for the words
_SPECIFIC = 8  # an entity mentioned in at most this many turns is fully specific
_SCANNED = 256  # the newest mentions of one entity scored per query (and its first)


@dataclass(frozen=True, slots=True)
class EntityScope:
    """What one call's entity candidates come from (see `entity_candidates`)."""

    session_id: str
    query: str
    config: MemoryConfig
    offered: Collection[str]  # ids offered as history (and the stored query): never again
    retrieved: Mapping[str, ContextItem]  # retrieval's candidates by id
    record: Callable[[str], Record | None]  # the session's message with an id (its copy's)
    lexical: Callable[[list[str]], Mapping[str, float]]  # turns matching terms: id -> [0, 1]
    newest: float | None  # the session's newest timestamp (recency is counted to it)


def named_in(
    query: str, resolved: Resolved, speaker: str, extra: Collection[str] = ()
) -> list[str]:
    """The entities ``query`` names, in the order it names them (keys of ``resolved``).

    A name or alias matches as whole words (``Caroline's`` names Caroline); ``my``/``our``
    phrases are the ``speaker``'s (``my sister`` -> ``Ana's sister``). A common word alone
    (``may``) names no one, and an entity only ever seen capitalized at a sentence start
    (`Entity.weak`) must be capitalized in the query too. ``extra``: keys known from declared
    relations only.
    """
    words = query_words(query)
    found: list[str] = []

    def add(key: str, capitalized: bool) -> None:
        canon = resolved.of.get(key) or (key if key in extra else None)
        if canon is None or canon in found:
            return
        entity = resolved.entities.get(canon)
        if entity is not None and entity.weak and not capitalized:
            return
        found.append(canon)

    for start, word in enumerate(words):
        if word.casefold() in ("my", "our"):
            at = start + 1
            if at < len(words) and words[at].casefold() in MODIFIERS:
                at += 1
            if at < len(words) and words[at].casefold() in KIN | ROLES | PETS:
                add(entity_key(f"{speaker}'s {words[at]}"), True)
    for key, capitalized in query_grams(query).items():
        add(key, capitalized)
    return found


def entity_candidates(
    scope: EntityScope,
    index: EntityIndex | None,
    relations: Sequence[Relation],
    patterns: Sequence[tuple[Record, Pattern]],
    documents: Sequence[DocumentMatch] = (),
) -> tuple[list[ContextItem], list[ContextItem]]:
    """Cards and matched patterns (tier ENTITY), and mention turns and chunks (tier RETRIEVED).

    See the module docstring; ``index`` is the session's `EntityIndex` (None: no messages),
    ``relations`` and ``patterns`` those stored for the session and its user, ``documents``
    the entities the query names that documents name (`document_matches`).
    """
    config = scope.config
    declared = declared_aliases(relations)
    resolved = index.resolved(declared) if index is not None else Resolved({}, {}, Graph())
    speaker = index.query_speaker() if index is not None else "user"
    graph = Graph(resolved.graph)
    known: dict[str, str] = {}  # entities known from declared relations: key -> name
    for relation in relations:
        if relation.kind == "alias":
            continue
        a, b = (_canon(resolved, relation.a), _canon(resolved, relation.b))
        graph.add(a, b, DECLARED_WEIGHT, kind=relation.kind)
        known.setdefault(a, relation.a)
        known.setdefault(b, relation.b)
    named = named_in(scope.query, resolved, speaker, known)
    in_docs: dict[str, DocumentMatch] = {}  # a card's key -> what documents say of it
    for match in documents:
        in_docs.setdefault(_canon(resolved, match.entity.key), match)
    wanted = set(config.entity_types)

    def allowed(key: str) -> bool:
        entity = resolved.entities.get(key)
        kind = entity.type if entity is not None else "other"
        if entity is None and key in in_docs:
            kind = in_docs[key].entity.type
        return not wanted or kind in wanted

    chosen: dict[str, float] = {}
    start = named + [k for k in in_docs if k not in named]
    for key, distance in graph.walk(start, depth=config.entity_depth, fanout=_RELATED):
        if allowed(key) and len(chosen) < config.entity_cards:
            chosen[key] = 0.9 * 0.5**distance
    salient = sorted(
        (e for e in resolved.entities.values() if not e.weak and e.key not in chosen),
        key=lambda e: (-e.salience, e.key),
    )
    top = max((e.salience for e in salient), default=0.0)
    for entity in salient:
        if len(chosen) >= config.entity_cards:
            break
        if allowed(entity.key) and top > 0:
            chosen[entity.key] = 0.3 * entity.salience / top
    terms = set(lexical_terms(scope.query))
    turns = _mention_turns(scope, resolved, [k for k in named if allowed(k)], terms)
    turns += mention_chunks(documents, scope.query, config, scope.session_id, scope.newest)
    shown = set(scope.offered) | set(scope.retrieved) | {t.id for t in turns}
    matches = scope.lexical(sorted(terms)) if chosen else {}
    cards = [
        _card(scope, resolved, graph, key, known, score, matches, shown, in_docs.get(key))
        for key, score in chosen.items()
    ]
    cards += _pattern_items(scope, patterns)
    return cards, turns


def _canon(resolved: Resolved, name: str) -> str:
    key = entity_key(name)
    return resolved.of.get(key, key)


def _mention_turns(
    scope: EntityScope, resolved: Resolved, named: list[str], terms: set[str]
) -> list[ContextItem]:
    """The turns that mention the named entities, best first (see `entity_candidates`).

    Every turn that mentions one (the first and the `_SCANNED` newest, for an entity mentioned
    everywhere) is scored: half of its relevance is its entity's specificity (1 for an entity
    mentioned in at most `_SPECIFIC` turns, less for one mentioned everywhere, as a speaker's
    name is), half how well it matches the query's other words (BM25; the best 1). A turn retrieval
    offers already comes back only when this scores it higher (the same id, a better score).
    """
    limit = scope.config.entity_turns
    found: dict[str, ContextItem] = {}
    for key in named:
        entity = resolved.entities.get(key)
        turns = resolved.mentioned.get(key, ())
        if entity is None or not turns:
            continue
        specific = min(1.0, _SPECIFIC / len(turns)) ** 0.5
        own = set(lexical_terms(" ".join((entity.name, *entity.aliases))))
        matches = scope.lexical(sorted(terms - own))
        scanned = {t: n for n, t in enumerate(dict.fromkeys((*turns[:1], *turns[-_SCANNED:])))}
        # Only the best few by their match (then the newest) are scored: relevance follows it.
        order = sorted(
            (t for t in scanned if t not in scope.offered and t not in found),
            key=lambda t: (-matches.get(t, 0.0), -scanned[t]),
        )
        for turn in order[: 4 * max(1, limit)]:
            record = scope.record(turn)
            if record is None or not record.text.strip():
                continue
            relevance = _TURN_RELEVANCE * (specific + matches.get(turn, 0.0))
            score = record_score(
                scope.config.scoring, record, relevance, scope.newest, scope.session_id
            )
            item = retrieved_item(record, score, scope.session_id)
            found[turn] = dataclasses.replace(
                item, metadata={"source": "entity", "entity": entity.name, "entity_key": key}
            )
    ranked = sorted(found.values(), key=lambda it: (-it.score, it.id))[: max(0, limit)]
    return [
        it
        for it in ranked
        if it.id not in scope.retrieved or it.score > scope.retrieved[it.id].score
    ]


def _card(
    scope: EntityScope,
    resolved: Resolved,
    graph: Graph,
    key: str,
    known: Mapping[str, str],
    score: float,
    matches: Mapping[str, float],
    shown: set[str],
    docs: DocumentMatch | None,
) -> ContextItem:
    entity = resolved.entities.get(key)
    name = known.get(key, key)
    if entity is None and docs is not None:
        name = docs.entity.name
        lines = [_doc_headline(docs)]
    else:
        lines = [_headline(entity, name)]
    related = []
    for edge in graph.edges(key, fanout=_RELATED):
        other = resolved.entities.get(edge.target)
        called = other.name if other is not None else known.get(edge.target, edge.target)
        together = max(1, int(edge.weight))
        how = ", ".join(edge.kinds) or f"together in {together} turn{'s' if together > 1 else ''}"
        related.append(f"{called} ({how})")
    if related:
        lines.append("Related: " + "; ".join(related) + ".")
    quotes = _quotes(scope, resolved, entity, matches, shown) if entity is not None else []
    lines += [f"{label(turn)}: {quote}" for turn, quote in quotes]
    quoted = [turn for turn, _ in quotes]
    if docs is not None:
        line, doc_quotes, doc_quoted = document_lines(
            docs, lexical_terms(scope.query), shown, scope.session_id
        )
        lines += [line, *doc_quotes]
        quoted += doc_quoted
    text = "\n".join(lines)
    return ContextItem(
        internal_id("entity", json_key(scope.session_id, key)),
        text,
        tier=Tier.ENTITY,
        score=score,
        source="entity",
        shrink=Shrink.TRUNCATE,
        metadata={
            "source": "entity",
            "entity": entity.name if entity is not None else name,
            "entity_key": key,
            "type": entity.type if entity is not None else docs.entity.type if docs else "other",
            "turns": list(entity.turns) if entity is not None else [],
            "quoted": quoted,
        },
    )


def _doc_headline(docs: DocumentMatch) -> str:
    entity = docs.entity
    others = [s for s in sorted(entity.surfaces) if s != entity.name][:4]
    head = f"{entity.name} ({entity.type})"
    return head + (", also called " + ", ".join(others) if others else "") + "."


def _headline(entity: Entity | None, name: str) -> str:
    if entity is None:
        return f"{name} (known from declared relations)."
    head = f"{entity.name} ({entity.type})"
    if entity.aliases:
        head += ", also called " + ", ".join(entity.aliases[:4])
    parts = [head]
    if entity.spoke:
        parts.append(f"speaks in {_turns(entity.spoke)}")
    if entity.mentions and entity.turns:
        first, last = entity.turns[0], entity.turns[-1]
        said = f"mentioned in {_turns(entity.mentions)}: first {label(first)}"
        said += _date(entity.first_time)
        if last != first:
            said += f", latest {label(last)}{_date(entity.last_time)}"
        parts.append(said)
    return "; ".join(parts) + "."


def _turns(count: int) -> str:
    return f"{count} turn{'s' if count != 1 else ''}"


def _date(when: float | None) -> str:
    if when is None:
        return ""
    try:
        return " (" + datetime.fromtimestamp(when, tz=UTC).strftime("%Y-%m-%d") + ")"
    except (OverflowError, OSError, ValueError):
        return ""


def _quotes(
    scope: EntityScope,
    resolved: Resolved,
    entity: Entity,
    matches: Mapping[str, float],
    shown: set[str],
) -> list[tuple[str, str]]:
    """(turn id, quote) of the entity's mentions offered nowhere else, best match first."""
    names = [entity.name, *entity.aliases]
    ranked = []
    every = resolved.mentioned.get(entity.key, entity.turns)
    for turn in dict.fromkeys((*every[:1], *every[-_SCANNED:])):
        record = scope.record(turn)
        if record is None or turn in shown or not record.text.strip():
            continue
        # The best match of the query first; then the one that says most (not "Thanks, Mel!").
        size = min(len(record.text), QUOTE_CHARS)
        ranked.append((-matches.get(turn, 0.0), -size, -(record.seq or 0), turn, record))
    return [(turn, sentence(record.text, names)) for *_, turn, record in sorted(ranked)[:_QUOTES]]


def _pattern_items(
    scope: EntityScope, patterns: Sequence[tuple[Record, Pattern]]
) -> list[ContextItem]:
    items = []
    for record, pattern, score in match_patterns(patterns, scope.query, limit=_PATTERNS):
        tries = pattern.successes + pattern.failures
        record_of = f"worked {pattern.successes} of {tries} times" if tries else "not tried yet"
        owner, name = scope_of(record)
        items.append(
            ContextItem(
                internal_id("pattern", json_key(owner, name, record.id)),
                f"Procedure for {pattern.trigger} ({record_of}): {pattern.procedure}",
                tier=Tier.ENTITY,
                score=score,
                source="pattern",
                shrink=Shrink.TRUNCATE,
                metadata={
                    "source": "pattern",
                    "pattern": record.id,
                    "scope": owner,
                    "rate": pattern.rate,
                },
            )
        )
    return items
