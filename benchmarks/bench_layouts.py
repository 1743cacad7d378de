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
import contextlib
import random
import tempfile
from pathlib import Path

from _common import Variant, chat_messages, interleaved_assembles, machine, sentence
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
            messages = chat_messages([sentence(rng) for _ in range(size)])
            on.add_messages("s", messages, progress=False)
            variants: dict[str, Variant] = {
                "on": (on, contextlib.nullcontext),
                "off": (off, contextlib.nullcontext),
            }
            for budget in (int(b) for b in args.budgets.split(",")):
                asked = [sentence(rng, 6, 30) for _ in range(args.queries + 1)]
                p50, c50 = interleaved_assembles(variants, "s", asked, budget)
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
