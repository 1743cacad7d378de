"""Two closes of one `CtxBudgetStore` at once: each returns only once the store is closed.

A close waits for the TTL sweep running and closes the memory the store opened. Until
2026-11-30 a second ``close()``/``aclose()`` (an app's shutdown hook beside an ``async with``,
a thread and a task) returned at once while the first still waited, so the folder was still
held and the memory open when the caller went on.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from unittest.mock import patch

import pytest

from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.errors import MemoryClosedError
from langchain_ctxbudget.store import CtxBudgetStore

HELD = 0.3  # seconds a second close must not return while the first is held


@pytest.mark.parametrize("second", ["aclose", "close in a thread"])
async def test_a_second_close_returns_once_the_first_ended(
    tmp_path: Path, embedder: OnnxEmbedder, second: str
) -> None:
    store = CtxBudgetStore(path=tmp_path / "chroma", embedder=embedder)
    await store.aput(("notes",), "k", {"text": "kept"}, index=False)
    sweeping, gate = threading.Event(), threading.Event()

    def held_sweep() -> int:  # a sweep that ends when the test says
        sweeping.set()
        gate.wait(60)
        return 0

    with patch.object(store.memory, "sweep_values", held_sweep):
        store.start_ttl_sweeper(sweep_interval_minutes=0.0001)
        assert await asyncio.to_thread(sweeping.wait, 30)
        first = asyncio.create_task(store.aclose())
        await asyncio.sleep(0.05)
        if second == "aclose":
            other: asyncio.Future[None] = asyncio.ensure_future(store.aclose())
        else:
            other = asyncio.ensure_future(asyncio.to_thread(store.close))
        done, _ = await asyncio.wait({first, other}, timeout=HELD)
        assert not done, "a close returned while the sweep it waits for still ran"
        gate.set()
        await asyncio.wait_for(asyncio.gather(first, other), 60)
    with pytest.raises(MemoryClosedError):
        store.memory.get_value(("notes",), "k")  # the memory it opened is closed
    again = CtxBudgetStore(path=tmp_path / "chroma", embedder=embedder)  # the folder is free
    got = again.get(("notes",), "k")
    assert got is not None and got.value == {"text": "kept"}
    again.close()
    await store.aclose()  # later: at once
    store.close()
