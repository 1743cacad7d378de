"""Shared layouts on and off: `ContextMemory.assemble` on one long session, interleaved.

`ContextMemory` keeps one `Layout` per model and format between calls (`layouts_for`): the
rendered row and token cost of each item, cached by content. Off, every call renders and counts
every candidate again. What it buys grows with the candidates a call offers: the search pool is
a few times what the budget holds, so a long session at a large budget offers about a thousand.

Each size is one memory with two sessions of the same messages; the timed calls alternate
between the default memory and one with the mechanism off (`mechanisms.no_shared_layouts`), the
same query for both, the order swapped each query. Prints p50 wall and CPU time per call.

Run: .venv/bin/python benchmarks/bench_layouts.py [--messages 200,2000] [--budgets 4096,8192]
     [--queries 40]
"""

from __future__ import annotations

import os

os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

from _common import machine, sentence
from mechanisms import no_shared_layouts

from ctxbudget import ContextMemory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", default="200,2000", help="session lengths")
    parser.add_argument("--budgets", default="4096,8192")
    parser.add_argument("--queries", type=int, default=40, help="timed calls per variant")
    args = parser.parse_args()
    print(machine())
    print()
    print("| session | budget | on p50 ms (CPU) | off p50 ms (CPU) | off / on | benefit | load |")
    print("|---:|---:|---:|---:|---:|---:|---|")
    for size in (int(n) for n in args.messages.split(",")):
        rng = random.Random(7)
        with tempfile.TemporaryDirectory() as folder:
            store_path = Path(folder) / "mem"
            on = ContextMemory(store_path, write_behind=False, inclusion_log=False)
            off = ContextMemory(store=on.store, write_behind=False, inclusion_log=False)
            no_shared_layouts(off)
            messages = [
                {
                    "role": "user" if i % 2 == 0 else "assistant",
                    "content": sentence(rng),
                    "id": f"m{i}",
                }
                for i in range(size)
            ]
            on.add_messages("s", messages, progress=False)
            for budget in (int(b) for b in args.budgets.split(",")):
                asked = [sentence(rng, 6, 30) for _ in range(args.queries + 2)]
                for memory in (on, off):  # the first calls read the session and its index
                    memory.assemble("s", asked[0], budget=budget)
                wall: dict[str, list[float]] = {"on": [], "off": []}
                cpu: dict[str, list[float]] = {"on": [], "off": []}
                for n, query in enumerate(asked[2:]):
                    order = [("on", on), ("off", off)]
                    for name, memory in order if n % 2 == 0 else order[::-1]:
                        start, used = time.perf_counter(), time.process_time()
                        memory.assemble("s", query, budget=budget)
                        wall[name].append((time.perf_counter() - start) * 1e3)
                        cpu[name].append((time.process_time() - used) * 1e3)
                p50 = {k: statistics.median(v) for k, v in wall.items()}
                c50 = {k: statistics.median(v) for k, v in cpu.items()}
                load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
                print(
                    f"| {size:,} | {budget:,} | {p50['on']:.1f} ({c50['on']:.1f}) | "
                    f"{p50['off']:.1f} ({c50['off']:.1f}) | {p50['off'] / p50['on']:.2f} | "
                    f"{1 - p50['on'] / p50['off']:+.0%} | {load} |"
                )
            off.close()
            on.close()


if __name__ == "__main__":
    main()
