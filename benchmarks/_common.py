"""Shared helpers of the benchmark scripts: synthetic data and timing."""

from __future__ import annotations

import argparse
import functools
import hashlib
import platform
import random
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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


def chat_messages(texts: Sequence[str]) -> list[dict[str, str]]:
    """Chat messages ``m0``, ``m1``, ... of these texts, alternating user and assistant."""
    roles = ("user", "assistant")
    return [{"role": roles[i % 2], "content": t, "id": f"m{i}"} for i, t in enumerate(texts)]


Variant = tuple[Any, Callable[[], AbstractContextManager[None]]]
"""A memory to time, and what each of its calls runs inside (`contextlib.nullcontext`: nothing)."""


def interleaved_assembles(
    variants: dict[str, Variant], session: str, queries: Sequence[str], budget: int
) -> tuple[dict[str, float], dict[str, float]]:
    """p50 wall and CPU milliseconds of ``assemble`` per variant, calls interleaved.

    The first query warms every variant (its first call reads the session); each later one is
    asked of every variant, the order rotated each query, so load on a shared machine falls on
    all of them alike.
    """
    for memory, _ in variants.values():
        memory.assemble(session, queries[0], budget=budget)
    wall: dict[str, list[float]] = {name: [] for name in variants}
    cpu: dict[str, list[float]] = {name: [] for name in variants}
    order = list(variants.items())
    for n, query in enumerate(queries[1:]):
        turn = n % len(order)
        for name, (memory, around) in order[turn:] + order[:turn]:
            with around():
                start, used = time.perf_counter(), time.process_time()
                memory.assemble(session, query, budget=budget)
                wall[name].append((time.perf_counter() - start) * 1e3)
                cpu[name].append((time.process_time() - used) * 1e3)
    p50 = {name: statistics.median(v) for name, v in wall.items()}
    return p50, {name: statistics.median(v) for name, v in cpu.items()}


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


class HashEmbedder:
    """A free, deterministic `Embedder`: a unit vector per text, seeded by a hash of the text.

    The same text gives the same vector in every process (unlike Python's salted ``hash``), so
    stores built by one run can be searched by the next; nothing is found by meaning.
    """

    def __init__(self, dimension: int = 384) -> None:
        import numpy

        self._np = numpy
        self.dimension = dimension
        self.name = f"bench-hash-{dimension}"

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.embed_query(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
        vector = self._np.random.default_rng(seed).standard_normal(self.dimension)
        unit: list[float] = (vector / self._np.linalg.norm(vector)).tolist()
        return unit


def where_fields(where: object) -> set[str]:
    """The metadata fields a Chroma ``where`` filter names (operators such as ``$and`` left out)."""
    out: set[str] = set()
    if isinstance(where, dict):
        for key, value in where.items():
            if not key.startswith("$"):
                out.add(key)
            out |= where_fields(value)
    elif isinstance(where, list):
        for part in where:
            out |= where_fields(part)
    return out


@dataclass
class ChromaCalls:
    """Chroma calls by kind (``collection.method[ids|where fields] xN queries``): count and ms."""

    count: dict[str, int] = field(default_factory=dict)
    ms: dict[str, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, kind: str, ms: float) -> None:
        with self.lock:
            self.count[kind] = self.count.get(kind, 0) + 1
            self.ms[kind] = self.ms.get(kind, 0.0) + ms


COLLECTION_METHODS = ("get", "query", "count", "add", "upsert", "update", "delete", "peek")


@contextmanager
def counting_chroma_calls() -> Iterator[ChromaCalls]:
    """Count and time every chromadb ``Collection`` call (embedded and HTTP alike) in the block.

    A collection whose name ends in ``.meta`` is reported as ``meta``, any other as ``records``.
    """
    from chromadb.api.models.Collection import Collection

    calls = ChromaCalls()
    originals = {name: getattr(Collection, name) for name in COLLECTION_METHODS}

    def wrap(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return method(self, *args, **kwargs)
            finally:
                which = "meta" if self.name.endswith(".meta") else "records"
                how = "ids" if kwargs.get("ids") is not None else ""
                how += ",".join(sorted(where_fields(kwargs.get("where"))))
                n = len(kwargs.get("query_embeddings") or ())
                batch = f" x{n}" if n > 1 else ""
                calls.add(f"{which}.{name}[{how}]{batch}", (time.perf_counter() - start) * 1e3)

        return timed

    for name, method in originals.items():
        setattr(Collection, name, wrap(name, method))
    try:
        yield calls
    finally:
        for name, method in originals.items():
            setattr(Collection, name, method)
