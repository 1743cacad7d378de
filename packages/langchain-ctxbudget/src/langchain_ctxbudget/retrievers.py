"""`CtxBudgetRetriever`: documents or memories of a `ContextMemory`, packed into a token budget."""

from __future__ import annotations

from typing import Any, Literal

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, ValidationError, model_validator

from ctxbudget import ContextAssembler, InvalidBudgetError, TokenCounter
from ctxbudget.compat import refuse_unknown, renamed
from ctxbudget.core.documents import included_positions, pack_documents
from ctxbudget.core.numbers import count
from ctxbudget.errors import ConfigurationError, StoreInputError
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.inputs import check_query
from ctxbudget.memory.policy.presets import as_strategy
from ctxbudget.memory.reading.search import ScoredHit
from ctxbudget.store.records import require_name, scope_of
from ctxbudget.store.search import MAX_HITS, search_k
from langchain_ctxbudget.convert import resolve_counter

__all__ = ["CtxBudgetRetriever"]

_KINDS: dict[str, list[str] | None] = {
    "documents": ["document"],
    "memories": ["message", "summary", "pinned"],
    "all": None,
}


_OLD_NAMES = {"max_tokens": "budget", "token_counter": "counter"}


class CtxBudgetRetriever(BaseRetriever):
    """The best chunks of a `ctxbudget.memory.context.ContextMemory` that fit a token budget.

    The ``fetch_k`` nearest records are scored as `ContextMemory` scores candidates (relevance
    x recency x salience, `ctxbudget.memory.policy.scoring.Scoring` of the memory's config), the
    core packs the best total score into ``budget``, and the ``k`` best of those are returned
    (packed again on their own: `ctxbudget.core.documents.pack_documents` with ``k``), best
    first. Each `Document` carries in its metadata: ``id`` (the record's own id, as given to
    `ContextMemory`), ``scope`` and ``scope_id`` (where that id is unique: ``"collection"`` and
    the collection's name for a document chunk, ``"session"`` or ``"user"`` and its id for a
    memory), ``score``, ``similarity``, ``tokens`` (of its ``page_content``, with the model's
    tokenizer), ``kind`` and the record's own fields (``session_id``, ``user_id``, ``source``,
    ``timestamp`` and its metadata). Record ids are unique per scope only: two collections may
    both hold a ``guide#0``, and both may be returned. The `Document`'s own ``id`` is its id in
    the packing report, unique in the result (the record's id for ``session_id``'s own
    memories, else qualified with its scope: see `ctxbudget.core.ids`).

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
        collections: only the documents of these collections (the ``collection`` of
            ``add_documents``), whatever ``search`` is (with ``"all"``: those documents and
            the memories). A non-empty list; None: every collection.
        session_id: only this session's memories.
        user_id: only this user's memories. Without it (and without ``session_id``), memories
            of every user and session are searched: give the user's id to a retriever that
            answers one user.
        fetch_k: candidates searched before packing (default ``max(4 * k, 20)``).
        model: the model whose tokenizer counts.
        counter: a `ctxbudget.TokenCounter` (or model name) instead of ``model``'s
            (``token_counter`` is its old name).
        strategy: a preset, `ctxbudget.Strategy` or mapping, merged over the memory's: its
            scoring weights rank the hits.

    >>> retriever = CtxBudgetRetriever(memory=mem, k=4, budget=800)  # doctest: +SKIP
    >>> docs = retriever.invoke("Where does the user live?")  # doctest: +SKIP
    """

    # An unknown option (a misspelled ``budget``) is refused, naming it, not ignored.
    model_config = ConfigDict(extra="forbid")

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

    def __init__(self, **data: Any) -> None:
        # Checked before pydantic, by the same rules as invoke's: a bad option is a
        # ConfigurationError (not a ValidationError), and k=True, "3" or 2.0 are refused here
        # as there (pydantic would turn them into numbers); numpy ints are taken.
        refuse_unknown(data, {*type(self).model_fields, *_OLD_NAMES}, "CtxBudgetRetriever")
        for name, check in (("k", _k), ("budget", _budget), ("max_tokens", _budget)):
            if data.get(name) is not None:
                data[name] = check(data[name], "CtxBudgetRetriever")
        if data.get("fetch_k") is not None:
            data["fetch_k"] = count(data["fetch_k"], "CtxBudgetRetriever: fetch_k")
        for name in ("session_id", "user_id"):  # an int or "" would find nothing, quietly
            if data.get(name) is not None:
                try:
                    require_name(name, data[name])  # the core's rule, as its search checks it
                except StoreInputError as exc:
                    msg = f"CtxBudgetRetriever: {exc}"
                    raise StoreInputError(msg) from exc
        if data.get("strategy") is not None:
            as_strategy(data["strategy"])  # an unknown preset or invalid strategy fails here
        if "search" in data and data["search"] not in _KINDS:
            msg = (
                f"CtxBudgetRetriever(search=) must be one of {sorted(_KINDS)}, "
                f"got {data['search']!r:.80}"
            )
            raise ConfigurationError(msg)
        collections = data.get("collections")
        if collections is not None and (isinstance(collections, str) or not collections):
            msg = (
                f"CtxBudgetRetriever(collections=) must be a non-empty list of collection names "
                f"or None (every collection), got {collections!r:.80}; pass "
                "search='memories' to search no documents"
            )
            raise ConfigurationError(msg)
        try:
            super().__init__(**data)
        except ValidationError as exc:  # an option of the wrong type: the same error tree
            msg = str(exc)
            raise ConfigurationError(msg) from exc

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        return renamed(data, _OLD_NAMES, "CtxBudgetRetriever")

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        budget: int | None = None,
        max_tokens: int | None = None,
    ) -> list[Document]:
        return self._retrieve(query, k=k, budget=budget, max_tokens=max_tokens)

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        budget: int | None = None,
        max_tokens: int | None = None,
    ) -> list[Document]:
        # The same code, on the memory's worker threads (it searches the store).
        return await self.memory.arun(
            self._retrieve, query, k=k, budget=budget, max_tokens=max_tokens
        )

    def _retrieve(
        self, query: str, *, k: int | None, budget: int | None, max_tokens: int | None
    ) -> list[Document]:
        if max_tokens is not None:  # its old name: both at once are refused, as when made
            given = {"max_tokens": max_tokens, **({} if budget is None else {"budget": budget})}
            budget = renamed(given, _OLD_NAMES, "CtxBudgetRetriever.invoke")["budget"]
        limit = self.k if k is None else _k(k, "CtxBudgetRetriever.invoke")
        budget = self.budget if budget is None else _budget(budget, "CtxBudgetRetriever.invoke")
        check_query(query)  # the core's check: a lone surrogate never reaches the embedder
        if limit == 0 or not query.strip():
            return []
        fetch_k = self.fetch_k or min(max(4 * limit, 20), MAX_HITS)
        scored = [
            hit
            for kinds, collections, scoped in self._searches()
            for hit in self.memory.search(
                query,
                k=fetch_k,
                kinds=kinds,
                session_id=self.session_id if scoped else None,
                user_id=self.user_id if scoped else None,
                collections=collections,
                strategy=self.strategy,
            )
        ]
        counter = resolve_counter(self.counter, self.model)
        # One item per record: ids qualified by scope, so two collections' "guide#0" are two.
        items = [found.item(session_id=self.session_id) for found in scored]
        packed = pack_documents(items, ContextAssembler(counter), budget, k=limit)
        if packed is None:
            return []
        # Each included item back to the hit it was made from, by position (never by an id
        # lookup that would take another hit with the same id), then best first.
        kept = sorted(
            zip(packed.included, included_positions(items, packed), strict=True),
            key=lambda pair: (-pair[0].score, pair[0].id),
        )
        return [
            _document(scored[index], it.id, it.text, it.score, counter.count(it.text))
            for it, index in kept
        ]

    def _searches(self) -> list[tuple[list[str] | None, list[str] | None, bool]]:
        """``(kinds, collections, scoped)`` of each search.

        ``collections`` filter documents only, and ``session_id``/``user_id`` memories only
        (``scoped``): documents belong to no session or user, so a search scoped to one would
        find none. ``search="all"`` with either is two searches, the documents (of those
        collections) and the memories (of that session or user), whose candidates are packed
        together (as `ContextMemory.assemble` gathers documents and memories apart).
        """
        if self.search == "documents":
            return [(_KINDS["documents"], self.collections, False)]
        if self.search == "memories":
            return [(_KINDS["memories"], None, True)]
        if self.collections is None and self.session_id is None and self.user_id is None:
            return [(None, None, False)]
        return [(_KINDS["documents"], self.collections, False), (_KINDS["memories"], None, True)]


def _k(value: object, where: str) -> int:
    return search_k(value, f"{where}: k")  # as ContextMemory.search checks its k


def _budget(value: object, where: str) -> int:
    hint = "the tokens the documents may use, e.g. budget=1000"
    return count(value, f"{where}: budget", error=InvalidBudgetError, hint=hint)


def _document(found: ScoredHit, doc_id: str, text: str, score: float, tokens: int) -> Document:
    record = found.hit.record
    metadata: dict[str, Any] = {
        key: value for key, value in record.metadata.items() if not key.startswith("_")
    }
    scope, scope_id = scope_of(record)
    metadata.update(
        id=record.id,
        scope=scope,
        scope_id=scope_id,
        score=score,
        similarity=found.hit.similarity,
        tokens=tokens,
        kind=record.kind,
    )
    for name in ("session_id", "user_id", "role", "source", "timestamp"):
        value = getattr(record, name)
        if value is not None:
            metadata[name] = value
    return Document(page_content=text, metadata=metadata, id=doc_id)
