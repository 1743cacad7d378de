"""A session's messages kept in memory for retrieval: records, vectors, BM25 words, episodes.

`SessionIndex` is built on first use of a session (one read of its messages with their
vectors) and extended as messages arrive; `SessionIndexes` keeps those of the sessions a
`ContextMemory` used last, keyed by the session's generation (`ctxbudget.store.sessions.Stamp`),
and reads a session again when its generation changed: a message was deleted or replaced, or
the session was deleted and started again, by this object or any other, in any process.
`SessionIndex.search` is the session's dense search,
`SessionIndex.relevance` mixes dense and lexical matches of every query (see
`ctxbudget.memory.reading.lexical`); `ctxbudget.memory.reading.retrieval` uses both.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ctxbudget.core.items import ContextItem
from ctxbudget.memory.policy.scoring import Floats, Scoring
from ctxbudget.memory.reading.excerpts import Pieces, pieces
from ctxbudget.memory.reading.lexical import Ints, LexicalIndex, lexical_terms
from ctxbudget.memory.reading.speakers import find_speaker, spoken
from ctxbudget.memory.reading.successors import says_update
from ctxbudget.memory.reading.timeref import overlaps, query_span, turn_spans
from ctxbudget.store.records import Hit, Record
from ctxbudget.store.sessions import Stamp

if TYPE_CHECKING:
    pass

__all__ = ["Query", "SessionIndex", "span_of", "without_names"]


@dataclass(slots=True)
class Query:
    """One query of a multi-query search: the question itself or an earlier user turn."""

    weight: float
    text: str  # embedded for the dense search
    terms: list[str]  # matched by the lexical index
    own_id: str | None  # an earlier turn does not match itself
    found: tuple[Ints, Floats] = field(default_factory=lambda: (np.zeros(0, np.int64), np.zeros(0)))
    """The session's messages it matches (`SessionIndex.nearest`): positions, similarities."""


class SessionIndex:
    """A session's messages in order: records, unit vectors, BM25, episodes, authors, sizes.

    ``stamp`` is the store's stamp of the session when the index was read
    (`SessionView.stamp`): a deleted or replaced message, or the session deleted and started
    again, changes its generation, and the index is read again.
    """

    def __init__(self, episode_gap: float, counter_name: str, stamp: Stamp | None = None) -> None:
        self.lexical = LexicalIndex()
        self.stamp = stamp if stamp is not None else Stamp("", -1, 0)
        self.records: list[Record] = []
        self._rows: Any = None  # float32 unit vectors, one row per record (and spare rows)
        self.ids: list[str] = []
        self.authors: list[str | None] = []
        self.episodes: list[int] = []
        self._spans: list[list[tuple[float, float]]] | None = None  # read on first use
        self._updates: list[bool] = []  # read on first use (`updates`)
        self._texted: Any = np.zeros(0, dtype=bool)  # made on first use (`texted`)
        self._codes: tuple[Any, dict[tuple[str | None, str | None], int]] = (
            np.zeros(0, dtype=np.int64),
            {},
        )  # made on first use (`author_codes`)
        self._pieces: dict[int, Pieces] = {}  # cut on first use (`MemoryConfig.excerpts`)
        self.position: dict[str, int] = {}
        self.last_seq = -1
        self.newest: float | None = None
        self.gap = episode_gap
        self._counter = counter_name
        self._tokens = 0
        self._last_time: float | None = None
        self.lock = threading.RLock()
        """Held while the index is extended and while a call reads it (`SessionIndexes.reading`):
        its lists, rows and word index are extended together, never seen half extended."""
        self.broken = False  # an extension that failed part way: read again, never used

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def mean_tokens(self) -> float:
        """Mean tokens of a message (for sizing searches to the budget)."""
        return self._tokens / len(self.ids) if self.ids else 30.0

    def extend(self, found: Iterable[tuple[Record, Sequence[float]]]) -> None:
        """Index messages (with their vectors) newer than the last indexed one, in seq order."""
        for record, vector in sorted(found, key=lambda p: -1 if p[0].seq is None else p[0].seq):
            if record.seq is None or record.seq <= self.last_seq or record.id in self.position:
                continue
            unit = np.asarray(vector, dtype=np.float32)
            norm = float(np.linalg.norm(unit))
            self._add_row(unit / norm if norm > 0 else unit)
            self.records.append(record)
            # Participants are who speaks (user and assistant turns, not tools), in `name` or as
            # a "Name: " prefix (`speaker_of`); a prefixed text holds the name already.
            speaker = find_speaker(record) if record.role in ("user", "assistant") else None
            author = speaker.name if speaker is not None else None
            given = speaker is not None and not speaker.prefixed
            self.lexical.add(f"{author} {record.text}" if given else record.text)
            self.position[record.id] = len(self.ids)
            self.ids.append(record.id)
            self.authors.append(author)
            episode = self.episodes[-1] if self.episodes else 0
            when = record.timestamp
            if when is not None:
                if self._last_time is not None and when - self._last_time > self.gap:
                    episode += 1
                self._last_time = when
                self.newest = when if self.newest is None else max(self.newest, when)
            self.episodes.append(episode)
            self._tokens += record.tokens.get(self._counter, len(record.text) // 4 + 1)
            self.last_seq = record.seq

    def _add_row(self, unit: Any) -> None:
        """Append a vector to the rows (growing them by half when full)."""
        count = len(self.records)
        if self._rows is None:
            self._rows = np.zeros((max(64, count + 1), len(unit)), dtype=np.float32)
        elif count == len(self._rows):
            grown = np.zeros((count + count // 2 + 1, self._rows.shape[1]), dtype=np.float32)
            grown[:count] = self._rows
            self._rows = grown
        self._rows[count] = unit

    def nearest(self, vector: Sequence[float], k: int) -> tuple[Ints, Floats]:
        """Positions of the ``k`` messages most similar to ``vector`` and their cosine.

        Exact, in memory: what a Chroma search of the session's messages returns, without a
        call to Chroma. Highest first; of equal similarities, the earlier message.
        """
        return self.nearest_many([vector], [k])[0]

    def nearest_many(
        self, vectors: Sequence[Sequence[float]], ks: Sequence[int]
    ) -> list[tuple[Ints, Floats]]:
        """`nearest` of each vector (``ks[n]`` for ``vectors[n]``), the rows read once for all.

        A session's rows outgrow the CPU's caches: each pass over them costs what reading them
        costs, so a call's queries (the question, its last user turns) share one.
        """
        if not self.records or not vectors:
            return [
                (np.zeros(0, dtype=np.int64), np.zeros(0)) for _ in zip(vectors, ks, strict=True)
            ]
        units = np.stack([_unit(v) for v in vectors])
        # numpy's own loop, not BLAS: a BLAS product wakes its worker threads, which then
        # spin for ~10 ms of CPU each call, for a product that takes 0.1 ms on one core.
        similarity = np.einsum("ij,kj->ik", self._rows[: len(self.records)], units)
        found: list[tuple[Ints, Floats]] = []
        for column, k in enumerate(ks):
            if k <= 0:
                found.append((np.zeros(0, dtype=np.int64), np.zeros(0)))
                continue
            values = np.ascontiguousarray(similarity[:, column])
            top = _best(values, k)
            found.append((top, np.clip(values[top].astype(np.float64), -1.0, 1.0)))
        return found

    def search(self, vector: Sequence[float], k: int) -> list[Hit]:
        """The ``k`` messages most similar to ``vector`` (cosine), highest first, ties by id."""
        top, similarity = self.nearest(vector, k)
        hits = [Hit(self.records[int(p)], float(s)) for p, s in zip(top, similarity, strict=True)]
        hits.sort(key=lambda h: (-h.similarity, h.record.id))
        return hits

    def named_in(self, query: str) -> set[str]:
        """The session's participants the query names (every word of the name, any case)."""
        words = {w.casefold() for w in _WORDS.findall(query)}
        named: set[str] = set()
        for author in {a for a in self.authors if a}:
            parts = {w.casefold() for w in _WORDS.findall(author)}
            if parts and parts <= words:
                named.add(author)
        return named

    def spans(self) -> list[list[tuple[float, float]]]:
        """Each message's times (its own day, the dates it refers to; `turn_spans`)."""
        known = self._spans or []
        if len(known) < len(self.records):  # a new list: another thread may read the old one
            fresh = [turn_spans(spoken(r), r.timestamp) for r in self.records[len(known) :]]
            known = known + fresh
            self._spans = known
        return known

    @property
    def vectors(self) -> Any:
        """The messages' unit vectors (float32), one row per message in order."""
        return self._rows[: len(self.records)] if self._rows is not None else np.zeros((0, 0))

    def texted(self) -> Any:
        """Whether each message has text (a bool array): a turn of tool calls alone has none."""
        known = self._texted
        if len(known) < len(self.records):  # a new array: another thread may read the old one
            more = [bool(r.text.strip()) for r in self.records[len(known) :]]
            known = np.concatenate([known, np.asarray(more, dtype=bool)])
            self._texted = known
        return known

    def updates(self) -> list[bool]:
        """Whether each message reads as an update of an earlier one (`says_update`)."""
        known = self._updates
        if len(known) < len(self.records):  # a new list: another thread may read the old one
            known = known + [says_update(spoken(r)) for r in self.records[len(known) :]]
            self._updates = known
        return known

    def author_codes(self) -> Any:
        """Each message's author (role and name) as a small int, one per message (int64 array)."""
        known, names = self._codes
        if len(known) < len(self.records):  # a new array: another thread may read the old one
            names = dict(names)
            more = [
                names.setdefault((r.role, a), len(names))
                for r, a in zip(self.records[len(known) :], self.authors[len(known) :], strict=True)
            ]
            known = np.concatenate([known, np.asarray(more, dtype=np.int64)])
            self._codes = (known, names)
        return known

    def pieces(self, position: int) -> Pieces:
        """The message at ``position`` cut for excerpts (`ctxbudget.memory.reading.excerpts`)."""
        found = self._pieces.get(position)
        if found is None:
            found = pieces(self.records[position].text)
            self._pieces[position] = found
        return found

    def pieces_of(self, item: ContextItem) -> Pieces | None:
        """`pieces` of the message ``item`` was made from, if it is this session's (else None)."""
        position = self.position.get(item.record_id) if item.record_id is not None else None
        if position is None or self.records[position].text != item.text:
            return None  # another session's message, a document, or another text
        return self.pieces(position)

    def time_prior(self, query: str, time_weight: float, size: int) -> Floats | None:
        """``1 - time_weight`` for messages of no time the query names (None: it names none).

        Nothing changes when no message speaks of that time.
        """
        span = query_span(query) if time_weight > 0 else None
        if span is None:
            return None
        inside = np.array([overlaps(s, span) for s in self.spans()[:size]], dtype=bool)
        if not inside.any():
            return None
        return np.where(inside, 1.0, 1.0 - time_weight)

    def relevance(
        self,
        queries: Sequence[Query],
        scoring: Scoring,
        neighbours: int,
        named: set[str],
        asked: str | None = None,
    ) -> tuple[Floats, tuple[float, float]]:
        """Relevance of each message (`ctxbudget.memory.policy.scoring`) and the dense span."""
        size = len(self.ids)
        match: Floats = np.zeros(size)
        span = (0.0, 0.0)
        for number, query in enumerate(queries):
            dense: Floats = np.zeros(size)
            positions, similarity = query.found
            if len(positions):
                low, high = float(similarity.min()), float(similarity.max())
                if number == 0:
                    span = (low, high)
                dense[positions] = (similarity - low) / (high - low) if high > low else 1.0
            lexical = self.lexical.array(query.terms)
            top = float(lexical.max()) if size else 0.0
            if top > 0:
                lexical = lexical / top
            mixed = (1.0 - scoring.lexical_weight) * dense + scoring.lexical_weight * lexical
            own = self.position.get(query.own_id) if query.own_id else None
            if own is not None:
                mixed[own] = 0.0
            match = np.maximum(match, query.weight * mixed)
        context = scoring.in_context(match, self.episodes, neighbours=neighbours)
        context = context * scoring.author_prior(self.authors, named)
        if asked is not None:
            prior = self.time_prior(asked, scoring.time_weight, size)
            if prior is not None:
                context = context * prior
        best = float(context.max()) if size else 0.0
        return (context / best if best > 0 else context), span


_WORDS = re.compile(r"\w+", re.UNICODE)


def _unit(vector: Sequence[float]) -> Any:
    """``vector`` as float32 of length 1 (a zero vector as it is)."""
    query = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(query))
    return query / norm if norm > 0 else query


def _best(values: Any, k: int) -> Ints:
    """Positions of the ``k`` highest of ``values`` (no NaN), highest first, ties by position.

    What ``np.argsort(-values, kind="stable")[:k]`` returns, without sorting all of them: the
    ``k``-th highest value is found by partition, and only what is above it, with the earliest
    of those equal to it, is sorted.
    """
    n = len(values)
    if k >= n:
        return np.argsort(-values, kind="stable")
    threshold = np.partition(values, n - k)[n - k]  # the k-th highest
    above = np.flatnonzero(values > threshold)
    tied = np.flatnonzero(values == threshold)[: k - len(above)]
    chosen = np.sort(np.concatenate([above, tied]))
    return chosen[np.argsort(-values[chosen], kind="stable")]


def span_of(similarities: Iterable[float]) -> tuple[float, float]:
    values = list(similarities)
    return (min(values), max(values)) if values else (0.0, 0.0)


def without_names(query: str, names: set[str]) -> str:
    """The query for the dense search: who is asked about is matched by words, not meaning."""
    if not names:
        return query
    pattern = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    stripped = re.sub(rf"\b(?:{pattern})(?:'s|\u2019s)?\b", " ", query, flags=re.IGNORECASE)
    stripped = " ".join(stripped.split())
    return stripped if lexical_terms(stripped) else query
