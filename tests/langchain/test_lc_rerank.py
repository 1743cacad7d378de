"""A LangChain document compressor that reranks, as `MemoryConfig.reranker`.

A tiny `BaseDocumentCompressor` of the test's own (it puts ``relevance_score`` in metadata, or
only reorders) stands in for Cohere's or a cross-encoder's; the memory, store and embedder are
real.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from rerank_setup import EVIDENCE, QUERY, memory, session_of

from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.store.chroma_store import ChromaStore
from langchain_ctxbudget.rerank import compressor_reranker


class KeywordRerank(BaseDocumentCompressor):
    """Scores documents holding ``word`` 1, the others 0; keeps the best ``top_n``."""

    word: str
    top_n: int = 3
    scored: bool = True

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        ranked = sorted(documents, key=lambda d: self.word not in d.page_content)[: self.top_n]
        if not self.scored:
            return ranked
        return [
            Document(
                page_content=d.page_content,
                metadata={**d.metadata, "relevance_score": float(self.word in d.page_content)},
            )
            for d in ranked
        ]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder) -> ChromaStore:
    folder: Path = tmp_path_factory.mktemp("lc-rerank")
    return ChromaStore(folder / "db", embedder=embedder)


@pytest.mark.parametrize("scored", [True, False], ids=["relevance_score", "reordered"])
@pytest.mark.parametrize("wrapped", [True, False], ids=["wrapped", "as-is"])
def test_a_reranking_compressor_changes_the_context(
    store: ChromaStore, scored: bool, wrapped: bool
) -> None:
    compressor = KeywordRerank(word="sunrise", scored=scored)
    plain = memory(store)
    session = session_of(plain)
    before = plain.assemble(session, QUERY, budget=130)
    reranker = compressor_reranker(compressor) if wrapped else compressor
    after = memory(store, reranker).assemble(session, QUERY, budget=130)
    assert EVIDENCE not in [it.text for it in before.included]
    assert EVIDENCE in [it.text for it in after.included]


def test_the_scores_follow_the_compressor() -> None:
    texts = ["a sunrise", "tea", "more tea", "a sunrise again"]
    scored = compressor_reranker(KeywordRerank(word="sunrise", top_n=3))("q", texts)
    assert scored == [1.0, 0.0, -1.0, 1.0]  # "more tea" was dropped: below every kept one
    ordered = compressor_reranker(KeywordRerank(word="sunrise", scored=False))("q", texts)
    assert ordered[0] > ordered[1] and ordered[3] > ordered[1] and ordered[2] < ordered[1]


class Rewriting(BaseDocumentCompressor):
    """Answers in one of the ways a real compressor may: see ``how``."""

    how: str

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        best = sorted(documents, key=lambda d: "sunrise" not in d.page_content)
        if self.how == "in place":  # rewrites the documents it was given, metadata gone
            for document in best:
                document.page_content = document.page_content.upper()
                document.metadata.clear()
            return best
        # "some scored": only the first document carries a relevance_score
        return [
            Document(page_content=d.page_content, metadata={"relevance_score": 0.9} if n else {})
            for n, d in enumerate(best)
        ][::-1]


def test_documents_rewritten_in_place_keep_their_places() -> None:
    texts = ["tea", "a sunrise", "more tea"]
    scores = compressor_reranker(Rewriting(how="in place"))("q", texts)
    assert scores[1] == max(scores) and scores[1] > scores[0]


def test_scores_on_some_documents_only_rank_by_place() -> None:
    texts = ["tea", "a sunrise", "more tea"]
    scores = compressor_reranker(Rewriting(how="some scored"))("q", texts)
    # answered last-first: "more tea" (unscored), then "tea" (0.9), then "a sunrise" (0.9):
    # a 0.9 is not on one scale with places, so the answer's order decides
    assert scores[2] > scores[0] > scores[1]
