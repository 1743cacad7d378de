"""Async calls cancelled, timed out and closed under load, as a demanding app does them.

Batches cancelled at every point (``wait_for`` with tiny timeouts, ``task.cancel()`` after a
few loop turns): each batch is stored whole or not at all, every acknowledged message exactly
once, and the next call works. ``aclose`` while calls from many tasks run, twice at once: each
call ends with its result or `MemoryClosedError`, nothing acknowledged is lost, and when
``aclose`` returns no worker thread of the memory is alive (one often still was). A call that
raises `StopIteration` (an embedder's ``next()`` on an empty iterator) ends with `RuntimeError`
from it, as a coroutine does; it hung for ever, a timeout too. Real parts: an embedded Chroma in
``tmp_path``, the default embedder.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import pytest

from ctxbudget import AssembledContext, MemoryClosedError
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.memory.context import ContextMemory


def workers() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("ctxbudget_")}


async def test_cancelled_batches_are_stored_whole_or_not_and_acknowledged_ones_once(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    memory = ContextMemory(tmp_path / "chroma", embedder=embedder, inclusion_log=False)
    acknowledged: list[str] = []
    batches: list[list[str]] = []
    for n in range(24):
        batch = [f"batch {n} line {j} about trains" for j in range(3)]
        batches.append(batch)
        call = memory.aadd_messages("s1", [("user", t) for t in batch], user_id="u1")
        try:
            await asyncio.wait_for(call, timeout=(0, 0.0005, 0.002, 0.01)[n % 4])
            acknowledged.extend(batch)
        except TimeoutError:
            pass
        task = asyncio.ensure_future(memory.aadd_message("s1", "assistant", f"reply {n}"))
        for _ in range(n % 3):
            await asyncio.sleep(0)
        task.cancel()
        try:
            await task
            acknowledged.append(f"reply {n}")
        except asyncio.CancelledError:
            pass
    assembled = await memory.aassemble("s1", "trains", budget=400)  # the next call works
    assert assembled.included_ids
    await memory.aclose()

    reopened = ContextMemory(tmp_path / "chroma", embedder=embedder, inclusion_log=False)
    stored = Counter(r.text for r in reopened.history("s1"))
    reopened.close()
    assert [t for t, n in stored.items() if n > 1] == []
    assert [t for t in acknowledged if t not in stored] == []
    assert [b for b in batches if 0 < sum(t in stored for t in b) < len(b)] == []


async def test_aclose_under_load_ends_every_call_cleanly_and_leaves_no_worker_thread(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    before = workers()
    for round_ in range(8):
        folder = tmp_path / f"chroma-{round_}"
        memory = ContextMemory(folder, embedder=embedder, inclusion_log=False)
        await memory.aadd_messages("s1", [("user", f"turn {n} about trains") for n in range(4)])
        texts = [f"in flight {round_}-{n}" for n in range(6)]
        calls: list[asyncio.Future[object]] = [
            asyncio.ensure_future(memory.aadd_message("s1", "user", t)) for t in texts
        ]
        calls.append(asyncio.ensure_future(memory.aassemble("s1", "trains", budget=200)))
        await asyncio.sleep(0)
        ended = await asyncio.gather(
            memory.aclose(), memory.aclose(), *calls, return_exceptions=True
        )
        errors = [e for e in ended if isinstance(e, BaseException)]
        assert all(isinstance(e, MemoryClosedError) for e in errors), errors
        assert workers() - before == set(), f"round {round_}: a worker thread outlived aclose"
        reopened = ContextMemory(folder, embedder=embedder, inclusion_log=False)
        stored = {r.text for r in reopened.history("s1")}
        reopened.close()
        acknowledged = [t for t, e in zip(texts, ended[2:], strict=False) if isinstance(e, str)]
        assert [t for t in acknowledged if t not in stored] == []


class Exhausted:
    """The real default embedder; once ``stop`` is set, ``next()`` on an empty iterator."""

    def __init__(self, model: OnnxEmbedder) -> None:
        self.model = model
        self.name = model.name
        self.stop = False

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if self.stop:
            next(iter([]))
        return self.model.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        if self.stop:
            next(iter([]))
        return self.model.embed_query(text)


def ended(call: Callable[[], Awaitable[object]], seconds: float = 30.0) -> object:
    """What ``call()`` gave or raised, on a loop of its own; fails if it never ended."""
    out: list[object] = []

    def run() -> None:
        async def main() -> object:
            return await asyncio.wait_for(call(), seconds / 3)

        try:
            out.append(asyncio.run(main()))
        except BaseException as exc:  # noqa: BLE001 - the test looks at what it raised
            out.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "the call never ended, its timeout neither"
    return out[0]


def test_a_call_raising_stop_iteration_ends_with_runtime_error_and_the_next_works(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    model = Exhausted(embedder)
    memory = ContextMemory(tmp_path / "chroma", embedder=model, write_behind=False)
    memory.add_messages("s1", [("user", f"turn {n} about trains") for n in range(4)])
    model.stop = True
    with pytest.raises(StopIteration):
        memory.search("trains", k=2)  # the sync call: as raised
    calls: dict[str, Callable[[], Awaitable[object]]] = {
        "asearch": lambda: memory.asearch("trains", k=2),
        "aassemble": lambda: memory.aassemble("s1", "trains", budget=300),
        "aadd_message": lambda: memory.aadd_message("s1", "user", "more trains"),
        "arun": lambda: memory.arun(next, iter([])),
    }
    for name, call in calls.items():
        error = ended(call)
        assert isinstance(error, RuntimeError), (name, error)
        assert isinstance(error.__cause__, StopIteration), name
    model.stop = False
    assert [h.text for h in memory.history("s1")][-1] == "turn 3 about trains"  # nothing added
    after = ended(lambda: memory.aassemble("s1", "trains", budget=300))
    assert isinstance(after, AssembledContext) and len(after.included_ids) == 5  # and the query
    memory.close()
