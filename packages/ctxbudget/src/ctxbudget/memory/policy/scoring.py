"""How `ContextMemory` values a retrieved candidate: hybrid relevance x recency x salience.

Relevance of a message of the session, for one query, in five steps:

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
   ``name``, or a ``Name: `` prefix of its text: `ctxbudget.memory.reading.speakers`), the others'
   messages count ``1 - author_weight``. Who said a turn is matched by words (its author is
   one of its BM25 terms) and by this weight, never by meaning: the dense side sees what was
   said, without a speaker prefix, so a session scores the same however its speakers were
   stored.
4. *time*: when the query names a date (a day, a range of days, a month, a year) and some
   messages speak of it (their own date, or a relative date in them resolved against the
   message's own date, not the day it was stored: ``last week`` said on 21 August), the others
   count ``1 - time_weight`` (`ctxbudget.memory.reading.timeref`). A query that names no date,
   or a date no message speaks of, changes nothing; so do messages without timestamps.
5. scaled so the best candidate has relevance 1.

Then, for every candidate (documents and other sessions get ``match`` with a plain word
overlap as ``lexical``)::

    recency = 0.5 ** (age / half_life)
    score   = relevance ** relevance_weight * recency ** recency_weight * sal ** salience_weight

``relevance_weight`` > 1 sharpens: packing maximizes the sum of scores, and one strong match
should outweigh several weak ones of the same total length.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ctxbudget.core.numbers import real
from ctxbudget.errors import ConfigurationError

__all__ = ["Floats", "Scoring"]

Floats = npt.NDArray[np.float64]

_WEIGHTS = (
    "relevance_weight",
    "recency_weight",
    "salience_weight",
    "lexical_weight",
    "half_life_days",
    "neighbour_weight",
    "episode_weight",
    "author_weight",
    "time_weight",
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
    time_weight: float = 0.5

    def __post_init__(self) -> None:
        # Every weight passes the number boundary first: numpy and Decimal numbers are taken,
        # NaN and the infinities refused here rather than as some item's score later.
        for name in _WEIGHTS:
            value = real(getattr(self, name), f"Scoring.{name}")
            object.__setattr__(self, name, value)
        for name in ("lexical_weight", "author_weight", "time_weight"):
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

    def combine_many(
        self,
        relevance: Sequence[float],
        age_seconds: Sequence[float],
        salience: Sequence[float],
    ) -> list[float]:
        """`combine` of each candidate at once: the same floats, bit for bit.

        The clipping, the division and the products are numpy's (the same IEEE operations);
        the powers are Python's, one by one, as `combine` takes them (numpy's may differ in
        the last bit). ``tests/memory/test_scoring_many.py`` holds them equal.
        """
        half_life = self.half_life_days * 86_400.0
        with np.errstate(all="ignore"):  # inf and NaN come out as `combine` gives them
            rel = _at_most_one(_at_least_zero(np.asarray(relevance, dtype=np.float64)))
            age = _at_least_zero(np.asarray(age_seconds, dtype=np.float64)) / half_life
            sal = _at_least_zero(np.asarray(salience, dtype=np.float64))
            rw, cw, sw = self.relevance_weight, self.recency_weight, self.salience_weight
            first = np.array([r**rw for r in rel.tolist()], dtype=np.float64)
            second = np.array([(0.5**a) ** cw for a in age.tolist()], dtype=np.float64)
            third = np.array([s**sw for s in sal.tolist()], dtype=np.float64)
            scores: list[float] = (first * second * third).tolist()
        return scores

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


def _at_least_zero(values: Floats) -> Floats:
    """``max(0.0, v)`` of each: NaN and -0.0 become 0.0, as Python's ``max`` gives them."""
    return np.where(values > 0.0, values, 0.0)


def _at_most_one(values: Floats) -> Floats:
    """``min(1.0, v)`` of each."""
    return np.where(values < 1.0, values, 1.0)
