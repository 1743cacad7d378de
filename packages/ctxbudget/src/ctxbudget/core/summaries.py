"""Shrinking content: summaries that replace what they cover, on-the-fly summaries, truncation."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

__all__ = [
    "ExtractiveSummarizer",
    "Summarizer",
    "split_sentences",
    "truncate_to_tokens",
]

_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+|\n+")
_WORD = re.compile(r"\w+", re.UNICODE)
_STOP = frozenset(
    "a an and are as at be but by for from has have he her his i in is it its me my of on or "
    "our she so that the their them they this to was we were what when which who will with "
    "you your".split()
)


@runtime_checkable
class Summarizer(Protocol):
    """Makes one summary of several texts within a token limit.

    Any object with this method works: the extractive one here, or one backed by an LLM (the
    LangChain and LlamaIndex packages ship those).
    """

    def summarize(self, texts: Sequence[str], max_tokens: int) -> str:
        """Summarize ``texts`` (in order) in at most ``max_tokens`` tokens."""
        ...


def split_sentences(text: str) -> list[str]:
    """Split text at sentence ends and line breaks, dropping empty pieces.

    >>> split_sentences("One. Two!  Three?")
    ['One.', 'Two!', 'Three?']
    """
    return [piece.strip() for piece in _SENTENCE_END.split(text) if piece.strip()]


def truncate_to_tokens(
    text: str, max_tokens: int, count: Callable[[str], int], *, marker: str = " …"
) -> str | None:
    """The longest run of whole sentences from the start of ``text`` that fits ``max_tokens``.

    Falls back to whole words when not even the first sentence fits; returns None when nothing
    useful fits. A marker shows the text was cut (counted within the limit).
    """
    if count(text) <= max_tokens:
        return text
    best = _longest_fitting(split_sentences(text), max_tokens, count, marker)
    if best is not None:
        return best
    return _longest_fitting(text.split(), max_tokens, count, marker)


def _longest_fitting(
    parts: Sequence[str], max_tokens: int, count: Callable[[str], int], marker: str
) -> str | None:
    """The longest ``" ".join(parts[:n]) + marker`` (n < len(parts)) that fits ``max_tokens``."""
    # Counts grow with the prefix, so a binary search finds the longest that fits. Each part
    # costs at least one token, so no more than max_tokens parts can fit: prefixes are built
    # one at a time and never longer than that (a huge text costs no more than a short one).
    low, high, best = 1, min(len(parts) - 1, max_tokens), None
    while low <= high:
        middle = (low + high) // 2
        candidate = " ".join(parts[:middle]) + marker
        if count(candidate) <= max_tokens:
            best = candidate
            low = middle + 1
        else:
            high = middle - 1
    return best


class ExtractiveSummarizer:
    """A summarizer that needs no model: it keeps the most informative sentences.

    Sentences are scored by the frequency of their content words across all the texts (a
    classic frequency summary), the best are kept within the token limit, and they are shown in
    their original order.

    Args:
        count: the token counter used to respect ``max_tokens`` (``TokenCounter.count``).

    >>> from ctxbudget import TokenCounter
    >>> s = ExtractiveSummarizer(TokenCounter.for_model("gpt-4o").count)
    >>> s.summarize(["I moved to Lisbon in May.", "Lisbon is sunny. I like it."], 12)
    'I moved to Lisbon in May. Lisbon is sunny.'
    """

    def __init__(self, count: Callable[[str], int]) -> None:
        self._count = count

    def summarize(self, texts: Sequence[str], max_tokens: int) -> str:
        """Summarize ``texts`` in at most ``max_tokens`` tokens (empty when nothing fits)."""
        sentences = [s for text in texts for s in split_sentences(text)]
        if not sentences or max_tokens <= 0:
            return ""
        words = [[w.casefold() for w in _WORD.findall(s)] for s in sentences]
        frequency = Counter(w for ws in words for w in ws if w not in _STOP)
        top = max(frequency.values(), default=1)

        def score(i: int) -> float:
            content = [w for w in words[i] if w not in _STOP]
            if not content:
                return 0.0
            return sum(frequency[w] / top for w in content) / math.sqrt(len(content))

        ranked = sorted(range(len(sentences)), key=lambda i: (-score(i), i))
        chosen: list[int] = []
        for i in ranked:
            candidate = " ".join(sentences[j] for j in sorted([*chosen, i]))
            if self._count(candidate) <= max_tokens:
                chosen.append(i)
        if not chosen:
            first = truncate_to_tokens(sentences[ranked[0]], max_tokens, self._count)
            return first or ""
        return " ".join(sentences[j] for j in sorted(chosen))
