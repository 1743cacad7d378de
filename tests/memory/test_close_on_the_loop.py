"""A sync `close()` made inside a coroutine does not wait for a reranker that needs its loop.

An async reranker called by an async call runs on the caller's loop (memory/reading/
coroutines.py). A sync ``close()`` inside a coroutine blocks that loop, so the reranker's
coroutine cannot end, and close waited for it `MODEL_WAIT` (30 s), then warned that the
reranker still ran. Now the reranker's wait ends at once (the reranker counts as failed; its
coroutine is cancelled when the loop runs again), and close returns without the warning.
Real parts: embedded Chroma, the default embedder, tiktoken.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from ctxbudget import ContextMemory
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.errors import MemoryClosedError
from ctxbudget.memory.policy.config import MemoryConfig

SAID = ["I adopted a cat named Miso", "Cute!", "We hiked the hills", "Nice", "Tea?", "Yes"]


async def test_a_sync_close_on_the_loop_ends_the_rerankers_wait(
    tmp_path: Path, embedder: OnnxEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    started = asyncio.Event()
    cancelled: list[bool] = []

    async def slow(query: str, texts: list[str]) -> list[float]:
        started.set()
        try:
            await asyncio.sleep(120)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return [1.0] * len(texts)

    config = MemoryConfig(reranker=slow, reranker_top=20, recent_messages=2)
    memory = ContextMemory(tmp_path / "chroma", embedder=embedder, config=config)
    memory.add_messages(
        "r1", [("user" if n % 2 == 0 else "assistant", t) for n, t in enumerate(SAID)]
    )
    memory.flush()
    call = asyncio.create_task(memory.aassemble("r1", "what is my cat called", budget=200))
    await asyncio.wait_for(started.wait(), 120)
    with caplog.at_level(logging.WARNING, logger="ctxbudget"):
        memory.close()  # sync, on this loop's thread: the reranker's coroutine cannot run
    assert "still runs" not in caplog.text, caplog.text
    try:
        context = await call  # the call the close overtook: its answer, or the closed error
    except MemoryClosedError:
        pass
    else:
        assert "Miso" in context.render()
    await asyncio.sleep(0)  # the loop runs again: the reranker's coroutine is cancelled
    await asyncio.sleep(0)
    assert cancelled == [True]
    with pytest.raises(MemoryClosedError):
        memory.history("r1")
