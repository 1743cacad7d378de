"""`CtxBudgetStore` answers as LangGraph's `InMemoryStore` does (`lg_store_machine`), embedded.

Two `CtxBudgetStore` objects, each over its own `ContextMemory` on one folder, take turns
(sync and async); with ``user_at=1`` too, where a search that names no user reads every
user's items. The same machine runs on a Chroma server with two worker processes in
`test_store_server_workers.py`.
"""

from __future__ import annotations

import asyncio
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis.stateful import run_state_machine_as_test
from lg_store_commands import run
from lg_store_machine import Actor, SideBySide, machine_settings

from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.memory.context import ContextMemory
from ctxbudget.store.chroma_store import ChromaStore
from langchain_ctxbudget.store import CtxBudgetStore


def _actors(
    folder: Path, embedder: OnnxEmbedder, user_at: int | None
) -> Callable[[], tuple[list[Actor], Callable[[], None]]]:
    def open_actors() -> tuple[list[Actor], Callable[[], None]]:
        namespace = f"sbs-{uuid.uuid4().hex[:10]}"
        stores = [
            CtxBudgetStore(
                ContextMemory(store=ChromaStore(folder, embedder=embedder), namespace=namespace),
                user_at=user_at,
            )
            for _ in range(2)
        ]

        def actor(store: CtxBudgetStore) -> Actor:
            return lambda command, use_async: run(store, command, use_async=use_async)

        def close() -> None:
            for store in stores:
                store.memory.close()

        return [actor(s) for s in stores], close

    return open_actors


@pytest.mark.parametrize("user_at", [None, 1], ids=["shared", "user_at=1"])
def test_the_store_answers_as_in_memory_store(
    tmp_path: Path, embedder: OnnxEmbedder, user_at: int | None
) -> None:
    class Embedded(SideBySide):
        pass

    Embedded.open_actors = staticmethod(_actors(tmp_path / "chroma", embedder, user_at))  # type: ignore[assignment]
    Embedded.user_at = user_at
    try:
        run_state_machine_as_test(Embedded, settings=machine_settings(8, 25))
    finally:
        shutil.rmtree(tmp_path / "chroma", ignore_errors=True)


def test_a_put_and_its_reads_in_one_async_batch(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    store = CtxBudgetStore(path=tmp_path / "chroma", embedder=embedder)
    try:
        command: list[dict[str, Any]] = [
            {"op": "put", "ns": ["a"], "key": "k", "value": {"x": 1}, "index": None},
            {"op": "get", "ns": ["a"], "key": "k"},
        ]
        first = run(store, command, use_async=True)
        assert first[1] is None  # reads see the store as it was before the batch's puts
        got = asyncio.run(store.aget(("a",), "k"))
        assert got is not None and got.value == {"x": 1}
    finally:
        store.close()
