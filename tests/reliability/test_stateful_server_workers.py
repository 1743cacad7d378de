"""Two worker processes on one Chroma server agree with a model of what is stored.

The model-based test of tests/memory/test_stateful_memory.py, with its actors in processes:
each worker (`stateful_worker.py`) has its own `ContextMemory(store=ChromaStore(url=...))`,
entity memory on in one of them, and runs the commands this process sends it; the model and
every check stay here. Workers share no lock and no cache: only what the server holds, and the
stamps in it, keep their copies of a session, its access counts and its entities true. Each
example works in a fresh namespace of one collection.

Steps: as the embedded test (``CTXBUDGET_STATEFUL_STEPS``, 1,000 in CI, else 300).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxbudget.testing import ChromaServer
from tests.memory.stateful_machine import machine_class, run_steps, steps_wanted
from tests.reliability.stateful_worker import REPLY
from tests.worker_process import Worker


class ServerDriver:
    """The workers, each with a memory opened on a fresh namespace for one example."""

    def __init__(self, workers: list[Worker]) -> None:
        self.workers = workers
        namespace = f"ex-{uuid.uuid4().hex[:12]}"
        for index, worker in enumerate(workers):
            worker.ask({"op": "open", "namespace": namespace, "entities": index == 1})

    def run(self, actor: int, command: dict[str, Any]) -> dict[str, Any]:
        return self.workers[actor].ask(command)

    def close(self) -> None:
        for worker in self.workers:
            worker.ask({"op": "close"})


@pytest.fixture
def workers(chroma_server: ChromaServer, tmp_path: Path) -> Iterator[list[Worker]]:
    collection = f"stateful-{uuid.uuid4().hex[:8]}"
    started = [
        Worker(
            "tests.reliability.stateful_worker",
            chroma_server.url,
            collection,
            log=tmp_path / f"worker-{i}.log",
            reply=REPLY,
        )
        for i in (0, 1)
    ]
    yield started
    for worker in started:
        worker.stop()


@pytest.mark.slow  # two processes load the model; about a minute per 1,000 steps
@pytest.mark.integration
def test_workers_on_one_server_agree_with_the_model(workers: list[Worker]) -> None:
    machine = machine_class(2, frozenset({1}), lambda: ServerDriver(workers))
    total = steps_wanted()
    assert run_steps(machine, total) >= total
