"""`ContextMemory.candidates` in a namespace without documents: searched for, or known absent.

Since 2026-12-01 the read of the session's entry also says whether the namespace's documents
partition is registered (`Stamps.has_documents`), and a call in a namespace without documents
makes no Chroma call for them; before, every call asked Chroma for the partition (an error
when there was none, a round trip on a server). Side by side in one run, the two taking turns
call by call (`mechanisms.documents_looked_up` restores the lookup), on an embedded store and
on a Chroma server on 127.0.0.1, a session of ``--messages`` messages, back to back.

Run: .venv/bin/python benchmarks/bench_no_documents.py [--calls 60] [--messages 400]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

from _common import sentence
from mechanisms import documents_looked_up

from ctxbudget import ContextMemory
from ctxbudget.testing import chroma_server


def _memory(rng: random.Random, messages: int, **where: str) -> ContextMemory:
    memory = ContextMemory(**where, write_behind=False)  # type: ignore[arg-type]
    roles = ("user", "assistant")
    turns = [{"role": roles[i % 2], "content": sentence(rng, 6, 30)} for i in range(messages)]
    memory.add_messages("s1", turns, progress=False)
    return memory


def _compare(memory: ContextMemory, rng: random.Random, calls: int) -> tuple[float, float]:
    now: list[float] = []
    before: list[float] = []
    for number in range(calls):
        query = f"{sentence(rng, 6, 20)} {number}"
        arms = [(now, False), (before, True)]
        for times, looked_up in arms if number % 2 else arms[::-1]:
            start = time.perf_counter()
            if looked_up:
                with documents_looked_up():
                    memory.candidates("s1", query, budget=4000)
            else:
                memory.candidates("s1", query, budget=4000)
            times.append((time.perf_counter() - start) * 1000.0)
    return statistics.median(now), statistics.median(before)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--messages", type=int, default=400)
    args = parser.parse_args()
    rng = random.Random(3)
    load = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory() as root, chroma_server(Path(root) / "server") as server:
        for where, options in (
            ("embedded", {"path": str(Path(root) / "embedded")}),
            ("server", {"chroma_url": server.url}),
        ):
            memory = _memory(rng, args.messages, **options)
            try:
                rows.append((where, *_compare(memory, rng, args.calls)))
            finally:
                memory.close()
    print(
        f"x86_64, {os.cpu_count()} cores; load {load:.1f} at start, {os.getloadavg()[0]:.1f} at end"
    )
    print(
        f"## candidates() without documents, {args.messages} messages, {args.calls} calls each, "
        "taking turns"
    )
    print()
    print("| store | known absent p50 ms | looked up p50 ms (before) | saved ms | before / now |")
    print("|---|--:|--:|--:|--:|")
    for where, now, before in rows:
        print(f"| {where} | {now:.2f} | {before:.2f} | {before - now:.2f} | {before / now:.3f} |")


if __name__ == "__main__":
    main()
