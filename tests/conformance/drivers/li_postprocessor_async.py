"""The LlamaIndex door `CtxBudgetNodePostprocessor`, async: `li_postprocessor`'s calls awaited.

``apostprocess_nodes`` on a loop of its own (``asyncio.run``), as an async query engine awaits
it; the report is the postprocessor's ``last_context`` read in the task that awaited it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from llama_index.core.schema import MetadataMode, NodeWithScore, TextNode

from llama_index.ctxbudget import CtxBudgetNodePostprocessor

from .base import Place, Received, Refusal
from .common import MODEL, attempt, reported, routed
from .li_postprocessor import PostprocessorDriver

__all__ = ["AsyncPostprocessorDriver", "make"]


class AsyncPostprocessorDriver(PostprocessorDriver):
    """`CtxBudgetNodePostprocessor` over each session's turns, awaited."""

    name = "li_postprocessor_async"

    def send(self, session: str, user: str, query: str, budget: int) -> Received:
        """One ``apostprocess_nodes`` of the user's nodes within ``budget``."""
        post = CtxBudgetNodePostprocessor(budget=budget, model=MODEL)
        nodes = self._nodes(session, user)

        async def run() -> tuple[list[NodeWithScore], Any]:
            found = await post.apostprocess_nodes(nodes, query_str=query)
            return found, post.last_context  # kept per task: read in the one awaiting

        out, context = asyncio.run(run())
        texts = [n.node.get_content(metadata_mode=MetadataMode.LLM) for n in out]
        got = [(n.node_id, text) for n, text in zip(out, texts, strict=True)]
        return reported(context, budget, got, texts)

    def bad(self, argument: str, value: object) -> Refusal | None:
        """One awaited call with ``argument=value``."""
        query, options = routed(argument, value, {"budget": 300})
        node = NodeWithScore(node=TextNode(id_="n1", text="I live in Lisbon."), score=1.0)

        async def run() -> object:
            post = CtxBudgetNodePostprocessor(**options)
            return await post.apostprocess_nodes([node], query_str=query)  # type: ignore[arg-type]

        return attempt(lambda: asyncio.run(run()))


def make(place: Place) -> AsyncPostprocessorDriver:
    """The driver."""
    return AsyncPostprocessorDriver(place)
