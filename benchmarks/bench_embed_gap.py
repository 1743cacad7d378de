"""One query embedding by the default embedder, after a gap: what a turn's embedding costs.

Issue 40 compares the middleware's overhead with "one query embedding", timed back to back
(`bench_middleware.py`: a new text each time, one after the other). Inside an agent turn the
question's embedding took about twice that (4.8 against 3.5 ms in docs/benchmarks.md). This
script times one embedding of a new text after each kind of gap, the kinds taking turns in
every round (so the machine's load weighs on all alike), on one thread:

- back to back: nothing between two embeddings;
- after a sleep of 5, 10, 20 or 40 ms (the process idle, as between a user's turns);
- after the same time spent in Python (a busy loop: the process never idle);
- after touching 64 MB of other memory (caches flushed of the model, in less than 10 ms);
- after a busy loop of 40 ms and then one embedding of a two-word text (what it brings back).

Run: .venv/bin/python benchmarks/bench_embed_gap.py [--rounds 30]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from collections.abc import Callable

import numpy as np
from _common import sentence

from ctxbudget.embed.base import default_embedder


def _busy(ms: float) -> Callable[[], None]:
    def wait() -> None:
        end = time.perf_counter() + ms / 1000.0
        while time.perf_counter() < end:
            pass

    return wait


def _sleep(ms: float) -> Callable[[], None]:
    return lambda: time.sleep(ms / 1000.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    model = default_embedder()
    model.embed_query("warm up")
    other = np.ones(64 * 2**20 // 8)
    gaps: dict[str, Callable[[], None]] = {"back to back": lambda: None}
    for ms in (5, 10, 20, 40):
        gaps[f"after {ms} ms asleep"] = _sleep(ms)
    for ms in (5, 10, 20, 40):
        gaps[f"after {ms} ms in Python"] = _busy(ms)
    gaps["after touching 64 MB"] = lambda: float(other.sum())
    busy = _busy(40)
    gaps["after 40 ms in Python, then a two-word embedding"] = lambda: (
        busy(),
        model.embed_query("hello there"),
    )
    rng = random.Random(5)
    times: dict[str, list[float]] = {name: [] for name in gaps}
    load = os.getloadavg()[0]
    names = list(gaps)
    for number in range(args.rounds):
        for name in names[number % len(names) :] + names[: number % len(names)]:
            text = f"{sentence(rng, 6, 30)} {rng.random()}"
            gaps[name]()
            start = time.perf_counter()
            model.embed_query(text)
            times[name].append((time.perf_counter() - start) * 1000.0)
    base = statistics.median(times["back to back"])
    print(
        f"x86_64, {os.cpu_count()} cores; load {load:.1f} at start, {os.getloadavg()[0]:.1f} at end"
    )
    print(f"## One query embedding (default embedder, a new text), {args.rounds} rounds")
    print()
    print("| before it | p50 ms | p95 ms | p50 / back to back |")
    print("|---|--:|--:|--:|")
    for name, values in times.items():
        ordered = sorted(values)
        p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
        p50 = statistics.median(values)
        print(f"| {name} | {p50:.2f} | {p95:.2f} | {p50 / base:.2f} |")


if __name__ == "__main__":
    main()
