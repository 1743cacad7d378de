"""Words and relevance of stored records: content words, BM25 (`LexicalIndex`), a hit's score.

`lexical_terms` and `LexicalIndex` are the lexical side of a session's relevance (see
`ctxbudget.memory.policy.scoring` for the formulas); `hit_relevance` and `record_score` score a
record found outside the session index (documents, other sessions) and any candidate.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ctxbudget.memory.policy.scoring import Floats, Scoring
from ctxbudget.memory.reading.speakers import spoken
from ctxbudget.store.records import Record

__all__ = [
    "LexicalIndex",
    "content_words",
    "hit_relevance",
    "lexical_terms",
    "record_score",
    "record_scores",
]

Ints = npt.NDArray[np.int64]

_NUMBER = (int, float)
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
    salience = _salience(record, session_id)
    return scoring.combine(relevance=relevance, age_seconds=age, salience=salience)


def record_scores(
    scoring: Scoring,
    records: Sequence[Record],
    relevance: Sequence[float],
    newest: float | None,
    session_id: str | None,
) -> list[float]:
    """`record_score` of each of ``records`` (``relevance`` in their order), at once."""
    ages = [0.0 if newest is None or r.timestamp is None else newest - r.timestamp for r in records]
    saliences = [_salience(r, session_id) for r in records]
    return scoring.combine_many(relevance, ages, saliences)


def _salience(record: Record, session_id: str | None) -> float:
    """The record's stored salience (1 if none), x 0.8 from another session than ``session_id``."""
    raw = record.metadata.get("salience", 1.0)
    salience = float(raw) if isinstance(raw, _NUMBER) else 1.0
    if record.session_id not in (None, session_id):
        salience *= 0.8
    return salience
