"""The LlamaIndex memory's ``aget`` awaits an async reranker on the app's own event loop.

Bug found by probing `CtxBudgetMemory.aget` with a reranker bound to the app's loop
(`rerank_setup.LoopBound`): its coroutine ran on ctxbudget's own loop thread and failed every
call with ``RuntimeError: ... is bound to a different event loop``, logged once.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from rerank_setup import EVIDENCE, QUERY, LoopBound, memory, session_of

from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.store.chroma_store import ChromaStore
from llama_index.ctxbudget import CtxBudgetMemory


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder) -> ChromaStore:
    folder: Path = tmp_path_factory.mktemp("li-rerank-loop")
    return ChromaStore(folder / "db", embedder=embedder)


async def test_the_memorys_aget_reranks_on_the_apps_loop(
    store: ChromaStore, caplog: pytest.LogCaptureFixture
) -> None:
    reranker = LoopBound()
    await reranker.bind()
    mem = memory(store, reranker)
    session = session_of(mem)
    door = CtxBudgetMemory.from_defaults(memory=mem, session_id=session, token_limit=160)
    with caplog.at_level(logging.WARNING, logger="ctxbudget.memory.reading.rerank"):
        sent = await door.aget(input=QUERY)
    assert not caplog.records, caplog.text  # not "bound to a different event loop"
    assert reranker.loops == [asyncio.get_running_loop()]
    assert any(EVIDENCE in str(m.content) for m in sent)
