"""A LangChain document compressor that reranks, as `MemoryConfig.reranker`.

`compressor_reranker` turns a ``BaseDocumentCompressor`` (Cohere's, a cross-encoder's, your own)
into the core's `Reranker`: the texts become `Document`s, ``compress_documents`` is called once,
and each text's score is the ``relevance_score`` its document came back with, or (a compressor
that only reorders, or scores some documents only) its place in the answer; a text dropped
scores below every kept one. A compressor with its own ``acompress_documents`` is awaited
through it when the memory was called async (on the app's loop, where its client works), and
when its ``compress_documents`` raises `NotImplementedError` (an async-only one).
Importing this module also lets `MemoryConfig(reranker=compressor)` take the compressor as it is.

>>> from ctxbudget.memory.policy.config import MemoryConfig
>>> config = MemoryConfig(reranker=compressor_reranker(my_compressor))  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from numbers import Integral
from typing import cast

from langchain_core.documents import BaseDocumentCompressor, Document

from ctxbudget.memory.policy.ranking import (
    Reranker,
    check_wrapped,
    framework_answer,
    kept_scores,
    register_converter,
)
from ctxbudget.memory.reading.coroutines import sync_or_async

__all__ = ["compressor_reranker"]

_INDEX = "ctxbudget_rerank_index"  # each document's place among the texts


def compressor_reranker(compressor: BaseDocumentCompressor) -> Reranker:
    """``compressor`` as a `Reranker` (see the module docstring).

    Raises:
        ConfigurationTypeError: ``compressor`` is not a LangChain document compressor
            (an instance with ``.compress_documents``): a class, or another framework's reranker.
    """
    check_wrapped(
        compressor,
        wrapper="compressor_reranker",
        kind="LangChain document compressor",
        method="compress_documents",
    )

    # Its own async method (a duck-typed compressor may have none).
    own_async = getattr(type(compressor), "acompress_documents", _BASE_ASYNC) is not _BASE_ASYNC

    def scores(query: str, texts: Sequence[str], /) -> list[float] | Awaitable[list[float]]:
        documents = [Document(page_content=t, metadata={_INDEX: n}) for n, t in enumerate(texts)]
        made = {id(d): n for n, d in enumerate(documents)}

        def scored() -> list[float]:
            answer = compressor.compress_documents(documents, query)
            return _scores_of(_documents(answer, compressor), texts, made, where=_where(compressor))

        def ascored() -> Awaitable[list[float]]:
            return _ascores(compressor, documents, query, texts, made)

        return sync_or_async(scored, ascored if own_async else None)

    scores.__name__ = f"compressor_reranker({type(compressor).__name__})"
    return cast("Reranker", scores)


_BASE_ASYNC = BaseDocumentCompressor.acompress_documents


async def _ascores(
    compressor: BaseDocumentCompressor,
    documents: list[Document],
    query: str,
    texts: Sequence[str],
    made: dict[int, int],
) -> list[float]:
    """The scores of ``compressor.acompress_documents`` (see `_scores_of`)."""
    answer = await compressor.acompress_documents(documents, query)
    return _scores_of(_documents(answer, compressor), texts, made, where=_where(compressor))


def _where(compressor: object) -> str:
    return type(compressor).__name__


def _documents(answer: object, compressor: object) -> list[Document]:
    """``answer`` as a list of `Document`s, or a `TypeError` naming what came back instead."""
    where = f"{type(compressor).__name__}.compress_documents"
    hint = " (a score goes in metadata['relevance_score'])"
    return framework_answer(answer, Document, where=where, hint=hint)


def _scores_of(
    answer: list[Document],
    texts: Sequence[str],
    made: dict[int, int] | None = None,
    *,
    where: str = "the compressor",
) -> list[float]:
    """Each text's score, as the compressor answered (see the module docstring).

    A document's ``relevance_score`` when every document kept has one, else its place in the
    answer (scores on some documents only are not on one scale with places); a text not in
    the answer scores below every kept one. A document is matched to its text as given (the
    same object, even rewritten in place), by the index kept in its metadata, or by its text.
    The scores pass the core's rule (`reranker_scores`: a tensor or a one-element array is a
    number; a str, a bool, NaN or an infinity is refused, naming ``where``'s compressor).

    Raises:
        ConfigurationError: a ``relevance_score`` that is no finite number.
    """
    unused = {n: t for n, t in enumerate(texts)}
    kept: list[tuple[int, object]] = []
    unmatched = ""
    for document in answer:
        index = made.get(id(document)) if made else None
        if index is None or index not in unused:
            index = _place(document.metadata.get(_INDEX))
        if index is None or index not in unused:  # metadata not kept: by text
            index = next((n for n, t in unused.items() if t == document.page_content), None)
            if index is None:
                if document.page_content not in texts:  # not a repeat: a text of its own
                    unmatched = unmatched or (
                        f"a document matching none of the texts it was given "
                        f"({document.page_content[:40]!r}..., without metadata[{_INDEX!r}])"
                    )
                continue
        del unused[index]
        kept.append((index, document.metadata.get("relevance_score")))
    return kept_scores(
        kept,
        len(texts),
        reranker=f"{where}.compress_documents",
        returned="returned relevance_score values",
        todo="put one finite number in each document's metadata['relevance_score'], "
        "higher for more relevant",
        unmatched=unmatched,
    )


def _place(kept: object) -> int | None:
    """The index a document's metadata kept: an int, numpy's too (a bool is not one)."""
    if isinstance(kept, bool) or not isinstance(kept, Integral):
        return None
    return int(kept)


def _convert(obj: object) -> Reranker | None:
    return compressor_reranker(obj) if isinstance(obj, BaseDocumentCompressor) else None


register_converter(_convert)
