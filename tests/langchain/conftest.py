"""LangChain adapter fixtures: the real embedding model, an embedded Chroma, a Chroma server.

The only fake is the chat model (`lc_fakes.RecordingChatModel`, a LangChain
`GenericFakeChatModel` that keeps every request). Everything else is real: tiktoken, Chroma, the
local embedding model.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ctxbudget import telemetry
from ctxbudget.embed.local import LocalEmbedder
from ctxbudget.memory.context import ContextMemory
from ctxbudget.store.chroma_store import ChromaStore
from ctxbudget.testing import ChromaServer


@pytest.fixture
def memory(tmp_path: Path, embedder: LocalEmbedder) -> Iterator[ContextMemory]:
    """A `ContextMemory` over an embedded Chroma in a temporary folder."""
    mem = ContextMemory(path=tmp_path / "chroma", embedder=embedder)
    yield mem
    mem.close()


@pytest.fixture(params=["embedded", pytest.param("server", marks=pytest.mark.integration)])
def any_memory(
    request: pytest.FixtureRequest, tmp_path: Path, embedder: LocalEmbedder
) -> Iterator[ContextMemory]:
    """A fresh `ContextMemory`: over an embedded Chroma, then over a Chroma server."""
    if request.param == "embedded":
        store = ChromaStore(tmp_path / "chroma", embedder=embedder)
    else:
        server: ChromaServer = request.getfixturevalue("chroma_server")
        url = server.url
        store = ChromaStore(url=url, embedder=embedder, collection=f"t-{uuid.uuid4().hex[:12]}")
    mem = ContextMemory(store=store)
    yield mem
    mem.close()


SPANS = InMemorySpanExporter()
TRACING = TracerProvider()
TRACING.add_span_processor(SimpleSpanProcessor(SPANS))


@pytest.fixture
def traced() -> Iterator[InMemorySpanExporter]:
    """ctxbudget's spans during the test, in memory (tracing restored to its default after)."""
    telemetry.configure(tracer_provider=TRACING)
    SPANS.clear()
    yield SPANS
    telemetry.configure()
    SPANS.clear()
