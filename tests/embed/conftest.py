"""Embedder tests: `embedder` here is the sentence-transformers model (the ``torch`` extra).

The rest of the suite uses the default `OnnxEmbedder` (tests/conftest.py); test_onnx_embed.py
compares the two.
"""

from __future__ import annotations

import pytest

from ctxbudget.embed.local import LocalEmbedder


@pytest.fixture(scope="session")
def local_embedder() -> LocalEmbedder:
    """The real all-MiniLM-L6-v2 on torch, loaded once for the session."""
    model = LocalEmbedder()
    model.embed_query("warm up")
    return model


@pytest.fixture
def embedder(local_embedder: LocalEmbedder) -> LocalEmbedder:
    """In tests/embed, the torch embedder (the default ONNX one is tested by name)."""
    return local_embedder
