"""A compressor's relevance scores pass the core's one rule (`ranking.reranker_scores`).

Bugs found by probing `langchain_ctxbudget.rerank.compressor_reranker` with the scores real
compressors put in ``metadata['relevance_score']``:

* a one-element numpy array (a cross-encoder's ``(n, 1)`` row) failed the call (numpy's
  "conversion of an array with ndim > 0 to a scalar"), so the compressor was never used;
* a string (``"0.9"``) or a bool was taken as a score (``float("0.9")``), NaN was handed on
  and refused later as the adapter's list, naming neither the compressor nor the document.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
import torch
from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from rerank_setup import QUERY

from ctxbudget.errors import ConfigurationError
from langchain_ctxbudget.rerank import compressor_reranker

TEXTS = ["tea", "a sunrise", "more tea"]
ACCEPTED: dict[str, Callable[[float], object]] = {
    "a 0-d tensor": lambda s: torch.tensor(s),
    "a (1,) tensor": lambda s: torch.tensor([s]),
    "a (1,) array": lambda s: np.array([s], dtype=np.float32),
    "a numpy float32": np.float32,
}
REFUSED: dict[str, tuple[Callable[[float], object], str]] = {
    "a str": (str, "a str at 0"),
    "a bool": (lambda s: s > 0, "a bool at 0"),
    "NaN": (lambda s: np.float64("nan"), "NaN at 0"),
    "infinity": (lambda s: torch.tensor(float("inf")), "inf at 0"),
    "a row of two": (lambda s: np.array([s, s]), "a row of 2 at 0"),
}


class Scoring(BaseDocumentCompressor):
    """Keeps every document, scored by ``score`` (a sunrise 1.0, else 0.0)."""

    score: Any

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        return [
            Document(
                page_content=d.page_content,
                metadata={
                    **d.metadata,
                    "relevance_score": self.score(float("sun" in d.page_content)),
                },
            )
            for d in documents
        ]


@pytest.mark.parametrize("kind", sorted(ACCEPTED))
def test_scores_as_compressors_give_them_are_taken(kind: str) -> None:
    assert compressor_reranker(Scoring(score=ACCEPTED[kind]))(QUERY, TEXTS) == [0.0, 1.0, 0.0]


@pytest.mark.parametrize("kind", sorted(REFUSED))
def test_what_is_no_score_is_refused_naming_the_compressor(kind: str) -> None:
    score, why = REFUSED[kind]
    with pytest.raises(ConfigurationError, match=why) as refused:
        compressor_reranker(Scoring(score=score))(QUERY, TEXTS)
    said = str(refused.value)
    assert said.startswith("the reranker Scoring.compress_documents returned relevance_score")
    assert "metadata['relevance_score']" in said.split(": ")[-1]  # what to do


class Rewriting(BaseDocumentCompressor):
    """Returns new documents with new text and no metadata (an extractor that keeps nothing)."""

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        return [
            Document(page_content=f"about {d.page_content}", metadata={"relevance_score": 1.0})
            for d in documents
        ]


def test_an_answer_that_matches_no_text_is_refused_not_read_without_it() -> None:
    """Before 2026-12-01 such documents were left out: every text scored the floor, silently."""
    with pytest.raises(ConfigurationError, match="matching none of the texts"):
        compressor_reranker(Rewriting())(QUERY, TEXTS)


class Repeating(BaseDocumentCompressor):
    """Returns each document twice: a repeat is not a new text."""

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        return [*documents, *documents]


def test_a_repeated_document_is_read_once() -> None:
    assert compressor_reranker(Repeating())(QUERY, TEXTS) == [3.0, 2.0, 1.0]


class Big(BaseDocumentCompressor):
    """Keeps the first two documents with scores of a large magnitude."""

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        scores = [2e17, 1e17]
        return [
            Document(page_content=d.page_content, metadata={**d.metadata, "relevance_score": s})
            for d, s in zip(documents, scores, strict=False)
        ]


def test_a_dropped_text_scores_below_every_kept_one_at_any_magnitude() -> None:
    scores = compressor_reranker(Big())(QUERY, TEXTS)
    assert scores[0] > scores[1] > scores[2]
