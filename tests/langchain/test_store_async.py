"""`CtxBudgetStore`'s async methods: the same answers, off the event loop, and cancellable.

``abatch`` runs the batch on the memory's worker threads (`ContextMemory.arun`): the embedder
is called there, never on the loop's thread. A cancelled ``aput`` either has no effect or
finishes before the caller's next call starts, so the value put after it always wins.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.errors import MemoryClosedError
from ctxbudget.memory.context import ContextMemory
from ctxbudget.store.chroma_store import ChromaStore
from langchain_ctxbudget.store import CtxBudgetStore


class ThreadsSeen:
    """The real embedder, noting the thread of each call (an `Embedder`: the seam)."""

    def __init__(self, inner: OnnxEmbedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.threads: list[int] = []

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.threads.append(threading.get_ident())
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        self.threads.append(threading.get_ident())
        return self.inner.embed_query(text)


async def test_async_operations_answer_as_sync_ones_off_the_loop(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    seen = ThreadsSeen(embedder)
    memory = ContextMemory(store=ChromaStore(tmp_path / "chroma", embedder=seen))
    store = CtxBudgetStore(memory, user_at=1)
    try:
        await store.aput(("memories", "alice"), "k1", {"text": "Alice moved to Lisbon"})
        await store.aput(("memories", "alice", "notes"), "k2", {"text": "cello on Sundays"})
        got = await store.aget(("memories", "alice"), "k1")
        assert got is not None and got.value == {"text": "Alice moved to Lisbon"}
        found = await store.asearch(("memories", "alice"), query="where does Alice live?")
        assert found[0].key == "k1" and found[0].score is not None
        listed = await store.alist_namespaces(prefix=("memories", "alice"), max_depth=3)
        assert listed == [("memories", "alice"), ("memories", "alice", "notes")]
        await store.adelete(("memories", "alice"), "k1")
        assert await store.aget(("memories", "alice"), "k1") is None
        assert store.get(("memories", "alice", "notes"), "k2") is not None
        assert seen.threads and threading.get_ident() not in seen.threads
    finally:
        await store.aclose()
        memory.close()


async def test_a_cancelled_put_has_no_effect_or_ends_before_the_next_call(
    memory: ContextMemory,
) -> None:
    store = CtxBudgetStore(memory)
    for round_ in range(6):
        key = f"k{round_}"
        task = asyncio.ensure_future(store.aput(("c",), key, {"v": "cancelled"}))
        if round_ % 2:
            await asyncio.sleep(0)  # let it start on a worker thread half of the time
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        await store.aput(("c",), key, {"v": "after"})
        got = store.get(("c",), key)
        assert got is not None and got.value == {"v": "after"}, (round_, got)


async def test_a_cancelled_batch_that_never_started_writes_nothing(memory: ContextMemory) -> None:
    store = CtxBudgetStore(memory)
    gate = threading.Event()  # the workers are held until the put was cancelled, however slow
    busy = asyncio.ensure_future(memory.arun(gate.wait, 60.0))  # hold one worker
    other = asyncio.ensure_future(memory.arun(gate.wait, 60.0))  # and the other
    await asyncio.sleep(0.05)
    task = asyncio.ensure_future(store.aput(("c",), "queued", {"v": 1}))
    await asyncio.sleep(0.05)  # queued behind them (or not started: no effect either way)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    gate.set()
    assert await asyncio.gather(busy, other) == [True, True]
    assert store.get(("c",), "queued") is None


async def test_an_async_closed_store_says_so(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    store = CtxBudgetStore(path=tmp_path / "chroma", embedder=embedder)
    await store.aput(("a",), "k", {"v": 1})
    await store.aclose()
    await store.aclose()
    with pytest.raises(MemoryClosedError, match="closed"):
        await store.aget(("a",), "k")
    with pytest.raises(MemoryClosedError, match="closed"):
        await store.abatch([])


class Gated(ThreadsSeen):
    """The real embedder; a text holding "slow" waits for the gate (a batch still running)."""

    def __init__(self, inner: OnnxEmbedder) -> None:
        super().__init__(inner)
        self.gate = threading.Event()

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if any("slow" in text for text in texts):
            self.gate.wait(60.0)
        return super().embed_documents(texts)


async def test_a_cancelled_waiting_put_does_not_let_the_next_overtake_a_running_one(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    # Before 2026-12-01: the put after a cancelled waiting one ran beside the slow put before
    # it, which then won; a get after them read the store from before both.
    gated = Gated(embedder)
    memory = ContextMemory(store=ChromaStore(tmp_path / "chroma", embedder=gated))
    store = CtxBudgetStore(memory)
    try:
        first = asyncio.ensure_future(store.aput(("o",), "last", {"text": "slow first"}))
        cancelled = asyncio.ensure_future(store.aput(("o",), "other", {"text": "cancelled"}))
        last = asyncio.ensure_future(store.aput(("o",), "last", {"text": "called last"}))
        read = asyncio.ensure_future(store.aget(("o",), "last"))
        await asyncio.sleep(0.05)
        cancelled.cancel()
        await asyncio.sleep(0.2)  # the put and get after it still wait for the slow one
        assert not last.done() and not read.done()
        gated.gate.set()
        await asyncio.gather(first, last)
        got = await read
        assert got is not None and got.value == {"text": "called last"}
        final = await store.aget(("o",), "last")
        assert final is not None and final.value == {"text": "called last"}
        assert cancelled.cancelled() and await store.aget(("o",), "other") is None
    finally:
        gated.gate.set()
        await store.aclose()
        memory.close()
