"""The reranker stage, probed again: rerankers as users write them, sync and async.

Each test is a bug found by probing the reranker door:

* a reranker that consumes the list it is given (``del texts[:2]`` per batch, as a batching
  client does) had its right answer refused as "12 scores for 0 texts": the stage counted the
  scores due on its own list after the reranker emptied it;
* a LangChain compressor or a LlamaIndex postprocessor whose real work is async
  (``acompress_documents`` / ``apostprocess_nodes``, the sync method raising
  `NotImplementedError`) failed every call, sync or async: the adapters called the sync method
  only;
* one with both methods, its async one using a client bound to the app's loop, was called
  through its sync method from ``aassemble`` (so never with the app's client).

Real parts: tiktoken, an embedded Chroma in a temporary folder, the default embedder; the
rerankers are the frameworks' own base classes, subclassed as users do.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from rerank_setup import EVIDENCE, QUERY, memory, session_of

from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.store.chroma_store import ChromaStore

lc_documents = pytest.importorskip("langchain_core.documents")
li_types = pytest.importorskip("llama_index.core.postprocessor.types")
li_schema = pytest.importorskip("llama_index.core.schema")

from langchain_core.callbacks import Callbacks  # noqa: E402
from langchain_core.documents import BaseDocumentCompressor, Document  # noqa: E402
from llama_index.core.postprocessor.types import BaseNodePostprocessor  # noqa: E402
from llama_index.core.schema import NodeWithScore, QueryBundle  # noqa: E402

from langchain_ctxbudget.rerank import compressor_reranker  # noqa: E402
from llama_index.ctxbudget.rerank import postprocessor_reranker  # noqa: E402

BUDGET = 130


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder) -> ChromaStore:
    folder: Path = tmp_path_factory.mktemp("rerank-probe2")
    return ChromaStore(folder / "db", embedder=embedder)


@pytest.fixture(scope="module")
def session(store: ChromaStore) -> str:
    found = session_of(memory(store))
    plain = memory(store).assemble(found, QUERY, budget=BUDGET)
    assert EVIDENCE not in plain.render()  # the scene: plain retrieval leaves it out
    return found


def favour(texts: Sequence[str]) -> list[float]:
    return [1.0 if t == EVIDENCE else 0.0 for t in texts]


def reranked(store: ChromaStore, session: str, reranker: object) -> tuple[bool, bool]:
    """Whether the evidence is sent by ``assemble`` and by ``aassemble``."""
    mem = memory(store, reranker)
    sync = EVIDENCE in mem.assemble(session, QUERY, budget=BUDGET).render()

    async def call() -> bool:
        return EVIDENCE in (await mem.aassemble(session, QUERY, budget=BUDGET)).render()

    return sync, asyncio.run(call())


def test_a_reranker_consuming_its_list_in_batches_still_reranks(
    store: ChromaStore, session: str, caplog: pytest.LogCaptureFixture
) -> None:
    def batched(query: str, texts: list[str]) -> list[float]:
        out: list[float] = []
        while texts:
            batch = texts[:2]
            del texts[:2]  # a batching client consuming its queue
            out += favour(batch)
        return out

    with caplog.at_level(logging.WARNING, logger="ctxbudget"):
        assert reranked(store, session, batched) == (True, True)
    assert not caplog.records, caplog.text


# -- LangChain compressors whose work is async --------------------------------------------


def scored(documents: Sequence[Document]) -> list[Document]:
    return [
        Document(
            page_content=d.page_content,
            metadata={**d.metadata, "relevance_score": favour([d.page_content])[0]},
        )
        for d in documents
    ]


class AsyncOnlyCompressor(BaseDocumentCompressor):
    """An async client only: the sync method says so, as LangChain's async-only parts do."""

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        raise NotImplementedError("this compressor is async only: use acompress_documents")

    async def acompress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        await asyncio.sleep(0)
        return scored(documents)


class LoopBoundCompressor(BaseDocumentCompressor):
    """Both methods; the async one sends through a lock contended on the app's loop only."""

    model_config = {"arbitrary_types_allowed": True}
    lock: Any = None
    used: list[str] = []

    async def bind(self) -> None:
        self.lock = asyncio.Lock()
        await asyncio.gather(self._send(), self._send())  # bound to this loop from now on

    async def _send(self) -> None:
        async with self.lock:
            await asyncio.sleep(0)

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        self.used.append("sync")
        return scored(documents)

    async def acompress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        self.used.append("async")
        await asyncio.gather(self._send(), self._send())  # fails on any other loop
        return scored(documents)


def test_an_async_only_compressor_reranks_sync_and_async_calls(
    store: ChromaStore, session: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="ctxbudget"):
        assert reranked(store, session, compressor_reranker(AsyncOnlyCompressor())) == (True, True)
    assert not caplog.records, caplog.text


def test_an_async_call_uses_the_compressors_async_method_on_the_apps_loop(
    store: ChromaStore, session: str, caplog: pytest.LogCaptureFixture
) -> None:
    compressor = LoopBoundCompressor(used=[])
    mem = memory(store, compressor_reranker(compressor))

    async def app() -> bool:
        await compressor.bind()
        return EVIDENCE in (await mem.aassemble(session, QUERY, budget=BUDGET)).render()

    with caplog.at_level(logging.WARNING, logger="ctxbudget"):
        assert asyncio.run(app())
        assert EVIDENCE in mem.assemble(session, QUERY, budget=BUDGET).render()
    assert compressor.used == ["async", "sync"]
    assert not caplog.records, caplog.text


# -- LlamaIndex postprocessors whose work is async ----------------------------------------


def rescored(nodes: list[NodeWithScore]) -> list[NodeWithScore]:
    for node in nodes:
        node.score = favour([node.node.get_content()])[0]
    return sorted(nodes, key=lambda n: -(n.score or 0.0))


class AsyncOnlyRerank(BaseNodePostprocessor):
    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        raise NotImplementedError("this postprocessor is async only: use apostprocess_nodes")

    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        await asyncio.sleep(0)
        return rescored(nodes)


class BothRerank(BaseNodePostprocessor):
    used: list[str] = []

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        self.used.append("sync")
        return rescored(nodes)

    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        self.used.append("async")
        asyncio.get_running_loop()  # awaited on a loop, as LlamaIndex does
        return rescored(nodes)


def test_an_async_only_postprocessor_reranks_sync_and_async_calls(
    store: ChromaStore, session: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="ctxbudget"):
        assert reranked(store, session, postprocessor_reranker(AsyncOnlyRerank())) == (True, True)
    assert not caplog.records, caplog.text


def test_an_async_call_uses_the_postprocessors_async_method(
    store: ChromaStore, session: str
) -> None:
    rerank = BothRerank(used=[])
    assert reranked(store, session, postprocessor_reranker(rerank)) == (True, True)
    assert rerank.used == ["sync", "async"]


class DuckCompressor:
    """A compressor by shape only (no LangChain base class, no async method)."""

    def compress_documents(self, documents: Sequence[Document], query: str) -> list[Document]:
        return scored(documents)


class DuckRerank:
    """A postprocessor by shape only (no LlamaIndex base class, no async method)."""

    def postprocess_nodes(
        self, nodes: list[NodeWithScore], query_str: str | None = None
    ) -> list[NodeWithScore]:
        return rescored(nodes)


def test_rerankers_by_shape_only_still_rerank_sync_and_async(
    store: ChromaStore, session: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="ctxbudget"):
        assert reranked(store, session, compressor_reranker(DuckCompressor())) == (True, True)  # type: ignore[arg-type]
        assert reranked(store, session, postprocessor_reranker(DuckRerank())) == (True, True)  # type: ignore[arg-type]
    assert not caplog.records, caplog.text
