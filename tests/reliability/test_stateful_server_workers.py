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

import json
import os
import queue
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, NoReturn

import pytest

from ctxbudget.testing import ChromaServer
from tests.memory.stateful_machine import machine_class, run_steps, steps_wanted
from tests.reliability.stateful_worker import REPLY

ROOT = Path(__file__).resolve().parents[2]
ANSWER_TIMEOUT = 120.0  # seconds for one command; far above a normal one


class Worker:
    """One worker process, and its log (stderr) for a failure message."""

    def __init__(self, url: str, collection: str, log: Path) -> None:
        self.log = log
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False"}
        with log.open("wb") as err:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tests.reliability.stateful_worker", url, collection],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                cwd=ROOT,
                env=env,
            )
        self.replies: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._listen, daemon=True).start()
        self.read()  # ready

    def pipes(self) -> tuple[IO[str], IO[str]]:
        stdin, stdout = self.process.stdin, self.process.stdout
        if stdin is None or stdout is None:  # pragma: no cover - both are pipes
            msg = "worker pipes are missing"
            raise RuntimeError(msg)
        return stdin, stdout

    def _listen(self) -> None:  # a thread: the worker's replies, None when it exits
        _, stdout = self.pipes()
        for line in stdout:
            if line.startswith(REPLY):
                self.replies.put(json.loads(line.removeprefix(REPLY)))
        self.replies.put(None)

    def read(self) -> dict[str, Any]:
        try:
            reply = self.replies.get(timeout=ANSWER_TIMEOUT)
        except queue.Empty:
            self.fail(f"no answer in {ANSWER_TIMEOUT:.0f} s")
        if reply is None:
            self.fail("the worker died")
        return reply

    def ask(self, command: dict[str, Any]) -> dict[str, Any]:
        stdin, _ = self.pipes()
        stdin.write(json.dumps(command) + "\n")
        stdin.flush()
        reply = self.read()
        if "crash" in reply:
            raise AssertionError(f"worker raised on {command}:\n{reply['crash']}")
        return reply

    def fail(self, why: str) -> NoReturn:
        log = self.log.read_text(errors="replace")[-3000:]
        pytest.fail(f"worker {self.process.pid}: {why}\n{log}")

    def stop(self) -> None:
        stdin, _ = self.pipes()
        stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


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
    started = [Worker(chroma_server.url, collection, tmp_path / f"worker-{i}.log") for i in (0, 1)]
    yield started
    for worker in started:
        worker.stop()


@pytest.mark.slow  # two processes load the model; about a minute per 1,000 steps
@pytest.mark.integration
def test_workers_on_one_server_agree_with_the_model(workers: list[Worker]) -> None:
    machine = machine_class(2, frozenset({1}), lambda: ServerDriver(workers))
    total = steps_wanted()
    assert run_steps(machine, total) >= total
