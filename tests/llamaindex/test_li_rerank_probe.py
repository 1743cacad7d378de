"""LlamaIndex postprocessors as rerankers, probed: an answer of no nodes is named clearly.

A postprocessor that returned None, or bare nodes instead of ``NodeWithScore``, failed with
``'NoneType' object is not iterable`` / ``'TextNode' object has no attribute 'node'`` in the
reranker warning: now it says which method returned what, and what was expected. A
postprocessor class given for its instance (``SentenceTransformerRerank``), or anything else
with no ``postprocess_nodes``, was wrapped without a word (or refused as "a ModelMetaclass"
to be wrapped): it is refused when wrapped or configured.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.postprocessor import SentenceTransformerRerank
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle
from rerank_setup import QUERY, memory, session_of

from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.errors import ConfigurationTypeError
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.store.chroma_store import ChromaStore
from llama_index.ctxbudget.rerank import postprocessor_reranker

TEXTS = ["tea", "a sunrise", "more tea"]


class Odd(BaseNodePostprocessor):
    """Answers None (``how="none"``) or the bare nodes (``how="nodes"``)."""

    how: str

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> Any:
        return None if self.how == "none" else [n.node for n in nodes]


@pytest.mark.parametrize(
    ("how", "said"),
    [
        ("none", r"Odd\.postprocess_nodes must return a sequence of NodeWithScore, got None"),
        ("nodes", r"Odd\.postprocess_nodes must return NodeWithScore items, got a TextNode at 0"),
    ],
)
def test_an_answer_of_no_scored_nodes_is_named_clearly(how: str, said: str) -> None:
    with pytest.raises(TypeError, match=said):
        postprocessor_reranker(Odd(how=how))(QUERY, TEXTS)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder) -> ChromaStore:
    folder: Path = tmp_path_factory.mktemp("li-rerank-probe")
    return ChromaStore(folder / "db", embedder=embedder)


def test_the_memory_warns_with_what_the_postprocessor_returned(
    store: ChromaStore, caplog: pytest.LogCaptureFixture
) -> None:
    plain = memory(store)
    session = session_of(plain)
    expected = [it.id for it in plain.candidates(session, QUERY, budget=130).retrieved]
    mem = memory(store, Odd(how="nodes"))
    with caplog.at_level(logging.WARNING, logger="ctxbudget.memory.reading.rerank"):
        found = mem.candidates(session, QUERY, budget=130)
    assert [it.id for it in found.retrieved] == expected  # the ranking as it was
    assert "the reranker postprocessor_reranker(Odd) raised ConfigurationTypeError" in caplog.text
    assert "Odd.postprocess_nodes must return NodeWithScore items, got a TextNode" in caplog.text


@pytest.mark.parametrize("given", [Odd, object()], ids=["the class", "no postprocessor"])
def test_what_is_not_a_postprocessor_is_refused_when_wrapped(given: object) -> None:
    with pytest.raises(ConfigurationTypeError, match="postprocessor_reranker takes a LlamaIndex"):
        postprocessor_reranker(given)  # type: ignore[arg-type]


def test_a_rerank_class_given_as_is_is_refused_by_name() -> None:
    with pytest.raises(ConfigurationTypeError, match="the class SentenceTransformerRerank, not a"):
        MemoryConfig(reranker=SentenceTransformerRerank)
