"""The shared count cache, and the `TokenCounter` methods that read and fill it.

Counts are cached per tokenizer, keyed by the text itself, and shared by every counter of that
tokenizer (its cache key: ``tiktoken:<encoding>``, ``hf:<sha256 of the tokenizer.json>`` or
``approx:v1``), so re-assembling a prompt only tokenizes what is new. Readers do a plain dict
lookup; writers take one lock. A cache holds at most ``_MAX_ENTRIES`` texts of ``_MAX_CHARS``
characters in all, and drops its oldest half when it would hold more.

`CachedCounting` is the part of `TokenCounter` that uses it: ``count``, ``count_many``,
``remember``, ``cache_info`` and ``clear_cache``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice

from ctxbudget.errors import InvalidItemError
from ctxbudget.tokens.backends import Backend, check_text

__all__ = ["CacheInfo", "CachedCounting", "shared_cache"]

_MAX_ENTRIES = 500_000
_MAX_CHARS = 64_000_000  # the keys are the texts themselves: bound their total size too


class _Stats:
    __slots__ = ("chars", "hits", "misses")

    def __init__(self) -> None:
        self.hits = 0
        self.misses = 0
        self.chars = 0


_CACHE_LOCK = threading.Lock()  # writers only; readers do a plain dict lookup
_CACHES: dict[str, tuple[dict[str, int], _Stats]] = {}


def shared_cache(key: str) -> tuple[dict[str, int], _Stats]:
    """The count cache (text -> tokens) and statistics every counter of tokenizer ``key`` shares."""
    with _CACHE_LOCK:
        return _CACHES.setdefault(key, ({}, _Stats()))


def _store(cache: dict[str, int], stats: _Stats, counted: Mapping[str, int]) -> None:
    with _CACHE_LOCK:
        for text, n in counted.items():
            if text not in cache:
                stats.chars += len(text)
            cache[text] = n
        # Drop the oldest half (dicts keep insertion order) until both bounds hold.
        while len(cache) > 1 and (len(cache) > _MAX_ENTRIES or stats.chars > _MAX_CHARS):
            for old in list(islice(cache, len(cache) // 2)):
                stats.chars -= len(old)
                del cache[old]


@dataclass(frozen=True, slots=True)
class CacheInfo:
    """Statistics of one encoding's shared count cache.

    Attributes:
        hits: counts answered from the cache.
        misses: texts that had to be tokenized.
        size: texts cached now.
    """

    hits: int
    misses: int
    size: int


class CachedCounting:
    """Counting text through the shared cache: the methods `TokenCounter` inherits from here.

    `TokenCounter` sets the attributes (its ``__init__`` takes the cache from `shared_cache`).
    """

    __slots__ = ()

    _backend: Backend
    _cache: dict[str, int]
    _stats: _Stats

    def count(self, text: str) -> int:
        """Tokens in ``text``, exactly for this tokenizer (cached).

        Special-token strings such as ``"<|endoftext|>"`` count as plain text.

        Raises:
            InvalidItemError: ``text`` is not a str, or holds a lone surrogate.

        >>> from ctxbudget.tokens.counter import TokenCounter
        >>> TokenCounter.from_encoding("o200k_base").count("hello world")
        2
        """
        try:
            n = self._cache[text]  # the hot path: one dict lookup
        except (KeyError, TypeError):
            return self._count_new(text)
        self._stats.hits += 1
        return n

    def _count_new(self, text: object) -> int:
        checked = check_text(text)
        n = self._backend.count_many([checked])[0]
        self._stats.misses += 1
        _store(self._cache, self._stats, {checked: n})
        return n

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Token counts of ``texts``, in order; only the distinct texts not cached are tokenized.

        >>> from ctxbudget.tokens.counter import TokenCounter
        >>> TokenCounter.from_encoding("o200k_base").count_many(["hello", "hello world"])
        [1, 2]
        """
        if isinstance(texts, str) or not isinstance(texts, Sequence):
            msg = f"count_many expects a sequence of str, got {type(texts).__name__}"
            raise InvalidItemError(msg)
        cache = self._cache
        counts: list[int] = []
        new: dict[str, int] = {}
        for text in texts:
            try:
                counts.append(cache[text])
            except (KeyError, TypeError):
                new[check_text(text)] = -1
                counts.append(-1)
        self._stats.hits += len(counts) - sum(1 for n in counts if n < 0)
        if not new:
            return counts
        fresh = dict(zip(new, self._backend.count_many(list(new)), strict=True))
        self._stats.misses += len(fresh)
        _store(cache, self._stats, fresh)
        return [fresh[t] if n < 0 else n for t, n in zip(texts, counts, strict=True)]

    def remember(self, known: Iterable[tuple[str, int]]) -> None:
        """Put counts computed earlier (stored with records) into the cache, uncounted.

        Only pass counts made with this counter's encoding (`name`): they are trusted.
        """
        fresh = {text: n for text, n in known if text not in self._cache}
        bad = [n for n in fresh.values() if isinstance(n, bool) or not isinstance(n, int) or n < 0]
        if bad:
            msg = f"remembered token counts must be non-negative ints, got {bad[0]!r}"
            raise InvalidItemError(msg)
        if fresh:
            _store(self._cache, self._stats, fresh)

    def cache_info(self) -> CacheInfo:
        """Hits, misses and size of the count cache this counter shares with its encoding's.

        Hit and miss totals are approximate under concurrent use (they are not locked).
        """
        return CacheInfo(self._stats.hits, self._stats.misses, len(self._cache))

    def clear_cache(self) -> None:
        """Empty the count cache of this counter's encoding (for every counter sharing it)."""
        with _CACHE_LOCK:
            self._cache.clear()
            self._stats.hits = self._stats.misses = self._stats.chars = 0
