"""Closing a memory while its async calls run: they end first, then the store is released.

A call already on a worker when ``aclose`` (or ``close`` from another thread) starts is not cut:
the store stays open until it ends, so it returns its own result, or the closed error when it
reaches a part of the memory after close began; never the Chroma client's "client has been
closed". Calls that start afterwards get `MemoryClosedError`, and no worker thread is left.
Real parts: a Chroma server on loopback or an embedded folder, the default embedder.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import pytest

from ctxbudget import AssembledContext, MemoryClosedError
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.memory.awaitable import AsyncRunner
from ctxbudget.memory.context import ContextMemory
from tests.conftest import StoreFactory


class HeldEmbedder:
    """The real default embedder, which waits at a gate once ``hold`` is set."""

    def __init__(self, model: OnnxEmbedder) -> None:
        self.model = model
        self.name = model.name
        self.hold = False
        self.entered = threading.Semaphore(0)
        self.gate = threading.Event()
        # Threads before the memory opened: another test's memory never closed holds some.
        self.earlier = set(threading.enumerate())

    def _wait(self) -> None:
        if self.hold:
            self.entered.release()
            self.gate.wait()

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self._wait()
        return self.model.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        self._wait()
        return self.model.embed_query(text)


@pytest.fixture
async def held(
    open_store: StoreFactory, embedder: OnnxEmbedder
) -> AsyncIterator[tuple[ContextMemory, HeldEmbedder]]:
    gated = HeldEmbedder(embedder)
    store = open_store(embedder=gated)  # an embedded folder, then a server's collection
    memory = ContextMemory(store=store, inclusion_log=False)
    turns = [("user", f"turn {n} about trains to Porto") for n in range(30)]
    await memory.aadd_messages("s1", turns, user_id="u1")
    await memory.aflush()
    gated.hold = True
    yield memory, gated
    gated.gate.set()
    await memory.aclose()


async def _ended(call: Awaitable[Any]) -> object:
    try:
        return await call
    except MemoryClosedError as exc:
        return exc


CLOSERS: dict[str, Callable[[ContextMemory], Awaitable[None]]] = {
    "aclose": lambda memory: memory.aclose(),
    "close from another thread": lambda memory: asyncio.to_thread(memory.close),
}


CALLERS: dict[str, Callable[[ContextMemory], Awaitable[Any]]] = {
    "aassemble": lambda memory: memory.aassemble("s1", "trains?", budget=300),
    "assemble on a thread": lambda memory: asyncio.to_thread(
        memory.assemble, "s1", "trains?", budget=300
    ),
}


@pytest.mark.parametrize("caller", list(CALLERS))
@pytest.mark.parametrize("closer", list(CLOSERS))
async def test_closing_waits_for_the_call_in_flight(
    held: tuple[ContextMemory, HeldEmbedder], closer: str, caller: str
) -> None:
    memory, gated = held
    running = asyncio.create_task(_ended(CALLERS[caller](memory)))
    await asyncio.to_thread(gated.entered.acquire)  # on a worker, held in the middle of the call
    closing = asyncio.create_task(CLOSERS[closer](memory))
    await asyncio.sleep(0.2)
    closed_under_the_call = closing.done()
    with pytest.raises(MemoryClosedError):
        await memory.ahistory("s1")  # a new call is refused at once
    gated.gate.set()
    got = await running  # not the Chroma client's RuntimeError ("the client has been closed")
    await closing
    # The call ends with its result: its own inner calls (assemble asks candidates, then the
    # counter) are not refused by the close that began under it (they were until 2026-12-01).
    assert isinstance(got, AssembledContext)
    assert not closed_under_the_call  # the store was not released under the running call
    new = set(threading.enumerate()) - gated.earlier  # not another test's memory's threads
    workers = [t for t in new if t.name.startswith("ctxbudget_")]
    for worker in workers:  # each ends once its last call returned
        await asyncio.to_thread(worker.join, 10)
    assert not [t for t in workers if t.is_alive()]
    with pytest.raises(MemoryClosedError):
        await memory.aassemble("s1", "one?", budget=200)


async def test_close_inside_a_call_does_not_wait_for_itself(
    held: tuple[ContextMemory, HeldEmbedder],
) -> None:
    memory, gated = held
    gated.hold = False

    def turn() -> int:
        count = len(memory.history("s1"))
        memory.close()
        return count

    assert await asyncio.wait_for(memory.arun(turn), timeout=60) == 30
    with pytest.raises(MemoryClosedError):
        await memory.ahistory("s1")


async def test_a_runner_closed_keeps_no_thread_for_a_call_that_raced_the_close() -> None:
    runner = AsyncRunner()
    assert await runner.run(threading.current_thread) is not threading.current_thread()
    runner.close()
    worker = await runner.run(threading.current_thread)  # a call that passed its check first
    await asyncio.to_thread(worker.join, 10)
    assert not worker.is_alive()
