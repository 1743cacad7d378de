"""`CtxBudgetRetriever`: a LlamaIndex retriever over a `ContextMemory` that fits a token budget."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from ctxbudget import AssembledContext, ContextAssembler, ContextItem, Shrink, Tier
from ctxbudget.core.documents import pack_documents
from ctxbudget.errors import ConfigurationError, InvalidBudgetError
from ctxbudget.memory.candidates import ScoredHit
from ctxbudget.memory.context import ContextMemory
from ctxbudget.store.chroma_store import Record

__all__ = ["CtxBudgetRetriever"]


def _metadata(record: Record) -> dict[str, Any]:
    metadata: dict[str, Any] = {k: v for k, v in record.metadata.items() if not k.startswith("_")}
    fields = {
        "kind": record.kind,
        "source": record.source,
        "session_id": record.session_id,
        "role": record.role,
        "timestamp": record.timestamp,
    }
    metadata.update({k: v for k, v in fields.items() if v is not None})
    return metadata


class CtxBudgetRetriever(BaseRetriever):
    """Retrieval from a `ContextMemory` (documents, a session's or user's messages) in a budget.

    Searches the memory's Chroma store with its embedder, then packs the hits with the core
    assembler: most similar first, duplicates dropped, the next hit cut at a sentence boundary
    to use the room left. The node texts are exactly what was packed (metadata is kept on the
    nodes but hidden from the LLM), so the retrieved texts fit ``token_budget`` tokens of
    ``model``'s tokenizer, each counted as a line of its own. Nodes come back most similar
    first, with the cosine similarity as score.

    Args:
        memory: the `ContextMemory` to search (its namespace, store and embedder).
        token_budget: the most tokens the returned nodes may take.
        documents: search documents (True), none (False) or only these collections (the
            ``namespace=`` given to `ContextMemory.add_documents`).
        session_id: also search this session's messages and summaries.
        user_id: also search this user's messages and summaries (every session).
        k: hits per search, before packing.
        model: the model whose tokenizer counts (default: the memory's model).
        callback_manager: LlamaIndex callbacks.
        verbose: LlamaIndex's verbose flag.

    >>> retriever = CtxBudgetRetriever(memory=mem, token_budget=800)  # doctest: +SKIP
    >>> nodes = retriever.retrieve("Where does Ada live?")  # doctest: +SKIP
    """

    def __init__(
        self,
        memory: ContextMemory,
        *,
        token_budget: int,
        documents: bool | str | Sequence[str] = True,
        session_id: str | None = None,
        user_id: str | None = None,
        k: int = 24,
        model: str | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        if isinstance(token_budget, bool) or not isinstance(token_budget, int) or token_budget <= 0:
            msg = f"token_budget must be a positive int number of tokens, got {token_budget!r}"
            raise InvalidBudgetError(msg)
        if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
            msg = f"k must be a positive int, got {k!r}"
            raise ConfigurationError(msg)
        if documents is False and session_id is None and user_id is None:
            msg = (
                "nothing to search: pass documents=True (or collection names), "
                "a session_id or a user_id"
            )
            raise ConfigurationError(msg)
        super().__init__(callback_manager=callback_manager, verbose=verbose)
        self.memory = memory
        self.token_budget = token_budget
        self.documents = documents
        self.session_id = session_id
        self.user_id = user_id
        self.k = k
        self._assembler = ContextAssembler(memory.counter_for(model), min_exchanges=0)
        self._last: AssembledContext | None = None

    @property
    def last_context(self) -> AssembledContext | None:
        """The assembly of the last retrieval: what was kept, cut and why (``.explain()``)."""
        return self._last

    def _hits(self, query: str) -> list[ScoredHit]:
        """Documents, the session's and the user's memories, scored as ContextMemory scores."""
        memory = self.memory
        vector = memory.store.embedder.embed_query(query)  # one embedding for every search
        found: list[ScoredHit] = []
        if self.documents is not False:
            found += memory.search(
                query, vector=vector, k=self.k, kinds=["document"], collections=self.documents
            )
        for scope in ({"session_id": self.session_id}, {"user_id": self.user_id}):
            if next(iter(scope.values())) is not None:
                found += memory.search(
                    query, vector=vector, k=self.k, kinds=["message", "summary"], **scope
                )
        return found

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        found = self._hits(query_bundle.query_str)
        records = {s.hit.record.id: s.hit.record for s in found}
        items = [
            ContextItem(
                s.hit.record.id,
                s.hit.record.text,
                tier=Tier.RETRIEVED,
                score=s.score,
                shrink=Shrink.TRUNCATE,
                source=s.hit.record.kind,
            )
            for s in found
        ]
        context = pack_documents(items, self._assembler, self.token_budget)
        self._last = context
        if context is None:
            return []
        kept = sorted(context.included, key=lambda item: (-item.score, item.id))
        nodes: list[NodeWithScore] = []
        for item in kept:
            metadata = _metadata(records[item.id])
            node = TextNode(
                id_=item.id,
                text=item.text,
                metadata=metadata,
                excluded_llm_metadata_keys=list(metadata),
                excluded_embed_metadata_keys=list(metadata),
            )
            nodes.append(NodeWithScore(node=node, score=item.score))
        return nodes

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return await asyncio.to_thread(self._retrieve, query_bundle)
