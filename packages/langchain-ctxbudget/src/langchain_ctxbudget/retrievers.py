"""`CtxBudgetRetriever`: documents or memories of a `ContextMemory`, packed into a token budget."""

from __future__ import annotations

from typing import Any, Literal

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import Field, field_validator, model_validator

from ctxbudget import ContextAssembler, ContextItem, InvalidBudgetError, Tier, TokenCounter
from ctxbudget.compat import renamed
from ctxbudget.core.documents import pack_documents
from ctxbudget.errors import ConfigurationError
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.presets import as_strategy
from ctxbudget.store.chroma_store import Hit
from langchain_ctxbudget.convert import resolve_counter

__all__ = ["CtxBudgetRetriever"]

_KINDS: dict[str, list[str] | None] = {
    "documents": ["document"],
    "memories": ["message", "summary", "pinned"],
    "all": None,
}


class CtxBudgetRetriever(BaseRetriever):
    """The best chunks of a `ctxbudget.memory.context.ContextMemory` that fit a token budget.

    The ``fetch_k`` nearest records are scored as `ContextMemory` scores candidates (relevance
    x recency x salience, `ctxbudget.memory.scoring.Scoring` of the memory's config), the core
    packs the best total score into ``budget``, and the ``k`` best of those are returned
    (packed again on their own: `ctxbudget.core.documents.pack_documents` with ``k``), best
    first. Each `Document` carries in its metadata: ``id``, ``score``, ``similarity``,
    ``tokens`` (of its ``page_content``, with the model's tokenizer), ``kind`` and the record's
    own fields (``session_id``, ``user_id``, ``source``, ``timestamp`` and its metadata).

    The budget bounds the chunks as the core renders them (one ``- `` line each under a header,
    with a chat message's overhead), so the ``tokens`` of the returned documents never add up
    to more than ``budget``.

    Args:
        memory: the memory to search.
        k: at most this many documents (also a keyword of ``invoke``).
        budget: the tokens all returned documents may use, rendered (also a keyword of
            ``invoke``; ``max_tokens`` is its old name).
        search: ``"documents"`` (chunks of `ContextMemory.add_documents`), ``"memories"``
            (messages, summaries and pinned facts) or ``"all"``.
        collections: only these document collections (the ``namespace`` of ``add_documents``).
        session_id: only this session's memories.
        user_id: only this user's memories.
        fetch_k: candidates searched before packing (default ``max(4 * k, 20)``).
        model: the model whose tokenizer counts.
        counter: a `ctxbudget.TokenCounter` (or model name) instead of ``model``'s
            (``token_counter`` is its old name).
        strategy: a preset, `ctxbudget.Strategy` or mapping, merged over the memory's: its
            scoring weights rank the hits.

    >>> retriever = CtxBudgetRetriever(memory=mem, k=4, budget=800)  # doctest: +SKIP
    >>> docs = retriever.invoke("Where does the user live?")  # doctest: +SKIP
    """

    memory: ContextMemory
    k: int = Field(default=4, ge=0)
    budget: int = Field(default=1000, gt=0)
    search: Literal["documents", "memories", "all"] = "documents"
    collections: list[str] | None = None
    session_id: str | None = None
    user_id: str | None = None
    fetch_k: int | None = Field(default=None, ge=1)
    model: str = "gpt-4o"
    counter: TokenCounter | str | None = None
    strategy: Any = None

    @field_validator("strategy")
    @classmethod
    def _known_strategy(cls, value: Any) -> Any:
        if value is not None:
            as_strategy(value)  # an unknown preset or invalid strategy fails here
        return value

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        renames = {"max_tokens": "budget", "token_counter": "counter"}
        return renamed(data, renames, "CtxBudgetRetriever")

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        budget: int | None = None,
        max_tokens: int | None = None,
    ) -> list[Document]:
        if max_tokens is not None:
            budget = renamed({"max_tokens": max_tokens}, {"max_tokens": "budget"}, "invoke")[
                "budget"
            ]
        limit = self.k if k is None else k
        budget = self.budget if budget is None else budget
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            msg = f"k must be a non-negative int, got {limit!r}"
            raise ConfigurationError(msg)
        if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
            msg = f"budget must be a positive int number of tokens, got {budget!r}"
            raise InvalidBudgetError(msg)
        if limit == 0 or not query.strip():
            return []
        memory = self.memory
        scored = memory.search(
            query,
            k=self.fetch_k or max(4 * limit, 20),
            kinds=_KINDS[self.search],
            session_id=self.session_id,
            user_id=self.user_id,
            collections=self.collections if self.search == "documents" else None,
            strategy=self.strategy,
        )
        hits = [s.hit for s in scored]
        scores = [s.score for s in scored]
        counter = resolve_counter(self.counter, self.model)
        items = [
            ContextItem(hit.record.id, hit.record.text, tier=Tier.RETRIEVED, score=score)
            for hit, score in zip(hits, scores, strict=True)
        ]
        packed = pack_documents(items, ContextAssembler(counter), budget, k=limit)
        kept = [] if packed is None else list(packed.included)
        kept.sort(key=lambda it: (-it.score, it.id))
        by_id = {hit.record.id: hit for hit in hits}
        return [_document(by_id[it.id], it.score, counter.count(it.text)) for it in kept]


def _document(hit: Hit, score: float, tokens: int) -> Document:
    record = hit.record
    metadata: dict[str, Any] = {
        key: value for key, value in record.metadata.items() if not key.startswith("_")
    }
    metadata.update(
        id=record.id,
        score=score,
        similarity=hit.similarity,
        tokens=tokens,
        kind=record.kind,
    )
    for name in ("session_id", "user_id", "role", "source", "timestamp"):
        value = getattr(record, name)
        if value is not None:
            metadata[name] = value
    return Document(page_content=record.text, metadata=metadata, id=record.id)
