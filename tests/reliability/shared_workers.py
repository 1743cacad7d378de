"""Worker processes with a `ContextMemory` each on one Chroma server (`shared_memory_worker`)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ctxbudget.testing import ChromaServer
from tests.reliability.shared_memory_worker import REPLY
from tests.worker_process import ANSWER_TIMEOUT, Worker

__all__ = ["memory_workers", "started", "stop"]


@contextmanager
def started(server: ChromaServer, logs: Path, names: tuple[str, ...]) -> Iterator[list[Worker]]:
    """One worker per name, on one new collection of ``server``; stopped on the way out."""
    collection = f"w-{uuid.uuid4().hex[:8]}"
    workers: list[Worker] = []
    try:
        for name in names:
            workers.append(
                Worker(
                    "tests.reliability.shared_memory_worker",
                    server.url,
                    collection,
                    log=logs / f"worker-{name}.log",
                    reply=REPLY,
                )
            )
        yield workers
    finally:
        for worker in workers:
            stop(worker)


@pytest.fixture(scope="module", name="workers")
def memory_workers(
    chroma_server: ChromaServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[Worker]]:
    """Two workers (a test module's), each with a memory on one collection of the server."""
    with started(chroma_server, tmp_path_factory.mktemp("workers"), ("0", "1")) as running:
        yield running


def stop(worker: Worker) -> None:
    """Stop the worker, let its listener reach the end of its output, then close that too."""
    worker.stop()
    while worker.replies.get(timeout=ANSWER_TIMEOUT) is not None:
        pass
    if worker.process.stdout is not None:
        worker.process.stdout.close()
