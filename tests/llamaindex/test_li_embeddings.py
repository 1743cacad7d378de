"""CtxBudgetEmbedding: the local model as a LlamaIndex embedding and a ctxbudget Embedder."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from llama_index.core import Document, VectorStoreIndex

from ctxbudget.embed.base import default_embedder
from ctxbudget.embed.local import Embedder, LocalEmbedder, as_embedder
from ctxbudget.embed.onnx import OnnxEmbedder
from llama_index.ctxbudget import CtxBudgetEmbedding


class Counting:
    """A ctxbudget Embedder over the real local model that counts the texts it embeds."""

    def __init__(self, model: Embedder) -> None:
        self.model = model
        self.embedded: list[str] = []

    @property
    def name(self) -> str:
        return self.model.name

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.embedded += list(texts)
        return self.model.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def test_vectors_are_the_default_models(embedding: CtxBudgetEmbedding) -> None:
    # The default is the int8 ONNX MiniLM: its vectors are the torch model's within rounding.
    local = LocalEmbedder()
    text = "The tram climbs the hill."
    ours = np.array(embedding.get_text_embedding(text))
    theirs = np.array(local.embed_query(text))
    assert ours.shape == (384,)
    assert float(ours @ theirs) > 0.98
    assert embedding.model_name == OnnxEmbedder().name  # int8 or fp32 arithmetic: see exact_int8
    assert np.allclose(ours, default_embedder().embed_query(text), atol=1e-6)
    assert as_embedder(embedding) is embedding  # usable as is by ContextMemory and ChromaStore


def test_repeated_texts_are_not_embedded_again(embedding: CtxBudgetEmbedding) -> None:
    counting = Counting(embedding.embedder)
    cached = CtxBudgetEmbedding(counting, cache_size=2)
    first = cached.embed_documents(["a cat", "a dog", "a cat"])
    assert counting.embedded == ["a cat", "a dog"]
    assert first[0] == first[2]
    cached.get_query_embedding("a dog")
    assert counting.embedded == ["a cat", "a dog"]
    cached.embed_documents(["a bird"])  # evicts "a cat", the least recently used
    cached.embed_documents(["a cat"])
    assert counting.embedded == ["a cat", "a dog", "a bird", "a cat"]
    uncached = CtxBudgetEmbedding(counting, cache_size=0)
    uncached.embed_documents(["a dog"])
    assert counting.embedded[-1] == "a dog"


async def test_async_embeddings(embedding: CtxBudgetEmbedding) -> None:
    query = await embedding.aget_query_embedding("soup")
    texts = await embedding.aget_text_embedding_batch(["soup", "bread"])
    assert np.allclose(query, texts[0])
    assert len(texts) == 2


def test_a_vector_store_index_finds_by_meaning(embedding: CtxBudgetEmbedding) -> None:
    documents = [
        Document(text="The recipe needs two ripe tomatoes and fresh basil."),
        Document(text="The train to Porto leaves at nine from Santa Apolonia."),
        Document(text="Our office closes at six on Fridays."),
    ]
    index = VectorStoreIndex.from_documents(documents, embed_model=embedding)
    (best,) = index.as_retriever(similarity_top_k=1).retrieve("When does the railway depart?")
    assert "train to Porto" in best.node.get_content()
