"""How `ContextMemory` values a retrieved candidate: relevance x recency decay x salience.

For a candidate with cosine similarity ``sim`` to the best-matching query, lexical overlap
``lex`` (the share of the query's content words found in it), age ``age`` (seconds before the
newest message of the session) and salience ``sal`` (1.0 unless the record says otherwise)::

    relevance = (1 - lexical_weight) * (sim + 1) / 2 + lexical_weight * lex
    recency   = 0.5 ** (age / half_life)
    score     = relevance ** relevance_weight * recency ** recency_weight * sal ** salience_weight

Each factor is in [0, 1] (salience may exceed 1 to promote), so scores compare across sources.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Scoring", "content_words"]

_WORD = re.compile(r"\w+", re.UNICODE)
_STOP = frozenset(
    "a an and are as at be but by can could did do does for from had has have he her hers him "
    "his how i if in into is it its me my of on or our she so than that the their them then "
    "there they this to us was we were what when where which who why will with would you "
    "your".split()
)


def content_words(text: str) -> set[str]:
    """Lower-cased words of ``text`` without stop words.

    >>> sorted(content_words("Where should we eat tonight?"))
    ['eat', 'should', 'tonight']
    """
    return {w for w in (m.casefold() for m in _WORD.findall(text)) if w not in _STOP}


@dataclass(frozen=True, slots=True)
class Scoring:
    """Weights of the candidate score (see the module docstring for the formula).

    >>> s = Scoring()
    >>> s.score(similarity=1.0, lexical=1.0, age_seconds=0.0, salience=1.0)
    1.0
    """

    relevance_weight: float = 1.0
    recency_weight: float = 0.2
    salience_weight: float = 1.0
    lexical_weight: float = 0.3
    half_life_days: float = 30.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.lexical_weight <= 1.0:
            msg = f"Scoring.lexical_weight must be in [0, 1], got {self.lexical_weight}"
            raise ValueError(msg)
        if self.half_life_days <= 0:
            msg = f"Scoring.half_life_days must be positive, got {self.half_life_days}"
            raise ValueError(msg)
        for name in ("relevance_weight", "recency_weight", "salience_weight"):
            if getattr(self, name) < 0:
                msg = f"Scoring.{name} cannot be negative, got {getattr(self, name)}"
                raise ValueError(msg)

    def score(
        self, *, similarity: float, lexical: float, age_seconds: float, salience: float
    ) -> float:
        """The score of one candidate."""
        dense = min(1.0, max(0.0, (similarity + 1.0) / 2.0))
        relevance = (1.0 - self.lexical_weight) * dense + self.lexical_weight * lexical
        recency = 0.5 ** (max(0.0, age_seconds) / (self.half_life_days * 86_400.0))
        return float(
            relevance**self.relevance_weight
            * recency**self.recency_weight
            * max(0.0, salience) ** self.salience_weight
        )

    @staticmethod
    def lexical(query_words: Iterable[str], text: str) -> float:
        """Share of the query's content words that ``text`` contains."""
        wanted = set(query_words)
        if not wanted:
            return 0.0
        return len(wanted & content_words(text)) / len(wanted)
