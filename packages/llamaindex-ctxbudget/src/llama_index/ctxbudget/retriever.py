"""`CtxBudgetRetriever`: a LlamaIndex retriever over a `ContextMemory` that fits a token budget.

Each retrieval dispatches a `ContextAssembledEvent` (LlamaIndex instrumentation) and logs its
``explain()`` at DEBUG on this module's logger (`llama_index.ctxbudget.events`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.instrumentation import get_dispatcher  # type: ignore[attr-defined]
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from ctxbudget import AssembledContext, ContextAssembler, Shrink
from ctxbudget.compat import renamed
from ctxbudget.core.documents import included_positions, pack_documents
from ctxbudget.core.numbers import count
from ctxbudget.errors import ConfigurationError, InvalidBudgetError
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.inputs import check_query
from ctxbudget.memory.policy.presets import StrategyLike, as_strategy
from ctxbudget.memory.reading.search import ScoredHit
from ctxbudget.memory.writing.owners import check_session_owner
from ctxbudget.store.chroma_store import Record
from ctxbudget.store.records import scope_of
from ctxbudget.store.search import MAX_HITS, search_k
from llama_index.ctxbudget.events import LastContext, report_assembly
from llama_index.ctxbudget.opening import context_memory_of

__all__ = ["CtxBudgetRetriever"]

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)


def _metadata(record: Record) -> dict[str, Any]:
    metadata: dict[str, Any] = {k: v for k, v in record.metadata.items() if not k.startswith("_")}
    scope, scope_id = scope_of(record)
    fields = {
        "id": record.id,
        "scope": scope,
        "scope_id": scope_id,
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

    Searches the memory (`ContextMemory.search`: each hit scored as `ContextMemory` scores
    candidates, relevance x recency x salience), then packs the hits with the core assembler:
    best first, duplicates dropped, the next hit cut at a sentence boundary to use the room
    left. The node texts are exactly what was packed (metadata is kept on the nodes but hidden
    from the LLM), so the retrieved texts fit ``budget`` tokens of ``model``'s tokenizer,
    rendered as one block. Nodes come back best first, with their score.

    Record ids are unique per scope only (two collections may both hold a ``guide#0``): each
    node's metadata has the record's own ``id`` and its ``scope`` and ``scope_id``
    (``"collection"`` and the collection's name for a document chunk, ``"session"`` or
    ``"user"`` and its id for a message), and its node id is its id in the packing report,
    unique across scopes (the record's id for ``session_id``'s own messages, else qualified
    with its scope: see `ctxbudget.core.ids`).

    The options have the same names as the LangChain retriever's (docs/adapters.md). Each
    retrieval dispatches a `ContextAssembledEvent` carrying its `AssembledContext`.

    Args:
        memory: the `ContextMemory` to search (its namespace, store and embedder).
        budget: the most tokens the returned nodes may take (``token_budget`` is its old name).
        k: at most this many nodes (default: as many as fit; 0: none): the ``k`` best of the
            hits that fit, packed again on their own; the others are in `last_context` as
            pruned ``over_limit``.
        fetch_k: hits per search, before packing.
        documents: search documents (True) or not (False).
        collections: only these document collections (the ``collection=`` given to
            `ContextMemory.add_documents`; one name or a non-empty list); default: all.
        session_id: also search this session's messages and summaries.
        user_id: also search this user's messages and summaries (every session). With
            ``session_id``, a session another user started is refused (`SessionOwnerError`,
            docs/memory.md), as `CtxBudgetMemory` refuses it.
        model: the model whose tokenizer counts (default: the memory's model).
        strategy: a preset, `ctxbudget.Strategy` or mapping, merged over the memory's: its
            scoring weights rank the hits.
        callback_manager: LlamaIndex callbacks.
        verbose: LlamaIndex's verbose flag.

    >>> retriever = CtxBudgetRetriever(memory=mem, budget=800)  # doctest: +SKIP
    >>> nodes = retriever.retrieve("Where does Ada live?")  # doctest: +SKIP
    """

    def __init__(
        self,
        memory: ContextMemory,
        *,
        budget: int | None = None,
        k: int | None = None,
        fetch_k: int = 24,
        documents: bool | str | Sequence[str] = True,
        collections: Sequence[str] | None = None,
        session_id: str | None = None,
        user_id: str | None = None,
        model: str | None = None,
        strategy: StrategyLike | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
        token_budget: int | None = None,
    ) -> None:
        memory = context_memory_of(memory, "CtxBudgetRetriever(memory=)")
        given = {"budget": budget, "token_budget": token_budget}
        budget = renamed(
            {key: value for key, value in given.items() if value is not None},
            {"token_budget": "budget"},
            "CtxBudgetRetriever",
        ).get("budget")
        # The number boundary (numpy ints too; True, "3" or 2.0 refused), as in LangChain's.
        budget = count(
            budget,
            "CtxBudgetRetriever: budget",
            error=InvalidBudgetError,
            hint="the most tokens the nodes may take, e.g. budget=800",
        )
        # k=0 is no nodes, as in LangChain's retriever (every hit that fits is over_limit).
        k = None if k is None else search_k(k, "CtxBudgetRetriever: k")  # as search's k
        # Each search's k: at most what one search returns (refused here, not on first use).
        fetch_k = count(fetch_k, "CtxBudgetRetriever: fetch_k", most=MAX_HITS)
        if not isinstance(documents, bool):  # collection names given as documents=
            collections = [documents] if isinstance(documents, str) else list(documents)
            documents = bool(collections)
        elif collections is not None:  # one name, as documents= takes it (never its letters)
            collections = [collections] if isinstance(collections, str) else list(collections)
        if documents and collections == []:
            msg = (
                "CtxBudgetRetriever(collections=) must be collection names or None (every "
                "collection), got an empty list; pass documents=False to search no documents"
            )
            raise ConfigurationError(msg)
        if documents is False and session_id is None and user_id is None:
            msg = (
                "nothing to search: pass documents=True (or collections=[...]), "
                "a session_id or a user_id"
            )
            raise ConfigurationError(msg)
        if strategy is not None:
            as_strategy(strategy)  # an unknown preset or invalid strategy fails here
        super().__init__(callback_manager=callback_manager, verbose=verbose)
        self.strategy = strategy
        self.memory = memory
        self.budget = budget
        self.documents = documents
        self.collections = None if collections is None else list(collections)
        self.session_id = session_id
        self.user_id = user_id
        self.k = k
        self.fetch_k = fetch_k
        self._assembler = ContextAssembler(memory.counter_for(model), min_exchanges=0)
        self._last = LastContext()

    @property
    def last_context(self) -> AssembledContext | None:
        """The assembly of this thread's or asyncio task's last retrieval (``.explain()``).

        Kept per thread and task (`contextvars`): concurrent retrievals never see each
        other's. For one call's report wherever it ran, handle its `ContextAssembledEvent`.
        """
        return self._last.get()

    def _hits(self, query: str) -> list[ScoredHit]:
        """Documents, the session's and the user's memories, scored as ContextMemory scores.

        Raises:
            SessionOwnerError: ``session_id`` was started by another user than ``user_id``;
                nothing was searched.
        """
        memory = self.memory
        check_query(query)  # the core's check (as search's), before the query is embedded
        if self.session_id is not None:  # no user_id: nothing to check (as CtxBudgetMemory)
            check_session_owner(
                memory, self.session_id, user_id=self.user_id, door="CtxBudgetRetriever"
            )
        vector = memory.store.embedder.embed_query(query)  # one embedding for every search
        found: list[ScoredHit] = []
        k = self.fetch_k
        chosen = self.strategy
        if self.documents:
            found += memory.search(
                query,
                vector=vector,
                k=k,
                kinds=["document"],
                collections=self.collections,
                strategy=chosen,
            )
        for scope in ({"session_id": self.session_id}, {"user_id": self.user_id}):
            if next(iter(scope.values())) is not None:
                found += memory.search(
                    query,
                    vector=vector,
                    k=k,
                    kinds=["message", "summary"],
                    strategy=chosen,
                    **scope,
                )
        return found

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        nodes, context, offered = self._pack(query_bundle.query_str)
        self._report(context, offered)
        return nodes

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        # Searched and packed in a worker thread; reported here, in the caller's task.
        nodes, context, offered = await self.memory.arun(self._pack, query_bundle.query_str)
        self._report(context, offered)
        return nodes

    def _pack(self, query: str) -> tuple[list[NodeWithScore], AssembledContext | None, int]:
        hits = self._hits(query)
        # One item per record: ids qualified by scope, so two collections' "guide#0" are two.
        made = [s.item(session_id=self.session_id, shrink=Shrink.TRUNCATE) for s in hits]
        # A session's message found again by the user's search is one record: offered once
        # (its best-scored hit), so the report never has it both included and a duplicate.
        best: dict[str, int] = {}
        for index, item in enumerate(made):
            seen = best.get(item.id)
            if seen is None or item.score > made[seen].score:
                best[item.id] = index
        chosen = sorted(best.values())
        found = [hits[i] for i in chosen]
        items = [made[i] for i in chosen]
        context = pack_documents(items, self._assembler, self.budget, k=self.k)
        if context is None:
            return [], None, len(items)
        # Each included item back to the hit it was made from, by position (never by an id
        # lookup that would take another hit with the same id), then best first.
        kept = sorted(
            zip(context.included, included_positions(items, context), strict=True),
            key=lambda pair: (-pair[0].score, pair[0].id),
        )
        nodes: list[NodeWithScore] = []
        for item, index in kept:
            metadata = _metadata(found[index].hit.record)
            node = TextNode(
                id_=item.id,
                text=item.text,
                metadata=metadata,
                excluded_llm_metadata_keys=list(metadata),
                excluded_embed_metadata_keys=list(metadata),
            )
            nodes.append(NodeWithScore(node=node, score=item.score))
        return nodes, context, len(items)

    def _report(self, context: AssembledContext | None, offered: int) -> None:
        self._last.set(context)
        report_assembly(
            dispatcher,
            logger,
            context,
            component="CtxBudgetRetriever",
            configured=f"budget={self.budget:,}",
            budget=self.budget,
            offered=offered,
            session_id=self.session_id,
        )
