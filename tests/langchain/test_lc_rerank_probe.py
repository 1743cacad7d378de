"""LangChain compressors as rerankers, probed: odd answers are matched right or named clearly.

Bugs found by probing `langchain_ctxbudget.rerank.compressor_reranker`:

* a compressor that rewrites the text and hands the metadata back through numpy (the kept
  index an ``int64``) lost every document: its scores were dropped, the ranking unchanged;
* a document whose kept index was ``True`` was taken for the text at place 1;
* a compressor that returned None, or ``(document, score)`` pairs, failed with a bare
  ``'NoneType' object is not iterable`` / ``'tuple' object has no attribute 'metadata'``
  in the reranker warning: now it says which method returned what, and what was expected;
* a compressor class given for its instance, or anything else with no
  ``compress_documents``, was wrapped without a word (or refused as "a ModelMetaclass" to be
  wrapped), and failed on every call: it is refused when wrapped or configured.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from rerank_setup import QUERY, memory, session_of

from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.errors import ConfigurationError, ConfigurationTypeError
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.store.chroma_store import ChromaStore
from langchain_ctxbudget.rerank import compressor_reranker

TEXTS = ["tea", "a sunrise", "more tea"]
INDEX = "ctxbudget_rerank_index"


class Odd(BaseDocumentCompressor):
    """Answers in one of the odd ways a compressor may: see ``how``."""

    how: str

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Any:
        if self.how == "numpy index":  # rewritten text, metadata back through numpy
            return [
                Document(
                    page_content=f"summary {n}",
                    metadata={
                        INDEX: np.int64(d.metadata[INDEX]),
                        "relevance_score": np.float32("sunrise" in d.page_content),
                    },
                )
                for n, d in enumerate(documents)
            ]
        if self.how == "bool index":  # a document of no text given, its index a bool
            return [Document(page_content="unrelated", metadata={INDEX: True})]
        if self.how == "none":
            return None
        # "pairs": (document, score), as a hand-written reranker may answer
        return [(d, float("sunrise" in d.page_content)) for d in documents]


def test_an_index_kept_as_a_numpy_int_still_matches_its_text() -> None:
    scores = compressor_reranker(Odd(how="numpy index"))(QUERY, TEXTS)
    assert scores == [0.0, 1.0, 0.0]


def test_an_index_kept_as_a_bool_is_not_a_place() -> None:
    # Nothing matched: the answer is refused, not read as "every text dropped" (2026-12-01).
    with pytest.raises(ConfigurationError, match="matching none of the texts"):
        compressor_reranker(Odd(how="bool index"))(QUERY, TEXTS)


@pytest.mark.parametrize(
    ("how", "said"),
    [
        ("none", r"Odd\.compress_documents must return a sequence of Document, got None"),
        (
            "pairs",
            r"Odd\.compress_documents must return Document items .*, got a tuple at 0: \(Doc",
        ),
    ],
)
def test_an_answer_of_no_documents_is_named_clearly(how: str, said: str) -> None:
    with pytest.raises(TypeError, match=said):
        compressor_reranker(Odd(how=how))(QUERY, TEXTS)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder) -> ChromaStore:
    folder: Path = tmp_path_factory.mktemp("lc-rerank-probe")
    return ChromaStore(folder / "db", embedder=embedder)


def test_the_memory_warns_with_what_the_compressor_returned(
    store: ChromaStore, caplog: pytest.LogCaptureFixture
) -> None:
    plain = memory(store)
    session = session_of(plain)
    expected = [it.id for it in plain.candidates(session, QUERY, budget=130).retrieved]
    mem = memory(store, Odd(how="pairs"))
    with caplog.at_level(logging.WARNING, logger="ctxbudget.memory.reading.rerank"):
        found = mem.candidates(session, QUERY, budget=130)
    assert [it.id for it in found.retrieved] == expected  # the ranking as it was
    assert "the reranker compressor_reranker(Odd) raised ConfigurationTypeError" in caplog.text
    assert "Odd.compress_documents must return Document items" in caplog.text
    assert "got a tuple at 0" in caplog.text


@pytest.mark.parametrize("given", [Odd, object()], ids=["the class", "no compressor"])
def test_what_is_not_a_compressor_is_refused_when_wrapped(given: object) -> None:
    with pytest.raises(ConfigurationTypeError, match="compressor_reranker takes a LangChain"):
        compressor_reranker(given)  # type: ignore[arg-type]


def test_a_compressor_class_given_as_is_is_refused_by_name() -> None:
    with pytest.raises(
        ConfigurationTypeError, match=r"the class Odd, not a reranker.*Odd\(\.\.\.\)"
    ):
        MemoryConfig(reranker=Odd)
