"""LlamaIndex adapter fixtures: the real local model, a real embedded Chroma, LlamaIndex's fakes.

``Settings.llm`` and ``Settings.embed_model`` are set for every test (LlamaIndex defaults to
OpenAI, which fails offline). The embedding model is loaded once per session.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from llama_index.core import Settings
from llama_index.core.llms import MockLLM

from ctxbudget import TokenCounter
from ctxbudget.memory.context import ContextMemory
from llama_index.ctxbudget import CtxBudgetEmbedding


@pytest.fixture(scope="session")
def embedding() -> CtxBudgetEmbedding:
    """The real all-MiniLM-L6-v2 behind the adapter's BaseEmbedding, loaded once."""
    model = CtxBudgetEmbedding()
    model.embed_query("warm up")
    return model


@pytest.fixture(autouse=True)
def llama_settings(embedding: CtxBudgetEmbedding) -> None:
    """Explicit LlamaIndex settings: a MockLLM and the local embedding, never OpenAI."""
    Settings.llm = MockLLM()
    Settings.embed_model = embedding


@pytest.fixture(scope="session")
def counter() -> TokenCounter:
    return TokenCounter.for_model("gpt-4o")


@pytest.fixture
def context_memory(tmp_path: Path, embedding: CtxBudgetEmbedding) -> Iterator[ContextMemory]:
    """A ContextMemory on an embedded Chroma in a temporary folder, closed after the test."""
    folder = tmp_path / "chroma"
    memory = ContextMemory(folder, embedder=embedding)
    yield memory
    memory.close()
    shutil.rmtree(folder, ignore_errors=True)
