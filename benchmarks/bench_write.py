"""One synchronous write: its Chroma calls and its time, embedded and on a `chroma run` server.

``add_message`` with write-behind off into a session of --history messages, --writes times after
5 warm ones; prints the calls of one write by action (exact) and the p50/p95 of the writes, with
the load average. The code measured is the ctxbudget on ``sys.path``: to compare two versions,
run this alternately with a worktree of the other on ``PYTHONPATH`` (separate processes, a
minute apart: quote the medians of the rounds).

Run: .venv/bin/python benchmarks/bench_write.py [--history 2000] [--writes 120] [--backends embedded,server]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import machine, summary

import ctxbudget
from ctxbudget import ContextMemory
from ctxbudget.testing import chroma_server


def history(n: int) -> list[dict[str, str]]:
    return [
        {
            "role": "user" if k % 2 == 0 else "assistant",
            "text": f"Turn {k} about trains, plants and the weather in Porto.",
            "user_id": "u1",
        }
        for k in range(n)
    ]


def calls_of(memory: ContextMemory, write: Callable[[], Any]) -> Counter[str]:
    """The Chroma calls ``write`` makes, by action."""
    conn = memory.store._collections.conn  # noqa: SLF001 - the store's one door to Chroma
    inner = conn.call
    seen: Counter[str] = Counter()

    def call(action: str, fn: Callable[[], Any], **kwargs: Any) -> Any:
        seen[action] += 1
        return inner(action, fn, **kwargs)

    conn.call = call  # type: ignore[method-assign]
    try:
        write()
    finally:
        conn.call = inner  # type: ignore[method-assign]
    return seen


def run(memory: ContextMemory, args: argparse.Namespace, label: str) -> None:
    memory.add_messages("s1", history(args.history), progress=False)
    for k in range(5):
        memory.add_message("s1", "user", f"warm {k}", user_id="u1")
    calls = calls_of(memory, lambda: memory.add_message("s1", "user", "counted", user_id="u1"))
    times: list[float] = []
    for k in range(args.writes):
        text = f"Message {k}: the train to Porto leaves at {k % 12} o'clock."
        start = time.perf_counter()
        memory.add_message("s1", "user" if k % 2 == 0 else "assistant", text, user_id="u1")
        times.append((time.perf_counter() - start) * 1000)
    shown = ", ".join(f"{action} {n}" for action, n in sorted(calls.items()))
    print(f"{label}: one write: {shown}")
    print(f"{label}: {summary(times)}; load {os.getloadavg()[0]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--history", type=int, default=2000)
    parser.add_argument("--writes", type=int, default=120)
    parser.add_argument("--backends", default="embedded,server")
    args = parser.parse_args()
    print(f"# bench_write: {machine()}; ctxbudget from {Path(ctxbudget.__file__).parent}")
    backends = args.backends.split(",")
    with tempfile.TemporaryDirectory() as root:
        if "embedded" in backends:
            memory = ContextMemory(Path(root) / "db", write_behind=False)
            try:
                run(memory, args, "embedded")
            finally:
                memory.close()
        if "server" in backends:
            with chroma_server(Path(root) / "server") as server:
                memory = ContextMemory(chroma_url=server.url, write_behind=False)
                try:
                    run(memory, args, "server")
                finally:
                    memory.close()


if __name__ == "__main__":
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    main()
