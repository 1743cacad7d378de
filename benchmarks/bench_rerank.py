"""The reranker stage's cost (issue 42): `ContextMemory.candidates` with and without one.

One session of ``--history`` synthetic messages (the real default embedder, an embedded store
in a temporary folder). Variants, interleaved round by round so drift hits all alike:

- **none**: no reranker (the default path: one ``if``).
- **instant**: a cross-encoder-shaped fake (``.predict(pairs)``) that returns at once: the
  stage's own overhead (a thread, the scaling, the re-sort).
- **fake-Xms**: the same fake sleeping ``X`` ms per 50 pairs, as a small cross-encoder on a CPU
  might (``--per-50-ms``).

Reports, per variant, the median and p95 of one ``candidates`` call (ms) and the median extra
over ``none``, with the load.

Run: nice -n 5 .venv/bin/python benchmarks/bench_rerank.py [--history 2000] [--calls 40]
     [--budget 1000] [--per-50-ms 20 80]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from _common import machine, pct, sentence

from ctxbudget import ContextMemory
from ctxbudget.memory.policy.config import MemoryConfig


class SleepyCrossEncoder:
    """Shaped like a sentence-transformers CrossEncoder: sleeps in proportion to the pairs."""

    def __init__(self, per_50_ms: float) -> None:
        self.per_pair = per_50_ms / 1000.0 / 50.0

    def predict(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        if self.per_pair:
            time.sleep(self.per_pair * len(pairs))
        return [float(len(set(q.split()) & set(t.split()))) for q, t in pairs]


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.1f} (5 min {five:.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--history", type=int, default=2000)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--budget", type=int, default=1000)
    parser.add_argument("--per-50-ms", type=float, nargs="*", default=[20.0, 80.0])
    args = parser.parse_args()
    rng = random.Random(42)
    print(machine())
    print(f"load before: {load()}")
    with tempfile.TemporaryDirectory() as folder:
        base = ContextMemory(Path(folder) / "db", write_behind=False, inclusion_log=False)
        said = [
            {"role": "user" if i % 2 == 0 else "assistant", "content": sentence(rng)}
            for i in range(args.history)
        ]
        base.add_messages("bench", said, progress=False)
        variants: dict[str, ContextMemory] = {"none": base}
        rerankers = {"instant": 0.0, **{f"fake-{ms:g}ms": ms for ms in args.per_50_ms}}
        for name, ms in rerankers.items():
            config = MemoryConfig(reranker=SleepyCrossEncoder(ms), reranker_timeout=10.0)
            variants[name] = ContextMemory(
                store=base.store, config=config, write_behind=False, inclusion_log=False
            )
        queries = [sentence(rng, 4, 12) for _ in range(args.calls)]
        for memory in variants.values():  # warm: the session's index, counters, vectors
            memory.candidates("bench", queries[0], budget=args.budget)
        times: dict[str, list[float]] = {name: [] for name in variants}
        seen: dict[str, int] = {}
        for query in queries:
            for name, memory in variants.items():
                start = time.perf_counter()
                found = memory.candidates("bench", query, budget=args.budget)
                times[name].append((time.perf_counter() - start) * 1000.0)
                seen[name] = len(found.retrieved)
        none = statistics.median(times["none"])
        print(f"{args.history} messages, budget {args.budget}, {args.calls} calls per variant")
        print(f"{'variant':<14}{'p50 ms':>9}{'p95 ms':>9}{'extra p50':>11}{'retrieved':>11}")
        for name, values in times.items():
            p50 = statistics.median(values)
            print(
                f"{name:<14}{p50:>9.2f}{pct(values, 0.95):>9.2f}{p50 - none:>+11.2f}"
                f"{seen[name]:>11}"
            )
        print(f"load after: {load()}")


if __name__ == "__main__":
    main()
