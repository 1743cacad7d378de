"""Shared helpers of the benchmark scripts: synthetic data and timing."""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ctxbudget import ContextItem, Tier

WORDS = (
    "the a to and of in we you it is for on that this with plan trip Lisbon Porto train "
    "budget design test users booking app dinner vegetarian run 10k lesson Portuguese Tuesday "
    "deadline meeting notes decided moved flat river Alfama coffee weekend review draft screen"
).split()


def sentence(rng: random.Random, low: int = 6, high: int = 40) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(low, high))]
    return " ".join(words).capitalize() + "."


def conversation(n: int, seed: int = 7) -> list[ContextItem]:
    rng = random.Random(seed)
    items = []
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        text = " ".join(sentence(rng) for _ in range(rng.randint(1, 3)))
        items.append(
            ContextItem(f"m{i}", text, tier=Tier.RECENT, role=role, timestamp=1.7e9 + 60 * i)
        )
    return items


def retrieved(n: int, seed: int = 11) -> list[ContextItem]:
    rng = random.Random(seed)
    return [
        ContextItem(
            f"r{i}",
            " ".join(sentence(rng) for _ in range(rng.randint(1, 4))),
            tier=Tier.RETRIEVED,
            score=rng.random(),
            timestamp=1.6e9 + 3600 * i,
        )
        for i in range(n)
    ]


def timed(fn: Callable[[], object], repeat: int, *, cpu: bool = False) -> list[float]:
    """Milliseconds per call: wall clock, or this process's CPU time (less disturbed by other
    processes on a shared machine)."""
    clock = time.process_time if cpu else time.perf_counter
    out = []
    for _ in range(repeat):
        start = clock()
        fn()
        out.append((clock() - start) * 1000.0)
    return out


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def machine() -> str:
    import os

    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def summary(samples: list[float]) -> str:
    return (
        f"p50 {statistics.median(samples):.2f} ms, p95 {pct(samples, 0.95):.2f} ms, "
        f"min {min(samples):.2f} ms (n={len(samples)})"
    )


DEFAULT_LOCOMO = (
    Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo_dev.json"
)


def add_locomo_argument(parser: argparse.ArgumentParser) -> None:
    """``--locomo PATH``, by default ../shared/data/locomo/locomo_dev.json from the repo root."""
    parser.add_argument(
        "--locomo",
        type=Path,
        default=DEFAULT_LOCOMO,
        help="LoCoMo JSON; default ../shared/data/locomo/locomo_dev.json from the repo root",
    )


def require_locomo(path: Path) -> Path:
    """The path if the data is there; else say where to get it and exit 0 (nothing to measure)."""
    if not path.is_file():
        print(
            f"LoCoMo data not found at {path}: nothing to measure. Pass --locomo PATH to a copy of "
            "locomo10.json (or its dev subset) kept outside this repository (CC BY-NC 4.0 data)."
        )
        sys.exit(0)
    return path
