"""The async middleware awaits an async reranker on the app's own event loop.

Bug found by probing `CtxBudgetMiddleware.awrap_model_call` with a reranker bound to the app's
loop (`rerank_setup.LoopBound`): its coroutine ran on ctxbudget's own loop thread and failed
every call with ``RuntimeError: ... is bound to a different event loop``, logged once.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from lc_fakes import RecordingChatModel
from rerank_setup import QUERY, LoopBound, memory, session_of

from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.store.chroma_store import ChromaStore
from langchain_ctxbudget import CtxBudgetMiddleware


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder) -> ChromaStore:
    folder: Path = tmp_path_factory.mktemp("lc-rerank-loop")
    return ChromaStore(folder / "db", embedder=embedder)


async def test_the_async_middleware_reranks_on_the_apps_loop(
    store: ChromaStore, caplog: pytest.LogCaptureFixture
) -> None:
    reranker = LoopBound()
    await reranker.bind()
    mem = memory(store, reranker)
    session = session_of(mem)
    model = RecordingChatModel(messages=iter(["Noted."]))
    agent = create_agent(
        model, middleware=[CtxBudgetMiddleware(model="gpt-4o", budget=300, memory=mem)]
    )
    config = {"configurable": {"thread_id": session}}
    with caplog.at_level(logging.WARNING, logger="ctxbudget.memory.reading.rerank"):
        await agent.ainvoke({"messages": [HumanMessage(QUERY)]}, config)
    assert not caplog.records, caplog.text  # not "bound to a different event loop"
    assert reranker.loops == [asyncio.get_running_loop()]
