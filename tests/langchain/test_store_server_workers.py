"""`CtxBudgetStore` in two worker processes on one Chroma server answers as `InMemoryStore`.

The side-by-side machine (`lg_store_machine`) with its actors in processes
(`lg_store_worker`): each worker has its own `ContextMemory` over the server and a
`CtxBudgetStore` over it; the machine's steps go to one worker or the other, interleaved, and
every answer is compared with LangGraph's `InMemoryStore` here. Workers share nothing but the
server. Each example works in a fresh namespace of one collection.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, NoReturn

import pytest
from hypothesis.stateful import run_state_machine_as_test
from lg_store_machine import Actor, SideBySide, machine_settings

from ctxbudget.testing import ChromaServer

ROOT = Path(__file__).resolve().parents[2]
REPLY = "@@reply "
ANSWER_TIMEOUT = 120.0  # seconds for one command; far above a normal one


class Worker:
    """One worker process (`lg_store_worker`), and its log (stderr) for a failure message."""

    def __init__(self, url: str, collection: str, user_at: int | None, log: Path) -> None:
        self.log = log
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False"}
        at = "-" if user_at is None else str(user_at)
        with log.open("wb") as err:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tests.langchain.lg_store_worker", url, collection, at],
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

    def _pipes(self) -> tuple[IO[str], IO[str]]:
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None
        return stdin, stdout

    def _listen(self) -> None:  # a thread: the worker's replies, None when it exits
        for line in self._pipes()[1]:
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
        stdin = self._pipes()[0]
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
        self._pipes()[0].close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture(params=[None, 1], ids=["shared", "user_at=1"])
def workers(
    request: pytest.FixtureRequest, chroma_server: ChromaServer, tmp_path: Path
) -> Iterator[tuple[list[Worker], int | None]]:
    collection = f"lgstore-{uuid.uuid4().hex[:8]}"
    user_at = request.param
    started = [
        Worker(chroma_server.url, collection, user_at, tmp_path / f"worker-{i}.log") for i in (0, 1)
    ]
    yield started, user_at
    for worker in started:
        worker.stop()


def _actors(workers: list[Worker]) -> Callable[[], tuple[list[Actor], Callable[[], None]]]:
    def open_actors() -> tuple[list[Actor], Callable[[], None]]:
        namespace = f"ex-{uuid.uuid4().hex[:12]}"
        for worker in workers:
            worker.ask({"open": namespace})

        def actor(worker: Worker) -> Actor:
            return lambda command, use_async: worker.ask({"run": command, "async": use_async})[
                "answer"
            ]

        def close() -> None:
            for worker in workers:
                worker.ask({"close": True})

        return [actor(w) for w in workers], close

    return open_actors


@pytest.mark.slow  # two processes load the model
@pytest.mark.integration
def test_two_workers_on_one_server_answer_as_in_memory_store(
    workers: tuple[list[Worker], int | None],
) -> None:
    started, user_at = workers

    class OnServer(SideBySide):
        pass

    OnServer.open_actors = staticmethod(_actors(started))  # type: ignore[assignment]
    OnServer.user_at = user_at
    run_state_machine_as_test(OnServer, settings=machine_settings(4, 25))
