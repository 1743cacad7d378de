"""The door `ContextMemory`, async, with an async reranker (awaited on the caller's loop).

`memory_async`'s calls on a memory whose reranker is a coroutine function (as an async client
of a reranking service is): `digest_scores` of `memory_rerank`, after yielding to the loop
once. `ctxbudget.memory.reading.coroutines` awaits it on the loop that awaits ``aassemble``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from ctxbudget import MemoryConfig

from .base import Place
from .common import Registry
from .memory_async import MemoryAsync
from .memory_rerank import digest_scores

__all__ = ["MemoryRerankAsync", "make"]


async def async_scores(query: str, texts: Sequence[str]) -> list[float]:
    """`digest_scores`, awaited: one yield to the loop first, as a client's request does."""
    await asyncio.sleep(0)
    return [float(s) for s in digest_scores(query, texts)]


class MemoryRerankAsync(MemoryAsync):
    """`ContextMemory`'s async methods, with `async_scores` as its reranker."""

    name = "memory_rerank_async"

    def __init__(self, place: Place) -> None:  # noqa: D107 - MemoryAsync's, with the reranker
        config = MemoryConfig(reranker=async_scores, reranker_timeout=30.0)
        self.memory = place.open_memory(write_behind=True, config=config)
        self.registry = Registry()
        self._loop = asyncio.Runner()
        self._closed = False


def make(place: Place) -> MemoryRerankAsync:
    """The driver of `ContextMemory`'s async methods with an async reranker on ``place``."""
    return MemoryRerankAsync(place)
