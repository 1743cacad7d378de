"""The LangChain door `CtxBudgetCompressor`, async: `lc_compressor`'s calls awaited.

``acompress_documents`` on a loop of its own (``asyncio.run``), as an async
``ContextualCompressionRetriever`` awaits it; the report is read from inside, as
`lc_compressor` reads it.
"""

from __future__ import annotations

import asyncio

from langchain_core.documents import Document

from langchain_ctxbudget import CtxBudgetCompressor, compressors

from ._packed import packings
from .base import Place, Received, Refusal
from .common import MODEL, attempt, reported, routed
from .lc_compressor import CompressorDriver

__all__ = ["AsyncCompressorDriver", "make"]


class AsyncCompressorDriver(CompressorDriver):
    """`CtxBudgetCompressor` over each session's turns, awaited."""

    name = "lc_compressor_async"

    def send(self, session: str, user: str, query: str, budget: int) -> Received:
        """One ``acompress_documents`` of the session's documents within ``budget``."""
        turns = self._sessions.get(session, [])
        docs = [Document(turn.text, id=turn.id) for turn in reversed(turns)]
        compressor = CtxBudgetCompressor(budget=budget, model=MODEL)
        with packings(compressors) as made:
            out = asyncio.run(compressor.acompress_documents(docs, query))
        context = made[-1] if made else None
        got = [(str(d.id), d.page_content) for d in out]
        return reported(context, budget, got, [d.page_content for d in out])

    def bad(self, argument: str, value: object) -> Refusal | None:
        """One awaited call with ``argument=value``."""
        query, options = routed(argument, value, {"budget": 300})
        docs = [Document("I live in Lisbon.", id="d1")]

        async def run() -> object:
            compressor = CtxBudgetCompressor(**options)
            return await compressor.acompress_documents(docs, query)  # type: ignore[arg-type]

        return attempt(lambda: asyncio.run(run()))


def make(place: Place) -> AsyncCompressorDriver:
    """The driver."""
    return AsyncCompressorDriver(place)
