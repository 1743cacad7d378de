"""A values search of a small partition, exact (vectors read) against Chroma's index, interleaved.

A user's keyed values (`ContextMemory.put_value`, LangGraph's store) are searched exactly while
their partition holds at most ``ctxbudget.store.value_reads._EXACT`` values (Chroma's HNSW
index can strand a value among many identical ones: tests/memory/test_value_search_exact.py).
For each size, the script stores that many values (``{"text": <1-2 sentences>}``, embedded
whole) under one user's namespace in an embedded Chroma (a temporary folder) and times
``search_values(("memories", "alice"), query=q, limit=10)`` over ``--queries`` queries, query by
query alternating exact and indexed (``_EXACT`` set to 0 for the latter), after two warm-ups.
Prints the medians (ms), their ratio and the load average before and after.

Run: .venv/bin/python benchmarks/bench_value_exact.py [--sizes 50,200,300] [--queries 30]
"""

from __future__ import annotations

import os

os.environ["ANONYMIZED_TELEMETRY"] = "False"
os.environ["ORT_DISABLE_TELEMETRY"] = "1"

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

from _common import machine, sentence

import ctxbudget.store.value_reads as value_reads
from ctxbudget.memory import ContextMemory, ValuePut

EXACT = value_reads._EXACT


def timed(memory: ContextMemory, query: str, exact: bool) -> float:
    value_reads._EXACT = EXACT if exact else 0
    start = time.perf_counter()
    memory.search_values(("memories", "alice"), query=query, limit=10, refresh_ttl=False)
    return (time.perf_counter() - start) * 1000.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="50,200,300")
    parser.add_argument("--queries", type=int, default=30)
    args = parser.parse_args()
    rng = random.Random(5)
    print(f"before: {machine()}, load {os.getloadavg()[0]:.1f}")
    print("| values | exact p50 ms | indexed p50 ms | exact / indexed |")
    print("|---:|---:|---:|---:|")
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as folder:
            memory = ContextMemory(Path(folder) / "mem", inclusion_log=False)
            puts = [
                ValuePut(("memories", "alice"), f"k{i}", {"text": sentence(rng, 6, 30)})
                for i in range(size)
            ]
            memory.put_values(puts)
            times: dict[bool, list[float]] = {True: [], False: []}
            for n in range(args.queries + 2):
                query = sentence(rng, 4, 12)
                for exact in (n % 2 == 0, n % 2 == 1):
                    took = timed(memory, query, exact)
                    if n >= 2:
                        times[exact].append(took)
            memory.close()
        exact, indexed = (statistics.median(times[k]) for k in (True, False))
        print(f"| {size} | {exact:.2f} | {indexed:.2f} | {exact / indexed:.2f}x |")
    value_reads._EXACT = EXACT
    print(f"after: load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
