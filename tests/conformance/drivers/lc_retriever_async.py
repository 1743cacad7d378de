"""The LangChain door `CtxBudgetRetriever`, async: `lc_retriever`'s calls with ``ainvoke``.

Each retrieval is awaited on a loop of its own (``asyncio.run``), as an async chain awaits the
retriever; the report is read from inside, as `lc_retriever` reads it.
"""

from __future__ import annotations

import asyncio

from langchain_ctxbudget import retrievers

from ._packed import packings
from .base import Place, Received, Refusal
from .common import SPANS, attempt, raised, reported
from .lc_retriever import RetrieverDriver, bad_parts

__all__ = ["AsyncRetrieverDriver", "make"]


class AsyncRetrieverDriver(RetrieverDriver):
    """`CtxBudgetRetriever` (``search="all"``) over one memory, awaited (``ainvoke``)."""

    name = "lc_retriever_async"

    def send(self, session: str, user: str, query: str, budget: int) -> Received:
        """One retrieval for ``query`` within ``budget``, awaited."""
        SPANS.clear()
        with packings(retrievers) as made:
            docs = asyncio.run(self._retriever(user).ainvoke(query, budget=budget))
        context = made[-1] if made else None
        got = [(str(d.metadata["id"]), d.page_content) for d in docs]
        texts = [d.page_content for d in docs]
        return reported(context, budget, got, texts, extra={"doc_ids": [str(d.id) for d in docs]})

    def bad(self, argument: str, value: object) -> Refusal | None:
        """One retrieval with ``argument=value``, awaited."""
        query, call, options = bad_parts(argument, value)

        async def run() -> object:
            return await self._retriever("bad-user", **options).ainvoke(query, **call)  # type: ignore[arg-type]

        return attempt(lambda: asyncio.run(run()))

    def after_close(self) -> BaseException | None:
        """One retrieval after `close`, awaited."""
        return raised(lambda: asyncio.run(self._retriever("closed-user").ainvoke("Still there?")))


def make(place: Place) -> AsyncRetrieverDriver:
    """The driver."""
    return AsyncRetrieverDriver(place)
