"""A LangChain document compressor that reranks, as `MemoryConfig.reranker`.

`compressor_reranker` turns a ``BaseDocumentCompressor`` (Cohere's, a cross-encoder's, your own)
into the core's `Reranker`: the texts become `Document`s, ``compress_documents`` is called once,
and each text's score is the ``relevance_score`` its document came back with, or (a compressor
that only reorders) its place in the answer; a text dropped scores below every kept one.
Importing this module also lets `MemoryConfig(reranker=compressor)` take the compressor as it is.

>>> from ctxbudget.memory.policy.config import MemoryConfig
>>> config = MemoryConfig(reranker=compressor_reranker(my_compressor))  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.documents import BaseDocumentCompressor, Document

from ctxbudget.memory.policy.ranking import Reranker, register_converter

__all__ = ["compressor_reranker"]

_INDEX = "ctxbudget_rerank_index"  # each document's place among the texts


def compressor_reranker(compressor: BaseDocumentCompressor) -> Reranker:
    """``compressor`` as a `Reranker` (see the module docstring)."""

    def scores(query: str, texts: Sequence[str], /) -> list[float]:
        documents = [Document(page_content=t, metadata={_INDEX: n}) for n, t in enumerate(texts)]
        answer = list(compressor.compress_documents(documents, query))
        return _scores_of(answer, texts)

    scores.__name__ = f"compressor_reranker({type(compressor).__name__})"
    return scores


def _scores_of(answer: list[Document], texts: Sequence[str]) -> list[float]:
    unused = {n: t for n, t in enumerate(texts)}
    found: dict[int, float] = {}
    for place, document in enumerate(answer):
        index = document.metadata.get(_INDEX)
        if not isinstance(index, int) or index not in unused:  # metadata not kept: by text
            index = next((n for n, t in unused.items() if t == document.page_content), None)
            if index is None:
                continue
        del unused[index]
        score = document.metadata.get("relevance_score")
        found[index] = float(score) if score is not None else float(len(answer) - place)
    floor = min(found.values(), default=1.0) - 1.0
    return [found.get(n, floor) for n in range(len(texts))]


def _convert(obj: object) -> Reranker | None:
    return compressor_reranker(obj) if isinstance(obj, BaseDocumentCompressor) else None


register_converter(_convert)
