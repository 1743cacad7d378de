"""An async reranker bound to the app's event loop, awaited there when the caller is async.

Bug found by probing `ctxbudget.memory.reading.coroutines`: an async reranker whose client is
bound to the app's own loop (an ``asyncio.Lock``, ``Queue`` or connection pool made and used
there) failed every call of ``aassemble`` / ``acandidates`` with ``RuntimeError: ... is bound to
a different event loop``, because its coroutine ran on ctxbudget's own loop thread: logged
once, it was never used. Now an async caller's reranker coroutine is awaited on the caller's
loop; a sync caller's still runs on the one loop ctxbudget keeps (a sync call made inside a
coroutine too: that loop is blocked by the call).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from rerank_setup import EVIDENCE, QUERY, LoopBound, session_of

from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.store.chroma_store import ChromaStore

LOGGER = "ctxbudget.memory.reading.rerank"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder) -> ChromaStore:
    folder: Path = tmp_path_factory.mktemp("rerank-loop")
    return ChromaStore(folder / "db", embedder=embedder)


def memory(store: ChromaStore, reranker: object, **config: object) -> ContextMemory:
    """A memory whose reranker's scores alone order what it sees (``reranker_weight=1``)."""
    settings = MemoryConfig(
        recent_messages=4,
        reranker=reranker,
        reranker_weight=1.0,
        **config,  # type: ignore[arg-type]
    )
    return ContextMemory(store=store, config=settings, write_behind=False, inclusion_log=False)


def rerank_threads(before: set[threading.Thread]) -> list[threading.Thread]:
    """The reranker threads running now that were not in ``before`` (another test's may run)."""
    return [t for t in threading.enumerate() if t.name == "ctxbudget-rerank" and t not in before]


def loop_of(threads: list[str]) -> object:
    async def reranker(query: str, texts: Sequence[str]) -> list[float]:
        threads.append(threading.current_thread().name)
        return [1.0 if t == EVIDENCE else 0.0 for t in texts]

    return reranker


async def test_a_reranker_bound_to_the_apps_loop_reranks_its_async_calls(
    store: ChromaStore, caplog: pytest.LogCaptureFixture
) -> None:
    reranker = LoopBound()
    await reranker.bind()
    mem = memory(store, reranker)
    session = session_of(mem)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        ctx = await mem.aassemble(session, QUERY, budget=130)
        found = await mem.acandidates(session, QUERY, budget=130)
    assert not caplog.records, caplog.text  # not "bound to a different event loop"
    assert reranker.loops == [asyncio.get_running_loop()] * 2
    assert EVIDENCE in [it.text for it in ctx.included]
    assert found.retrieved[0].text == EVIDENCE


async def test_the_apps_loop_stays_free_while_its_reranker_runs(store: ChromaStore) -> None:
    ticks: list[float] = []

    async def slow(query: str, texts: Sequence[str]) -> list[float]:
        await asyncio.sleep(0.3)  # the loop serves other tasks meanwhile
        return [1.0 if t == EVIDENCE else 0.0 for t in texts]

    async def ticking() -> None:
        for _ in range(5):
            ticks.append(time.monotonic())
            await asyncio.sleep(0.02)

    mem = memory(store, slow, reranker_timeout=10)
    session = session_of(mem)
    found, _ = await asyncio.gather(mem.acandidates(session, QUERY, budget=130), ticking())
    assert found.retrieved[0].text == EVIDENCE
    assert len(ticks) == 5


async def test_a_late_reranker_on_the_apps_loop_is_skipped_not_waited_for(
    store: ChromaStore, caplog: pytest.LogCaptureFixture
) -> None:
    release = asyncio.Event()

    async def hung(query: str, texts: Sequence[str]) -> list[float]:
        await release.wait()  # bound to the app's loop: it works there only
        return [0.0] * len(texts)

    mem = memory(store, hung, reranker_timeout=0.3)
    session = session_of(mem)
    before = set(threading.enumerate())
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        started = time.monotonic()
        await mem.acandidates(session, QUERY, budget=130)
        await mem.acandidates(session, QUERY, budget=130)  # skipped: the first still runs
        assert time.monotonic() - started < 5
        release.set()
        for _ in range(100):  # the late call ends on the app's loop
            await asyncio.sleep(0.02)
            if not rerank_threads(before):
                break
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1 and "took longer than reranker_timeout=0.3s" in warned[0]
    assert not rerank_threads(before)


def test_an_async_app_that_ended_leaves_no_reranker_thread_behind(store: ChromaStore) -> None:
    async def hung(query: str, texts: Sequence[str]) -> list[float]:
        await asyncio.sleep(30)
        return [0.0] * len(texts)

    mem = memory(store, hung, reranker_timeout=0.2)
    session = session_of(mem)
    before = set(threading.enumerate())
    asyncio.run(mem.acandidates(session, QUERY, budget=130))  # its loop closes under the call
    deadline = time.monotonic() + 5
    while rerank_threads(before):
        assert time.monotonic() < deadline, "the late reranker's thread still waits"
        time.sleep(0.02)


def test_a_sync_caller_keeps_the_one_rerank_loop(store: ChromaStore) -> None:
    threads: list[str] = []
    mem = memory(store, loop_of(threads))
    session = session_of(mem)
    assert mem.candidates(session, QUERY, budget=130).retrieved[0].text == EVIDENCE
    assert threads == ["ctxbudget-rerank-loop"]


async def test_a_sync_call_inside_a_coroutine_keeps_the_one_rerank_loop(
    store: ChromaStore,
) -> None:
    threads: list[str] = []
    mem = memory(store, loop_of(threads))
    session = session_of(mem)
    # The app's loop is blocked by this call: the reranker cannot run there.
    assert mem.candidates(session, QUERY, budget=130).retrieved[0].text == EVIDENCE
    assert (await mem.acandidates(session, QUERY, budget=130)).retrieved[0].text == EVIDENCE
    assert threads == ["ctxbudget-rerank-loop", threading.current_thread().name]


async def test_a_sync_close_on_the_loop_its_reranker_awaits_does_not_wait_it_out(
    store: ChromaStore, caplog: pytest.LogCaptureFixture
) -> None:
    # Before 2026-12-01 the close first waited for the running aassemble, which waited for its
    # reranker's coroutine on the loop the close blocked: the whole reranker_timeout (15 s).
    started = asyncio.Event()

    async def slow(query: str, texts: Sequence[str]) -> list[float]:
        started.set()
        await asyncio.sleep(60)
        return [0.0] * len(texts)

    mem = memory(store, slow, reranker_timeout=15.0)
    session = session_of(mem)
    call = asyncio.ensure_future(mem.acandidates(session, QUERY, budget=130))
    await asyncio.wait_for(started.wait(), 30)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        began = time.monotonic()
        mem.close()  # a sync close inside a coroutine: it blocks this loop
        took = time.monotonic() - began
        found = await call  # the call ends with the candidates as they were
    assert took < 10, took
    assert found.retrieved
    warned = [r.getMessage() for r in caplog.records]
    assert any("the memory closed on the thread of the event loop" in w for w in warned), warned
