"""A session's entities, read from its messages: `EntityIndex`, kept beside its `SessionIndex`.

Nothing here is stored. `EntityIndexes.current` takes the session's `SessionIndex` (the copy of
its messages a `ContextMemory` keeps, read again whenever the session's version says a message
was deleted or replaced) and extracts the entities of the messages it has not seen yet, so a
session's entities always follow its stored messages and cost what its new messages cost.
Each message is read once per copy; a custom extractor's answers are also remembered by text
and asked for as messages are stored (`ctxbudget.memory.entities.answers`), so a copy read
again does not ask a model again, and an assembly seldom waits for one.

Per entity (after `resolve` merged its names): its names, type (by votes: a title, kin or a
speaker makes a person; ``moved to`` a place...), how many turns mention it and how many it
said, the first and the newest turn that mention it (`TURNS_KEPT` ids: the first and the most
recent), and its salience. Two entities mentioned in one turn are related (`Graph`).
"""

from __future__ import annotations

import math
import re
import threading
import weakref
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ctxbudget.errors import ConfigurationError
from ctxbudget.memory.entities.aliases import resolve
from ctxbudget.memory.entities.answers import BATCH, Answers, Key, message_key
from ctxbudget.memory.entities.graph import Graph
from ctxbudget.memory.entities.names import EntityExtractor, Mention, as_mentions, entity_key
from ctxbudget.memory.entities.rules import MAX_CHARS, RuleExtractor
from ctxbudget.store.records import Record

if TYPE_CHECKING:
    from ctxbudget.memory.reading.session_index import SessionIndex

__all__ = ["TURNS_KEPT", "Entity", "EntityIndex", "EntityIndexes", "Resolved"]

TURNS_KEPT = 12
"""Turn ids kept per entity: its first mention and the most recent ones."""

_PAIRS_PER_TURN = 12  # entities of one turn that relate to each other (the first ones)
_SPEAKER_EDGE = 0.5  # a speaker and what they mention, per turn
_SALIENCE_HALF_LIFE = 200  # turns after which an entity's salience halves
_LOWER = re.compile(r"[^\W\d_][\w'\-]*", re.UNICODE)


@dataclass(frozen=True, slots=True)
class Entity:
    """One entity of a session, as its messages mention it.

    Attributes:
        key: its canonical key (`entity_key` of its fullest name).
        name: its fullest name, as written most often.
        type: ``"person"``, ``"place"``, ``"org"`` or ``"other"``.
        aliases: its other names (as written).
        mentions: turns whose text mentions it.
        spoke: turns it said (as their speaker).
        salience: mentions (and a fifth of turns said), fading with the turns since the last.
        first_seq: the seq of the first turn that mentions it or that it said.
        first_time: that turn's timestamp.
        last_seq: the seq of the newest such turn.
        last_time: its timestamp.
        turns: ids of turns that mention it, oldest first: the first and the most recent
            (`TURNS_KEPT` at most).
        weak: only ever a capitalized word starting a sentence (see `Mention.weak`).
    """

    key: str
    name: str
    type: str
    aliases: tuple[str, ...]
    mentions: int
    spoke: int
    salience: float
    first_seq: int | None
    first_time: float | None
    last_seq: int | None
    last_time: float | None
    turns: tuple[str, ...]
    weak: bool


@dataclass(slots=True)
class _Tally:
    """What the messages say of one key (before names are merged)."""

    surfaces: Counter[str] = field(default_factory=Counter)
    types: Counter[str] = field(default_factory=Counter)
    mentions: int = 0
    spoke: int = 0
    weak: bool = True
    first: tuple[int, float | None] | None = None  # seq, time
    last: tuple[int, float | None] | None = None
    seqs: list[int] = field(default_factory=list)  # of the turns whose text mentions it

    def seen(self, seq: int, when: float | None) -> None:
        if self.first is None or seq < self.first[0]:
            self.first = (seq, when)
        if self.last is None or seq >= self.last[0]:
            self.last = (seq, when)


@dataclass(frozen=True, slots=True)
class Resolved:
    """A session's entities once names are merged (for one set of declared aliases).

    Attributes:
        of: each key seen (any name or alias) -> its entity's key.
        entities: the entities by key.
        graph: entities related by being mentioned together.
        mentioned: each entity's turns that mention it, every one, oldest first (what
            `Entity.turns` keeps a few of; a session's worth at most).
    """

    of: Mapping[str, str]
    entities: Mapping[str, Entity]
    graph: Graph
    mentioned: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


class EntityIndex:
    """The entities of one session's messages (see the module docstring); thread-safe."""

    def __init__(self, extractor: EntityExtractor, memo: Answers | None) -> None:
        self._extractor = extractor
        self._memo = memo
        self.done = 0  # records of the session index read so far
        self.tallies: dict[str, _Tally] = {}
        self.said_with: Counter[tuple[str, str]] = Counter()
        self.together: Counter[tuple[str, str]] = Counter()
        self.spoken: Counter[tuple[str, str]] = Counter()  # a speaker and what they mention
        self.user_names: Counter[str] = Counter()
        self.newest = -1
        self.ids: dict[int, str] = {}  # each read message's id by seq
        self.lower: set[str] = set()  # words the session writes in lower case somewhere
        self._version = 0
        self._cache: tuple[int, frozenset[tuple[str, str]], Resolved] | None = None
        self.lock = threading.Lock()

    def catch_up(self, index: SessionIndex) -> None:
        """Read the messages of ``index`` not read yet (it only ever grows)."""
        with self.lock:
            size = min(len(index.records), len(index.authors))
            if size <= self.done:
                return
            records = index.records[self.done : size]
            authors = index.authors[self.done : size]
            self._read(records, authors)
            self.done = size
            self._version += 1

    def _read(self, records: Sequence[Record], authors: Sequence[str | None]) -> None:
        keys = [message_key(r, a) for r, a in zip(records, authors, strict=True)]
        texts = [text for text, _ in keys]
        found = self._extract(keys)
        for record, author, mentions in zip(records, authors, found, strict=True):
            self._add(record, author, mentions)
        for text in texts:
            self.lower.update(w for w in _LOWER.findall(text[:MAX_CHARS]) if w[0].islower())

    def _extract(self, keys: list[Key]) -> list[list[Mention]]:
        if self._memo is not None:  # a custom extractor: answers remembered, or being asked
            return self._memo.mentions(keys)
        out: list[list[Mention]] = []
        for start in range(0, len(keys), BATCH):
            batch = keys[start : start + BATCH]
            given = self._extractor.extract([t for t, _ in batch], speakers=[s for _, s in batch])
            out += as_mentions(given, len(batch), type(self._extractor).__name__)
        return out

    def _tally(self, key: str) -> _Tally:
        tally = self.tallies.get(key)
        if tally is None:
            tally = self.tallies[key] = _Tally()
        return tally

    def _add(self, record: Record, author: str | None, mentions: list[Mention]) -> None:
        seq = record.seq if record.seq is not None else self.newest + 1
        self.newest = max(self.newest, seq)
        when = record.timestamp
        self.ids[seq] = record.id
        keys: list[str] = []
        speaker = entity_key(author) if author else ""
        if speaker:
            tally = self._tally(speaker)
            tally.spoke += 1
            tally.weak = False
            tally.types["person"] += 1
            tally.surfaces[author or speaker] += 0  # known, without counting as a mention
            tally.seen(seq, when)
            if record.role == "user":
                self.user_names[author or speaker] += 1
        for mention in mentions:
            key = entity_key(mention.name)
            if not key or key in keys:
                continue
            keys.append(key)
            tally = self._tally(key)
            tally.surfaces[mention.name] += 1
            tally.mentions += 1
            tally.weak = tally.weak and mention.weak
            if mention.type != "other":
                tally.types[mention.type] += 1
            tally.seen(seq, when)
            tally.seqs.append(seq)
            if mention.alias:
                alias = entity_key(mention.alias)
                if alias and alias != key:
                    self.said_with[(key, alias)] += 1
                    self._tally(alias).surfaces[mention.alias] += 0
        related = keys[:_PAIRS_PER_TURN]
        for i, a in enumerate(related):
            for b in related[i + 1 :]:
                self.together[(a, b) if a < b else (b, a)] += 1
        if speaker:
            for key in related:
                if key != speaker:
                    self.spoken[(speaker, key) if speaker < key else (key, speaker)] += 1

    def query_speaker(self) -> str:
        """Who ``my`` means in a query: the user's most frequent name, else ``"user"``."""
        with self.lock:
            if not self.user_names:
                return "user"
            return min(self.user_names.items(), key=lambda kv: (-kv[1], kv[0]))[0]

    def resolved(self, declared: frozenset[tuple[str, str]] = frozenset()) -> Resolved:
        """The session's entities with names merged (cached until a message or alias changes).

        ``declared``: pairs of names declared to be one entity (`declared_aliases`).
        """
        with self.lock:
            cache = self._cache
            if cache is not None and cache[0] == self._version and cache[1] == declared:
                return cache[2]
            result = self._resolve(declared)
            self._cache = (self._version, declared, result)
            return result

    def _resolve(self, declared: frozenset[tuple[str, str]]) -> Resolved:
        counts = {k: t.mentions + t.spoke for k, t in self.tallies.items()}
        pairs = [(entity_key(a), entity_key(b)) for a, b in sorted(declared)]
        named = {entity_key(n): n for pair in sorted(declared) for n in pair}
        of = resolve(counts, self.said_with.keys(), pairs)
        groups: dict[str, list[str]] = {}
        for key, canon in of.items():
            groups.setdefault(canon, []).append(key)
        entities = {
            canon: self._entity(canon, sorted(members), named) for canon, members in groups.items()
        }
        graph = Graph()
        for pair in sorted(set(self.together) | set(self.spoken)):
            ga, gb = of[pair[0]], of[pair[1]]
            if not (entities[ga].weak or entities[gb].weak):
                graph.add(ga, gb, self.together[pair] + _SPEAKER_EDGE * self.spoken[pair])
        mentioned = {
            canon: tuple(
                self.ids[seq]
                for seq in sorted(
                    {s for k in members if k in self.tallies for s in self.tallies[k].seqs}
                )
            )
            for canon, members in groups.items()
        }
        return Resolved(of, entities, graph, mentioned)

    def _entity(self, canon: str, members: list[str], declared: Mapping[str, str]) -> Entity:
        known = [(k, self.tallies[k]) for k in members if k in self.tallies]
        tallies = [t for _, t in known]
        surfaces: Counter[str] = Counter()
        types: Counter[str] = Counter()
        for tally in tallies:
            surfaces.update(tally.surfaces)
            types.update(tally.types)
        names = sorted(surfaces, key=lambda s: (entity_key(s) != canon, -surfaces[s], s))
        name = names[0] if names else declared.get(canon, canon)
        kind = min(types, key=lambda t: (-types[t], t)) if types else "other"
        firsts = [t.first for t in tallies if t.first is not None]
        lasts = [t.last for t in tallies if t.last is not None]
        first = min(firsts, key=lambda f: f[0]) if firsts else None
        last = max(lasts, key=lambda f: f[0]) if lasts else None
        seqs = sorted({seq for t in tallies for seq in t.seqs})
        turns = seqs[:1] + seqs[1:][-(TURNS_KEPT - 1) :]
        mentions = len(seqs)
        spoke = sum(t.spoke for t in tallies)
        since = self.newest - last[0] if last is not None else 0
        salience = math.log1p(mentions + 0.2 * spoke) * 0.5 ** (since / _SALIENCE_HALF_LIFE)
        named = entity_key(name)
        aliases = [
            min(t.surfaces, key=lambda s: (-t.surfaces[s], s))
            for k, t in known
            if k != named and t.surfaces
        ]
        aliases += [declared[k] for k in members if k not in self.tallies and k in declared]
        return Entity(
            key=canon,
            name=name,
            type=kind,
            aliases=tuple(aliases),
            mentions=mentions,
            spoke=spoke,
            salience=salience,
            first_seq=first[0] if first else None,
            first_time=first[1] if first else None,
            last_seq=last[0] if last else None,
            last_time=last[1] if last else None,
            turns=tuple(self.ids[seq] for seq in turns),
            # Only ever starting a sentence, and written in lower case elsewhere: a common word
            # ("Family is everything"), not a name ("Ana met Bruno").
            weak=all(t.weak for t in tallies) and any(w in self.lower for w in canon.split()),
        )


class EntityIndexes:
    """The entity indexes of the sessions a `ContextMemory` keeps (one per `SessionIndex`).

    An entity index lives as long as its session's index: when that is read again (a message
    deleted or replaced) or dropped, the entities are read again from the new one.
    """

    def __init__(self, extractor: EntityExtractor | None = None) -> None:
        if extractor is not None and not callable(getattr(extractor, "extract", None)):
            msg = (
                f"entity_extractor must have an extract(texts, *, speakers) method (an "
                f"EntityExtractor), got {type(extractor).__name__}"
            )
            raise ConfigurationError(msg)
        self.extractor: EntityExtractor = extractor if extractor is not None else RuleExtractor()
        builtin = type(self.extractor) is RuleExtractor
        self._memo = None if builtin else Answers(self.extractor)
        self._by_index: weakref.WeakKeyDictionary[SessionIndex, EntityIndex] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()

    def prepare(self, records: Sequence[Record]) -> None:
        """Have a custom extractor read messages just stored, off the caller's thread."""
        if self._memo is not None:
            self._memo.prepare(records)

    def close(self) -> None:
        """Stop reading messages in the background (see `Answers.close`)."""
        if self._memo is not None:
            self._memo.close()

    def current(self, index: SessionIndex) -> EntityIndex:
        """The entities of ``index``'s session, up to its newest message."""
        with self._lock:
            entities = self._by_index.get(index)
            if entities is None:
                entities = self._by_index[index] = EntityIndex(self.extractor, self._memo)
        entities.catch_up(index)
        return entities
