"""Excerpts (`MemoryConfig.excerpts`) off, on, and on with the sentences cut every call.

`ContextMemory.assemble` on one long session of multi-sentence messages, three memories on one
store, interleaved (the order turns each query): the default (excerpts off); excerpts on, with
each message's sentences and their words kept in the session copy (`SessionIndex.pieces`); and
excerpts on with that copy bypassed (`mechanisms.pieces_cut_each_call`: every candidate cut into
sentences again on every call). Prints p50 wall and CPU time per call. Issue 31's rule: at the
same budget, excerpts may not make a call more than 1.5x slower.

Run: .venv/bin/python benchmarks/bench_excerpts.py [--messages 2000] [--budgets 1024,8192]
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
from mechanisms import pieces_cut_each_call

from ctxbudget import ContextMemory, MemoryConfig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", default="2000", help="session lengths")
    parser.add_argument("--budgets", default="1024,8192")
    parser.add_argument("--queries", type=int, default=40, help="timed calls per variant")
    args = parser.parse_args()
    print(machine())
    print()
    print(
        "| session | budget | off p50 ms (CPU) | on p50 ms (CPU) | on, cut each call p50 ms (CPU) "
        "| on / off | load |"
    )
    print("|---:|---:|---:|---:|---:|---:|---|")
    for size in (int(n) for n in args.messages.split(",")):
        rng = random.Random(7)
        with tempfile.TemporaryDirectory() as folder:
            off = ContextMemory(Path(folder) / "mem", write_behind=False, inclusion_log=False)
            config = MemoryConfig(excerpts=True)
            on = ContextMemory(store=off.store, config=config, inclusion_log=False)
            cut = ContextMemory(store=off.store, config=config, inclusion_log=False)
            texts = [
                " ".join(sentence(rng, 4, 14) for _ in range(rng.randint(1, 4)))
                for _ in range(size)
            ]
            messages = chat_messages(texts)
            off.add_messages("s", messages, progress=False)
            variants: dict[str, Variant] = {
                "off": (off, contextlib.nullcontext),
                "on": (on, contextlib.nullcontext),
                "cut": (cut, pieces_cut_each_call),
            }
            for budget in (int(b) for b in args.budgets.split(",")):
                asked = [sentence(rng, 6, 20) for _ in range(args.queries + 1)]
                p50, c50 = interleaved_assembles(variants, "s", asked, budget)
                load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
                cells = " | ".join(f"{p50[k]:.1f} ({c50[k]:.1f})" for k in variants)
                print(
                    f"| {size:,} | {budget:,} | {cells} | {p50['on'] / p50['off']:.2f} | {load} |"
                )
            cut.close()
            on.close()
            off.close()


if __name__ == "__main__":
    main()
