"""`CtxBudgetEmbedding`: ctxbudget's local embedder as a LlamaIndex embedding model."""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import PrivateAttr

from ctxbudget.core.numbers import count
from ctxbudget.core.unicode import lone_surrogate
from ctxbudget.embed.base import Embedder, as_embedder, default_embedder
from ctxbudget.errors import InvalidItemError

__all__ = ["CtxBudgetEmbedding"]


class CtxBudgetEmbedding(BaseEmbedding):
    """A LlamaIndex embedding over a ctxbudget `Embedder` (default: the ONNX MiniLM).

    It is also a ctxbudget `Embedder` (``name``, ``embed_documents``, ``embed_query``), so one
    instance, and one loaded model, can serve a ``VectorStoreIndex`` and a ``ContextMemory``.
    The vectors of the last ``cache_size`` texts are kept: a memory embeds each message when it
    is stored and again when it serves as a query (the current message, the last user turns),
    and the second time costs nothing.

    Args:
        embedder: a ctxbudget `Embedder`, or anything `ctxbudget.embed.as_embedder` accepts
            (default: the shared `default_embedder()`, loaded on first use, offline).
        cache_size: how many recent texts keep their vectors (0: no cache).
        **kwargs: `BaseEmbedding` options (``embed_batch_size``, ``callback_manager``...).

    >>> from llama_index.core import Settings
    >>> Settings.embed_model = CtxBudgetEmbedding()  # doctest: +SKIP
    """

    _embedder: Embedder = PrivateAttr()
    _cache: OrderedDict[str, list[float]] = PrivateAttr(default_factory=OrderedDict)
    _cache_size: int = PrivateAttr(default=512)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def __init__(self, embedder: object = None, *, cache_size: int = 512, **kwargs: Any) -> None:
        # The core's count boundary: numpy ints taken; True, "3" or 3.0 refused.
        cache_size = count(cache_size, "CtxBudgetEmbedding(cache_size=)", least=0)
        chosen = default_embedder() if embedder is None else as_embedder(embedder)
        kwargs.setdefault("model_name", chosen.name)
        super().__init__(**kwargs)
        self._embedder = chosen
        self._cache_size = cache_size

    @classmethod
    def class_name(cls) -> str:
        """The class name LlamaIndex serializes."""
        return "CtxBudgetEmbedding"

    @property
    def embedder(self) -> Embedder:
        """The ctxbudget embedder doing the work."""
        return self._embedder

    @property
    def name(self) -> str:
        """The model identifier (the ctxbudget `Embedder` protocol)."""
        return self._embedder.name

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text (the ctxbudget `Embedder` protocol); cached texts are not re-run.

        Raises:
            InvalidItemError: a text that is not valid Unicode (a lone surrogate), by its index.
        """
        batch = list(texts)
        for index, text in enumerate(batch):
            problem = lone_surrogate(text) if isinstance(text, str) else None
            if problem is not None:  # the tokenizer's own error would not say which, nor why
                msg = f"CtxBudgetEmbedding: text {index} {problem}"
                raise InvalidItemError(msg)
        if not self._cache_size:
            return self._embedder.embed_documents(batch)
        with self._lock:
            known = {t: self._cache[t] for t in batch if t in self._cache}
        todo = list(dict.fromkeys(t for t in batch if t not in known))
        if todo:
            known.update(zip(todo, self._embedder.embed_documents(todo), strict=True))
        with self._lock:
            for text in batch:
                self._cache[text] = known[text]
                self._cache.move_to_end(text)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return [list(known[t]) for t in batch]

    def embed_query(self, text: str) -> list[float]:
        """The vector of a search query (the ctxbudget `Embedder` protocol)."""
        return self.embed_documents([text])[0]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self.embed_query(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return await asyncio.to_thread(self.embed_query, query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self.embed_documents(texts)

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return await asyncio.to_thread(self._get_text_embedding, text)

    async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return await asyncio.to_thread(self.embed_documents, texts)
