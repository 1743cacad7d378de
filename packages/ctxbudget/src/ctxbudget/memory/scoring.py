"""How `ContextMemory` values a retrieved candidate: hybrid relevance x recency x salience.

Relevance of a message of the session, for one query, in four steps:

1. *match*: dense and lexical evidence, each scaled to [0, 1] over the query's candidates::

       dense   = (sim - lowest sim) / (highest sim - lowest sim)    (0 when not a dense match)
       lexical = bm25 / highest bm25                                 (BM25 over author + text)
       match   = (1 - lexical_weight) * dense + lexical_weight * lexical

   Earlier user turns used as extra queries count ``query_turn_weight`` (a `MemoryConfig`
   setting) of the query; a message keeps its best match.
2. *context*: a turn rarely stands alone (the answer follows the question; an event is told
   over a few turns)::

       context = match + neighbour_weight * max(match of a turn d <= neighbours away / d)
                       + episode_weight * mean(3 best matches of its episode)

   An *episode* is a run of messages with no pause longer than ``MemoryConfig.episode_gap``;
   neighbours count only within one.
3. *author*: when the query names some, but not all, of the session's authors (the message's
   ``name``, or a ``Name: `` prefix of its text: `ctxbudget.memory.speakers`), the others'
   messages count ``1 - author_weight``. Who said a turn is matched by words (its author is
   one of its BM25 terms) and by this weight, never by meaning: the dense side sees what was
   said, without a speaker prefix, so a session scores the same however its speakers were
   stored.
4. scaled so the best candidate has relevance 1.

Then, for every candidate (documents and other sessions get ``match`` with a plain word
overlap as ``lexical``)::

    recency = 0.5 ** (age / half_life)
    score   = relevance ** relevance_weight * recency ** recency_weight * sal ** salience_weight

``relevance_weight`` > 1 sharpens: packing maximizes the sum of scores, and one strong match
should outweigh several weak ones of the same total length.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ctxbudget.core.numbers import real
from ctxbudget.errors import ConfigurationError
from ctxbudget.memory.speakers import spoken
from ctxbudget.store.records import Record

__all__ = [
    "LexicalIndex",
    "Scoring",
    "content_words",
    "hit_relevance",
    "lexical_terms",
    "record_score",
]

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]

_WORD = re.compile(r"\w+", re.UNICODE)
_STOP = frozenset(
    "a an and are as at be but by can could did do does for from had has have he her hers him "
    "his how i if in into is it its me my of on or our she so than that the their them then "
    "there they this to us was we were what when where which who why will with would you "
    "your".split()
)
_SUFFIXES = ("ingly", "edly", "ings", "ing", "ies", "ied", "ed", "es", "s", "ly")


def content_words(text: str) -> set[str]:
    """Lower-cased words of ``text`` without stop words.

    >>> sorted(content_words("Where should we eat tonight?"))
    ['eat', 'should', 'tonight']
    """
    return {w for w in (m.casefold() for m in _WORD.findall(text)) if w not in _STOP}


def _stem(word: str) -> str:
    """A light suffix stripper: painted, painting, paintings -> paint; stories -> story."""
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            base = word[: -len(suffix)]
            if suffix in ("ies", "ied"):
                return base + "y"
            if len(base) >= 3 and base[-1] == base[-2] and base[-1] not in "lsz":
                return base[:-1]  # running -> run, but not calls -> cal
            return base
    return word


def lexical_terms(text: str) -> list[str]:
    """The terms the lexical index matches: lower-cased, stop words dropped, suffixes stripped.

    >>> lexical_terms("She painted two sunsets")
    ['paint', 'two', 'sunset']
    """
    return [_stem(w) for w in (m.casefold() for m in _WORD.findall(text)) if w not in _STOP]


class _Column:
    """A growable numpy array (amortized O(1) append)."""

    __slots__ = ("data", "size")

    def __init__(self, dtype: type) -> None:
        self.data: npt.NDArray[Any] = np.zeros(8, dtype=dtype)
        self.size = 0

    def append(self, value: float) -> None:
        if self.size == len(self.data):
            self.data = np.resize(self.data, 2 * len(self.data))
        self.data[self.size] = value
        self.size += 1

    def view(self) -> npt.NDArray[Any]:
        return self.data[: self.size]


class LexicalIndex:
    """Okapi BM25 over a growing list of texts (documents are only ever appended).

    Postings are numpy arrays, so scoring a query costs a few array operations per term.

    >>> index = LexicalIndex()
    >>> index.add("I adopted a beagle last spring")
    0
    >>> index.add("The train was late again")
    1
    >>> sorted(index.scores(lexical_terms("When did you adopt the dog?")))
    [0]
    """

    def __init__(self, *, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1 = k1
        self.b = b
        # term -> positions of the texts holding it, and how often each holds it
        self._postings: dict[str, tuple[_Column, _Column]] = {}
        self._lengths = _Column(np.float64)
        self._total = 0

    def __len__(self) -> int:
        return self._lengths.size

    def add(self, text: str) -> int:
        """Index one more text; returns its position."""
        position = self._lengths.size
        terms = lexical_terms(text)
        counts: dict[str, int] = {}
        for term in terms:
            counts[term] = counts.get(term, 0) + 1
        for term, count in counts.items():
            postings = self._postings.get(term)
            if postings is None:
                postings = self._postings[term] = (_Column(np.int64), _Column(np.float64))
            postings[0].append(position)
            postings[1].append(count)
        self._lengths.append(len(terms))
        self._total += len(terms)
        return position

    def array(self, terms: Iterable[str]) -> Floats:
        """BM25 of every indexed text, by position (0 where none of ``terms`` occurs)."""
        n = self._lengths.size
        out: Floats = np.zeros(n)
        if not n:
            return out
        average = max(self._total / n, 1.0)
        norms: Floats | None = None
        for term in set(terms):
            postings = self._postings.get(term)
            if postings is None:
                continue
            if norms is None:
                norms = self.k1 * (1.0 - self.b + self.b * self._lengths.view() / average)
            positions, tf = postings[0].view(), postings[1].view()
            df = len(positions)
            idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            out[positions] += idf * tf * (self.k1 + 1.0) / (tf + norms[positions])
        return out

    def scores(self, terms: Iterable[str]) -> dict[int, float]:
        """BM25 of every indexed text that holds at least one of ``terms`` (by position)."""
        found = self.array(terms)
        return {int(p): float(found[p]) for p in np.flatnonzero(found)}


_WEIGHTS = (
    "relevance_weight",
    "recency_weight",
    "salience_weight",
    "lexical_weight",
    "half_life_days",
    "neighbour_weight",
    "episode_weight",
    "author_weight",
)


@dataclass(frozen=True, slots=True)
class Scoring:
    """Weights of the candidate score (see the module docstring for the formulas).

    >>> s = Scoring()
    >>> s.score(similarity=1.0, lexical=1.0, age_seconds=0.0, salience=1.0)
    1.0
    """

    relevance_weight: float = 3.0
    recency_weight: float = 0.2
    salience_weight: float = 1.0
    lexical_weight: float = 0.5
    half_life_days: float = 365.0
    neighbour_weight: float = 0.5
    episode_weight: float = 0.3
    author_weight: float = 0.2

    def __post_init__(self) -> None:
        # Every weight passes the number boundary first: numpy and Decimal numbers are taken,
        # NaN and the infinities refused here rather than as some item's score later.
        for name in _WEIGHTS:
            value = real(getattr(self, name), f"Scoring.{name}")
            object.__setattr__(self, name, value)
        for name in ("lexical_weight", "author_weight"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                msg = f"Scoring.{name} must be in [0, 1], got {getattr(self, name)}"
                raise ConfigurationError(msg)
        if self.half_life_days <= 0:
            msg = f"Scoring.half_life_days must be positive, got {self.half_life_days}"
            raise ConfigurationError(msg)
        for name in (
            "relevance_weight",
            "recency_weight",
            "salience_weight",
            "neighbour_weight",
            "episode_weight",
        ):
            if getattr(self, name) < 0:
                msg = f"Scoring.{name} cannot be negative, got {getattr(self, name)}"
                raise ConfigurationError(msg)

    def score(
        self, *, similarity: float, lexical: float, age_seconds: float, salience: float
    ) -> float:
        """The score of one candidate from its raw cosine similarity and word overlap."""
        dense = min(1.0, max(0.0, (similarity + 1.0) / 2.0))
        return self.combine(
            relevance=self.match(dense, lexical), age_seconds=age_seconds, salience=salience
        )

    def match(self, dense: float, lexical: float) -> float:
        """Dense and lexical evidence (each in [0, 1]) mixed by ``lexical_weight``."""
        return (1.0 - self.lexical_weight) * dense + self.lexical_weight * lexical

    def combine(self, *, relevance: float, age_seconds: float, salience: float) -> float:
        """The score of a candidate whose relevance (in [0, 1]) is known."""
        recency = 0.5 ** (max(0.0, age_seconds) / (self.half_life_days * 86_400.0))
        return float(
            min(1.0, max(0.0, relevance)) ** self.relevance_weight
            * recency**self.recency_weight
            * max(0.0, salience) ** self.salience_weight
        )

    def in_context(self, match: Floats, episodes: Sequence[int], *, neighbours: int) -> Floats:
        """Step 2 of the module docstring over a session's messages in order.

        Args:
            match: each message's match with the query (0 for no match).
            episodes: each message's episode number (non-decreasing).
            neighbours: how many turns on each side lend their match.
        """
        n = len(match)
        if not n:
            return match
        episode = np.asarray(episodes)
        lent = np.zeros(n)
        for distance in range(1, min(neighbours, n - 1) + 1):
            same = episode[distance:] == episode[:-distance]
            before = np.where(same, match[:-distance], 0.0) / distance
            after = np.where(same, match[distance:], 0.0) / distance
            lent[distance:] = np.maximum(lent[distance:], before)
            lent[:-distance] = np.maximum(lent[:-distance], after)
        out = match + self.neighbour_weight * lent
        if self.episode_weight:
            boundaries = np.flatnonzero(np.diff(episode)) + 1
            for part in np.split(np.arange(n), boundaries):
                best = np.sort(match[part])[-3:]
                out[part] += self.episode_weight * float(best.mean())
        return out

    def author_prior(self, authors: Sequence[str | None], named: set[str]) -> Floats:
        """Step 3: ``1 - author_weight`` for messages by an author the query does not name.

        Messages by a named author, or by no known author, keep 1; so does everything when the
        query names no author, or all of them.
        """
        known = {a for a in authors if a}
        if not named or named >= known:
            return np.ones(len(authors))
        others = 1.0 - self.author_weight
        return np.array([others if a and a not in named else 1.0 for a in authors])

    @staticmethod
    def lexical(query_words: Iterable[str], text: str) -> float:
        """Share of the query's content words that ``text`` contains."""
        wanted = set(query_words)
        if not wanted:
            return 0.0
        return len(wanted & content_words(text)) / len(wanted)


def hit_relevance(
    scoring: Scoring,
    record: Record,
    similarity: float,
    weight: float,
    words: set[str],
    span: tuple[float, float],
) -> float:
    """Relevance of a hit from outside the session index.

    Its similarity within `span` (the range of the hits it came with) and its share of the
    query's content words, times the query's `weight`.
    """
    low, high = span
    dense = (similarity - low) / (high - low) if high > low else 1.0
    said = spoken(record)  # a speaker prefix is not what the turn says (see session_index)
    lexical = len(words & set(lexical_terms(said))) / len(words) if words else 0.0
    return weight * scoring.match(min(1.0, max(0.0, dense)), lexical)


def record_score(
    scoring: Scoring,
    record: Record,
    relevance: float,
    newest: float | None,
    session_id: str | None,
) -> float:
    """Relevance x recency (age counted to `newest`) x salience (x 0.8 from another session)."""
    age = 0.0
    if newest is not None and record.timestamp is not None:
        age = newest - record.timestamp
    raw = record.metadata.get("salience", 1.0)
    salience = float(raw) if isinstance(raw, int | float) else 1.0
    if record.session_id not in (None, session_id):
        salience *= 0.8
    return scoring.combine(relevance=relevance, age_seconds=age, salience=salience)
