"""Two processes on one Chroma server: one closes while the other writes; no turn is lost.

Each worker process has its own `ContextMemory` on the test's Chroma server (embedded Chroma
belongs to one process: docs/reliability.md), in one namespace, one session, and one write
journal folder (as processes sharing a server are set up: a writer's journal is replayed by the
others). Both add turns in a loop on a thread of their own; the first closes while its own loop
and the other process still write (a turn it adds during its close is acknowledged, or refused
with `MemoryClosedError`); then the second stops and closes. A new memory reads the session:
every turn either process acknowledged is there, once, and each writer's turns keep its order.

This module is also the worker: ``python -m tests.memory.test_close_two_processes URL NAMESPACE
JOURNAL NAME`` (driven by `tests.worker_process.Worker`: one JSON command a line on stdin).
"""

from __future__ import annotations

import json
import sys
import threading
import traceback
import uuid
from pathlib import Path
from typing import Any

import pytest

REPLY = "@@close-worker "
SESSION = "s1"

pytestmark = pytest.mark.integration


def _turn(name: str, n: int) -> str:
    return f"{name} turn {n}: the night train to Porto leaves at {n % 12 + 1} pm"


def serve(url: str, namespace: str, journal: str, name: str) -> None:
    """The worker: its own memory; ``write`` (start the loop), ``count``, ``close``, ``stop``."""
    from ctxbudget import MemoryClosedError
    from ctxbudget.embed.base import default_embedder
    from ctxbudget.memory.context import ContextMemory

    memory = ContextMemory(
        chroma_url=url,
        embedder=default_embedder(),
        namespace=namespace,
        write_behind=journal,
        inclusion_log=False,
    )
    acked: list[str] = []  # ids whose add_message returned: acknowledged
    ended: list[str] = []  # how the loop ended
    stop = threading.Event()

    def write() -> None:
        n = 0
        try:
            while not stop.is_set():
                memory.add_message(SESSION, "user", _turn(name, n), id=f"{name}-{n}")
                acked.append(f"{name}-{n}")
                n += 1
            ended.append("stopped")
        except MemoryClosedError:
            ended.append("refused")  # the close came first: not acknowledged
        except Exception:  # noqa: BLE001 - reported to the test
            ended.append(traceback.format_exc())

    def answer(reply: dict[str, Any]) -> None:
        sys.stdout.write(REPLY + json.dumps(reply) + "\n")
        sys.stdout.flush()

    writer = threading.Thread(target=write, name="test-writer")
    answer({"ready": True})
    for line in sys.stdin:
        op = json.loads(line)["op"]
        try:
            if op == "write":
                writer.start()
                answer({"started": True})
            elif op == "count":
                answer({"acked": len(acked)})
            else:  # "close" (the loop still writing) or "stop" (the loop stopped first)
                if op == "stop":
                    stop.set()
                    writer.join()
                memory.close()
                stop.set()
                writer.join()
                answer({"acked": acked, "ended": ended})
        except Exception:  # noqa: BLE001 - reported to the test
            answer({"crash": traceback.format_exc()})


def _until_acked(worker: Any, at_least: int) -> int:
    while True:
        count = int(worker.ask({"op": "count"})["acked"])
        if count >= at_least:
            return count
        threading.Event().wait(0.01)


def test_one_process_closing_while_another_writes_loses_no_acknowledged_turn(
    chroma_server: Any, tmp_path: Path
) -> None:
    from ctxbudget.embed.onnx import OnnxEmbedder
    from ctxbudget.memory.context import ContextMemory
    from tests.worker_process import ANSWER_TIMEOUT, Worker

    namespace = f"close-{uuid.uuid4().hex[:8]}"
    journal = str(tmp_path / "journal")
    module = "tests.memory.test_close_two_processes"
    workers = {
        name: Worker(
            module,
            chroma_server.url,
            namespace,
            journal,
            name,
            log=tmp_path / f"{name}.log",
            reply=REPLY,
        )
        for name in ("a", "b")
    }
    try:
        for worker in workers.values():
            worker.ask({"op": "write"})
        for worker in workers.values():
            _until_acked(worker, 20)
        closed = workers["a"].ask({"op": "close"})  # b goes on writing meanwhile
        b_before = _until_acked(workers["b"], 0)
        _until_acked(workers["b"], b_before + 20)  # b wrote on after a closed
        stopped = workers["b"].ask({"op": "stop"})
    finally:
        for worker in workers.values():
            worker.stop()
            while worker.replies.get(timeout=ANSWER_TIMEOUT) is not None:
                pass  # its listener reaches the end of its output, then it is closed
            if worker.process.stdout is not None:
                worker.process.stdout.close()
    assert closed["ended"] in (["stopped"], ["refused"]), closed["ended"]
    assert stopped["ended"] == ["stopped"], stopped["ended"]
    reader = ContextMemory(
        chroma_url=chroma_server.url,
        embedder=OnnxEmbedder(),
        namespace=namespace,
        inclusion_log=False,
        write_behind=False,
    )
    try:
        stored = [r.id for r in reader.history(SESSION)]
    finally:
        reader.close()
    acked = {"a": closed["acked"], "b": stopped["acked"]}
    missing = sorted(set(acked["a"] + acked["b"]) - set(stored))
    assert not missing, f"acknowledged but not stored: {missing[:10]} ({len(missing)})"
    assert len(stored) == len(set(stored)), "a turn was stored twice"
    for name, ids in acked.items():  # each writer's order, and nothing it did not acknowledge
        assert [i for i in stored if i.startswith(f"{name}-")] == ids


if __name__ == "__main__":
    serve(*sys.argv[1:5])
