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
    sentences = split_sentences(text)
    candidates = [" ".join(sentences[:n]) + marker for n in range(1, len(sentences))]
    best = _longest_fitting(candidates, max_tokens, count)
    if best is not None:
        return best
    words = text.split()
    candidates = [" ".join(words[:n]) + marker for n in range(1, len(words))]
    return _longest_fitting(candidates, max_tokens, count)


def _longest_fitting(
    candidates: Sequence[str], max_tokens: int, count: Callable[[str], int]
) -> str | None:
    # Counts grow with the prefix, so a binary search finds the longest that fits.
    low, high, best = 0, len(candidates) - 1, None
    while low <= high:
        middle = (low + high) // 2
        if count(candidates[middle]) <= max_tokens:
            best = candidates[middle]
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
