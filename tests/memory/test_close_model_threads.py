"""Closing waits for the user's models still running on the memory's threads, within a bound.

- A custom entity extractor asked about new messages in the background (``ctxbudget-entities``)
  and a reranker's call (``ctxbudget-rerank``: one that outlived its ``reranker_timeout``, or one
  a sync call on another thread still waits for) end before ``close``/``aclose`` returns: after
  it, nothing of the memory touches the user's model or the closed store.
- A model that never answers does not make close hang: close waits `closing.MODEL_WAIT`
  seconds at most, then returns and one warning names the thread and the model it still runs.

Real parts: an embedded Chroma folder and the default embedder; the models are held at a gate.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.memory import closing
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.entities import Mention
from ctxbudget.memory.policy.config import MemoryConfig
from tests.memory.test_close_waits import folder_free, leftover

TURNS = [f"turn {n}: Ana takes the night train to Porto at {n} pm" for n in range(8)]


class Gated:
    """A model (an entity extractor and a reranker) that waits at a gate once it is asked."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.answered = 0  # calls that returned
        self.lock = threading.Lock()

    def _held(self) -> None:
        self.entered.set()
        self.gate.wait()
        with self.lock:
            self.answered += 1

    def extract(self, texts: Sequence[str], *, speakers: Sequence[str | None]) -> object:
        self._held()
        return [[Mention("Ana", "person")] if "Ana" in t else [] for t in texts]

    def __call__(self, query: str, texts: Sequence[str]) -> list[float]:
        self._held()
        return [float(n) for n in range(len(texts))]


@pytest.fixture
def model() -> Iterator[Gated]:
    model = Gated()
    yield model
    model.gate.set()


def _memory(folder: Path, embedder: OnnxEmbedder, model: Gated, held: str) -> ContextMemory:
    """A memory whose ``held`` thread (``entities``, ``late`` or ``running``) waits at the gate."""
    if held == "entities":
        config = MemoryConfig(entities=True, recent_messages=2)
        memory = ContextMemory(
            folder, embedder=embedder, config=config, entity_extractor=model, inclusion_log=False
        )
        memory.add_messages("s1", [("user", t) for t in TURNS])  # asked in the background
        model.entered.wait()
        return memory
    timeout = 0.01 if held == "late" else threading.TIMEOUT_MAX
    config = MemoryConfig(recent_messages=2, reranker=model, reranker_timeout=timeout)
    memory = ContextMemory(folder, embedder=embedder, config=config, inclusion_log=False)
    memory.add_messages("s1", [("user", t) for t in TURNS])
    memory.flush()
    if held == "late":
        memory.candidates("s1", "when does Ana's train leave?", budget=300)  # went late
    else:  # a sync call on another thread, waiting for its reranker when the close comes

        def call() -> None:
            try:
                memory.candidates("s1", "when does Ana's train leave?", budget=300)
            except Exception:  # noqa: BLE001, S110 - overtaken by the close: its error is not ours
                pass

        threading.Thread(target=call, daemon=True).start()
    model.entered.wait()
    return memory


async def _returns_while_held(close: asyncio.Future[None]) -> bool:
    # Not a timing assertion: a close that waits never returns while the gate is shut.
    done, _ = await asyncio.wait([close], timeout=0.5)
    return bool(done)


HELD = ["entities", "late", "running"]


@pytest.mark.parametrize("how", ["close", "aclose"])
@pytest.mark.parametrize("held", HELD)
async def test_close_returns_only_once_the_models_thread_ended(
    tmp_path: Path, embedder: OnnxEmbedder, model: Gated, held: str, how: str
) -> None:
    before = set(threading.enumerate())
    folder = tmp_path / "chroma"
    memory = await asyncio.to_thread(_memory, folder, embedder, model, held)
    call = memory.aclose() if how == "aclose" else asyncio.to_thread(memory.close)
    closing_ = asyncio.ensure_future(call)
    try:
        returned_early = await _returns_while_held(closing_)
    finally:
        model.gate.set()
    await closing_
    alive = leftover(before)
    assert not returned_early, f"{how} returned while the {held} model still ran"
    assert not alive, f"threads outlived {how}(): {alive}"
    assert model.answered >= 1
    assert folder_free(folder)


@pytest.mark.parametrize("held", ["entities", "late"])
def test_a_model_that_never_answers_does_not_hang_close_and_is_named(
    tmp_path: Path,
    embedder: OnnxEmbedder,
    model: Gated,
    held: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(closing, "MODEL_WAIT", 0.05)  # the bound, short for the test
    folder = tmp_path / "chroma"
    memory = _memory(folder, embedder, model, held)
    with caplog.at_level(logging.WARNING, logger="ctxbudget.memory.closing"):
        memory.close()  # the gate stays shut: it returns past the bound
    thread = "ctxbudget-entities" if held == "entities" else "ctxbudget-rerank"
    said = [r.getMessage() for r in caplog.records if r.name == "ctxbudget.memory.closing"]
    assert len(said) == 1, said
    assert thread in said[0]
    assert "Gated" in said[0]
    assert folder_free(folder)  # the rest of the close ran
    assert model.answered == 0
