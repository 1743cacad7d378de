"""The door `ContextMemory` with a reranker the user brought (`MemoryConfig(reranker=...)`).

`memory_sync`'s calls on a memory whose candidates a reranker reorders (`ctxbudget.memory.
reading.rerank`): `digest_scores`, a plain callable that scores each text by a digest of it
(numpy ``float32``, as a model returns them), so its order has nothing to do with the
pipeline's and the blend moves candidates across the whole pool. Every promise holds whatever
the reranker says: what fits, what is chosen, what is explained, what was removed or edited.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from ctxbudget import MemoryConfig

from .base import Place
from .common import Registry
from .memory_sync import MemorySync

__all__ = ["MemoryRerank", "digest_scores", "make"]


def digest_scores(query: str, texts: Sequence[str]) -> np.ndarray:
    """A score in [0, 1) per text, from a digest of the query and the text (float32)."""
    out = [
        int.from_bytes(hashlib.blake2b(f"{query}\0{t}".encode(), digest_size=4).digest(), "big")
        / 2**32
        for t in texts
    ]
    return np.asarray(out, dtype=np.float32)


class MemoryRerank(MemorySync):
    """`ContextMemory`'s sync methods, with `digest_scores` as its reranker."""

    name = "memory_rerank"

    def __init__(self, place: Place) -> None:  # noqa: D107 - MemorySync's, with the reranker
        config = MemoryConfig(reranker=digest_scores, reranker_timeout=30.0)
        self.memory = place.open_memory(write_behind=True, config=config)
        self.registry = Registry()
        self._closed = False


def make(place: Place) -> MemoryRerank:
    """The driver of `ContextMemory` (sync) with a reranker on ``place``."""
    return MemoryRerank(place)
