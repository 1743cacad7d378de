"""`CtxBudgetCompressor`: the output of any retriever, packed into a token budget."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.embeddings import Embeddings
from pydantic import ConfigDict, Field, ValidationError, model_validator

from ctxbudget import (
    ContextAssembler,
    ContextItem,
    InvalidBudgetError,
    InvalidItemError,
    Tier,
    TokenCounter,
)
from ctxbudget.compat import refuse_unknown, renamed
from ctxbudget.core.documents import pack_documents
from ctxbudget.core.ids import internal_id
from ctxbudget.core.items import Shrink
from ctxbudget.core.numbers import count, real
from ctxbudget.core.unicode import lone_surrogate
from ctxbudget.errors import ConfigurationError
from ctxbudget.memory.inputs import check_query
from langchain_ctxbudget.convert import resolve_counter

__all__ = ["CtxBudgetCompressor"]

_SCORE_KEYS = ("relevance_score", "score", "similarity")


_OLD_NAMES = {"max_tokens": "budget", "token_counter": "counter"}


class CtxBudgetCompressor(BaseDocumentCompressor):
    """Keeps the most valuable retrieved documents that fit ``budget``, counted exactly.

    For ``ContextualCompressionRetriever``-style pipelines: give it the documents of any
    retriever and the query. The core drops duplicates (same text once normalized, and near
    duplicates when ``embeddings`` is given), packs the highest total score into the budget,
    and, with ``truncate``, cuts one more document at a sentence boundary (marked `` …``) to
    use the room left. Documents come back best first, each a copy with ``tokens`` (of the
    returned ``page_content``), ``truncated`` and, unless it has one, ``score`` added to its
    metadata.

    A document's value is its metadata's ``score_key`` (higher is better), else its
    ``relevance_score``, ``score`` or ``similarity``, else ``1 / (1 + rank)`` from the order
    given. As for `CtxBudgetRetriever`, the budget bounds the documents as the core renders
    them, so the ``tokens`` of the returned documents add up to at most ``budget``.

    Args:
        budget: the tokens all returned documents may use, rendered (``max_tokens`` is its
            old name).
        model: the model whose tokenizer counts.
        counter: a `ctxbudget.TokenCounter` (or model name) instead of ``model``'s
            (``token_counter`` is its old name).
        truncate: let one document be cut at a sentence boundary to fill the budget.
        score_key: the metadata key holding each document's score.
        embeddings: embeds the documents so near duplicates are dropped too.
        near_duplicate_threshold: cosine similarity from which two documents are duplicates.

    >>> compressor = CtxBudgetCompressor(budget=500)
    >>> compressor.compress_documents([Document("Lisbon is sunny."),
    ...                                Document("lisbon is  sunny.")], "weather")[0].page_content
    'Lisbon is sunny.'
    """

    # An unknown option (a misspelled ``budget``) is refused, naming it, not ignored.
    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    budget: int = Field(gt=0)
    model: str = "gpt-4o"
    counter: TokenCounter | str | None = None
    truncate: bool = True
    score_key: str | None = None
    embeddings: Embeddings | None = None
    near_duplicate_threshold: float | None = Field(default=0.95, gt=0.0, le=1.0)

    def __init__(self, **data: Any) -> None:
        # The budget passes the number boundary before pydantic (numpy ints taken; True, "3"
        # and 2.0 refused with a ConfigurationError rather than turned into numbers).
        refuse_unknown(data, {*type(self).model_fields, *_OLD_NAMES}, "CtxBudgetCompressor")
        for name in ("budget", "max_tokens"):
            if data.get(name) is not None:
                hint = "the tokens the documents may use, e.g. budget=500"
                what = f"CtxBudgetCompressor: {name}"
                data[name] = count(data[name], what, error=InvalidBudgetError, hint=hint)
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
        return renamed(data, _OLD_NAMES, "CtxBudgetCompressor")

    def compress_documents(
        self,
        documents: Sequence[Document],
        query: str,
        callbacks: Callbacks | None = None,
    ) -> Sequence[Document]:
        """Pack ``documents`` into ``budget``; ``query`` is not used for scoring.

        Raises:
            InvalidItemError: ``query`` is not text a model can take (a lone surrogate): the
                core's check (`ctxbudget.memory.inputs.check_query`), as for every query; or
                ``documents`` is not a list of `Document`s, or one's text holds a lone
                surrogate (the first such document is named).
        """
        check_query(query)  # not scored, but it reaches callbacks, logs and spans
        _check_documents(documents)
        given = [(i, d) for i, d in enumerate(documents) if d.page_content.strip()]
        docs = [d for _, d in given]
        if not docs:
            return []
        counter = resolve_counter(self.counter, self.model)
        vectors: list[list[float]] | None = None
        if self.embeddings is not None:
            vectors = self.embeddings.embed_documents([d.page_content for d in docs])
            if len(vectors) != len(docs):  # else a document would take another's vector
                msg = (
                    f"CtxBudgetCompressor: {type(self.embeddings).__name__}.embed_documents "
                    f"returned {len(vectors)} vectors for {len(docs)} documents; it must "
                    "return one vector per text, in order"
                )
                raise ConfigurationError(msg)
        items = [
            ContextItem(
                internal_id("doc", index),
                doc.page_content,
                tier=Tier.RETRIEVED,
                score=self._score(doc, index, given[index][0]),
                shrink=Shrink.TRUNCATE if self.truncate else Shrink.DROP,
                embedding=None if vectors is None else vectors[index],
                record_id=doc.id or None,  # reports name the document by its own id
            )
            for index, doc in enumerate(docs)
        ]
        assembler = ContextAssembler(
            counter, near_duplicate_threshold=self.near_duplicate_threshold
        )
        packed = pack_documents(items, assembler, self.budget)
        kept = [] if packed is None else list(packed.included)
        position = {item.id: index for index, item in enumerate(items)}
        kept.sort(key=lambda it: (-it.score, position[it.id]))
        out: list[Document] = []
        for item in kept:
            original = docs[position[item.id]]
            metadata: dict[str, Any] = dict(original.metadata)
            metadata.setdefault("score", item.score)
            metadata["tokens"] = counter.count(item.text)
            metadata["truncated"] = item.text != original.page_content
            update = {"page_content": item.text, "metadata": metadata}
            out.append(original.model_copy(update=update))
        return out

    def _score(self, doc: Document, rank: int, position: int) -> float:
        """The document's score (``rank``: among the non-blank; ``position``: as given)."""
        keys = (self.score_key,) if self.score_key else _SCORE_KEYS
        for key in keys:
            value = doc.metadata.get(key)
            if value is not None or self.score_key:
                # Any real number: a reranker's numpy float32 relevance_score too.
                hint = "higher is better"
                where = f"document {position}: metadata[{key!r}]"
                return real(value, where, error=InvalidItemError, hint=hint)
        return 1.0 / (1.0 + rank)


def _check_documents(documents: object) -> None:
    """Refuse what is not a list of `Document`s, naming the first that is not one."""
    if isinstance(documents, str | bytes | Document) or not isinstance(documents, Sequence):
        msg = (
            f"CtxBudgetCompressor.compress_documents takes a list of Documents, got "
            f"{type(documents).__name__}; pass the retriever's output as it is"
        )
        raise InvalidItemError(msg)
    for position, doc in enumerate(documents):
        if not isinstance(doc, Document):
            msg = (
                f"document {position} is a {type(doc).__name__}, not a LangChain Document; "
                "wrap its text: Document(page_content=text, metadata=...)"
            )
            raise InvalidItemError(msg)
        problem = lone_surrogate(doc.page_content)
        if problem is not None:  # named here: the core's own error would not say which
            msg = f"document {position} (id {doc.id!r}): page_content {problem}"
            raise InvalidItemError(msg)
