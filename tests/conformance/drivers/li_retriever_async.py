"""The LlamaIndex door `CtxBudgetRetriever`, async: `li_retriever`'s calls with ``aretrieve``.

Each retrieval is awaited on a loop of its own (``asyncio.run``), as an async query engine
awaits its retriever; the report is the retriever's ``last_context`` read in the task that
awaited it (it is kept per thread and task), as in `li_retriever`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from llama_index.core.schema import MetadataMode, QueryBundle

from .base import Place, Received, Refusal
from .common import attempt, framework_value, raised, reported, routed
from .li_retriever import RetrieverDriver

__all__ = ["AsyncRetrieverDriver", "make"]


class AsyncRetrieverDriver(RetrieverDriver):
    """LlamaIndex `CtxBudgetRetriever` over one memory, awaited (``aretrieve``)."""

    name = "li_retriever_async"

    def send(self, session: str, user: str, query: str, budget: int) -> Received:
        """One retrieval for ``query`` within ``budget``, awaited."""
        retriever = self._retriever(user, budget=budget)

        async def run() -> tuple[list[Any], Any]:
            found = await retriever.aretrieve(query)
            return found, retriever.last_context  # kept per task: read in the one awaiting

        nodes, context = asyncio.run(run())
        texts = [n.node.get_content(metadata_mode=MetadataMode.LLM) for n in nodes]
        got = [(str(n.node.metadata["id"]), t) for n, t in zip(nodes, texts, strict=True)]
        return reported(context, budget, got, texts, extra={"node_ids": [n.node_id for n in nodes]})

    def bad(self, argument: str, value: object) -> Refusal | None:
        """One retrieval with ``argument=value``, awaited."""
        query, options = routed(argument, value, {})
        bundle = framework_value(lambda: QueryBundle(query), "a query")  # type: ignore[arg-type]
        return attempt(
            lambda: asyncio.run(self._retriever("bad-user", **options).aretrieve(bundle))
        )

    def after_close(self) -> BaseException | None:
        """One retrieval after `close`, awaited."""
        return raised(lambda: asyncio.run(self._retriever("closed-user").aretrieve("Still there?")))


def make(place: Place) -> AsyncRetrieverDriver:
    """The driver."""
    return AsyncRetrieverDriver(place)
