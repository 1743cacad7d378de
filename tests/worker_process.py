"""A worker process a test drives: JSON commands on its stdin, one JSON reply line on its stdout.

Used by the tests that put their actors in processes on one Chroma server
(tests/langchain/test_store_server_workers.py, tests/reliability/test_stateful_server_workers.py).
The worker runs as ``python -m MODULE ARGS...`` from the repository root and prefixes each reply
line with its ``REPLY`` marker (libraries may print too); an exception comes back as
``{"crash": traceback}``. Its stderr goes to a log file, whose end a failure message shows.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any, NoReturn

import pytest

__all__ = ["ANSWER_TIMEOUT", "Worker"]

ROOT = Path(__file__).resolve().parents[1]
ANSWER_TIMEOUT = 120.0  # seconds for one command; far above a normal one


class Worker:
    """One worker process (``python -m module *args``) and its log (stderr) for failure messages."""

    def __init__(self, module: str, *args: str, log: Path, reply: str) -> None:
        self.log = log
        self.reply = reply
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False"}
        with log.open("wb") as err:
            self.process = subprocess.Popen(
                [sys.executable, "-m", module, *args],
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
        if stdin is None or stdout is None:  # pragma: no cover - both are pipes
            msg = "worker pipes are missing"
            raise RuntimeError(msg)
        return stdin, stdout

    def _listen(self) -> None:  # a thread: the worker's replies, None when it exits
        _, stdout = self._pipes()
        for line in stdout:
            if line.startswith(self.reply):
                self.replies.put(json.loads(line.removeprefix(self.reply)))
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
        stdin, _ = self._pipes()
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
        stdin, _ = self._pipes()
        stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
