"""Fixtures of the inspector's tests: the demo's store (written once) and a reader of it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from inspect_helpers import Written, write_demo

from ctxbudget import ContextMemory
from ctxbudget.embed.onnx import OnnxEmbedder


@pytest.fixture(scope="session")
def demo_store(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder) -> Written:
    """The demo's store with logged calls (closed: each test opens it as it needs)."""
    path = tmp_path_factory.mktemp("inspect-demo")
    with ContextMemory(path, embedder=embedder) as memory:
        latest, calls = write_demo(memory)
    return Written(path, latest, calls)


@pytest.fixture
def reader(demo_store: Written, embedder: OnnxEmbedder) -> Iterator[ContextMemory]:
    """The demo store opened to look only (as ``ctxbudget inspect`` opens it)."""
    memory = ContextMemory(
        demo_store.path, embedder=embedder, write_behind=False, inclusion_log=False
    )
    yield memory
    memory.close()
