"""Keyed values at 10,000: `search_values(query=...)` against `assemble`, in the same run.

Issue 43 asks that a search of a namespace of 10,000 values answer within the same order of
time as an `assemble`. The script stores ``--values`` values (``{"text": <1-2 sentences of
_common.sentence>, "n": i}``, embedded whole, in batches of 500 through `put_values`) under one
user's namespace ``("memories", "alice")`` in an embedded Chroma (a temporary folder), and a
session of ``--messages`` messages for the same user. Then, after two untimed warm-ups each, it
times over ``--queries`` queries (wall clock, milliseconds):

- ``search_values(("memories", "alice"), query=q, limit=10)``: a vector query for the pool
  (50), BM25 over it, the fused ranking;
- ``search_values(..., query=q, filter={"n": {"$gte": 5000}}, limit=10)``: half the values
  filtered away, so the pool grows;
- ``search_values(("memories", "alice"), limit=10)`` (no query: every value read, newest first);
- ``assemble(session, q, budget=4096)`` of the same memory.

It prints the medians and p90s, the load average before and after (the machine may be shared),
and the ingest time. With ``--before``, each search is also timed with the store's reads as
they were before their speedups (`_values_before`: a where clause on every vector query, the
prefix's ids read to size a no-query search), interleaved query by query with the current ones
(the order alternating), and the median ratios printed.
Run: .venv/bin/python benchmarks/bench_values.py [--values 10000] [--messages 200]
[--queries 30] [--before]
"""

from __future__ import annotations

import os

os.environ["ANONYMIZED_TELEMETRY"] = "False"
os.environ["ORT_DISABLE_TELEMETRY"] = "1"
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time
import types
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _values_before  # noqa: E402
from _common import sentence  # noqa: E402

from ctxbudget.memory import ContextMemory, ValuePut  # noqa: E402
from ctxbudget.store.values import ValueStore  # noqa: E402

SPACE = ("memories", "alice")


def _times(fn: Callable[[str], object], queries: list[str]) -> list[float]:
    for q in queries[:2]:
        fn(q)  # warm-up, untimed
    out = []
    for q in queries:
        start = time.perf_counter()
        fn(q)
        out.append((time.perf_counter() - start) * 1000.0)
    return out


def _paired(
    fn: Callable[[str], object], values: ValueStore, queries: list[str]
) -> tuple[list[float], list[float]]:
    """``fn`` timed with the store's current reads and with those before, interleaved."""

    def before(q: str) -> object:
        values.nearest = types.MethodType(_values_before.nearest, values)  # type: ignore[method-assign]
        values.newest = types.MethodType(_values_before.newest, values)  # type: ignore[method-assign]
        try:
            return fn(q)
        finally:
            del values.nearest, values.newest

    now: list[float] = []
    old: list[float] = []
    for q in queries[:2]:
        fn(q), before(q)  # warm-up, untimed
    for n, q in enumerate(queries):
        for run, out in [(fn, now), (before, old)][:: 1 if n % 2 else -1]:
            start = time.perf_counter()
            run(q)
            out.append((time.perf_counter() - start) * 1000.0)
    return now, old


def _line(name: str, ms: list[float]) -> str:
    p90 = statistics.quantiles(ms, n=10)[-1] if len(ms) >= 2 else ms[0]
    return f"{name:<44} median {statistics.median(ms):8.1f} ms   p90 {p90:8.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--values", type=int, default=10_000)
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--before", action="store_true", help="time the reads before too")
    args = parser.parse_args()
    rng = random.Random(43)
    folder = Path(tempfile.mkdtemp(prefix="ctxbudget-bench-values-"))
    print(f"load average before: {os.getloadavg()}")
    try:
        mem = ContextMemory(path=folder, write_behind=False, inclusion_log=False)
        start = time.perf_counter()
        for low in range(0, args.values, 500):
            puts = [
                ValuePut(SPACE, f"v{i}", {"text": sentence(rng, 6, 24), "n": i})
                for i in range(low, min(args.values, low + 500))
            ]
            mem.put_values(puts, user_id="alice")
        ingest = time.perf_counter() - start
        for i in range(args.messages):
            role = "user" if i % 2 == 0 else "assistant"
            mem.add_message("s1", role, sentence(rng), user_id="alice")
        print(f"stored {args.values:,} values in {ingest:.1f} s; {args.messages} messages")
        queries = [sentence(rng, 3, 8) for _ in range(args.queries)]

        def search(q: str) -> object:
            return mem.search_values(SPACE, query=q, limit=10, user_id="alice")

        def filtered(q: str) -> object:
            wanted = {"n": {"$gte": args.values // 2}}
            return mem.search_values(SPACE, query=q, filter=wanted, limit=10, user_id="alice")

        def newest(q: str) -> object:
            return mem.search_values(SPACE, limit=10, user_id="alice")

        def assemble(q: str) -> object:
            return mem.assemble("s1", q, budget=4096, user_id="alice")

        names: list[tuple[str, Callable[[str], object], list[str]]] = [
            ("search_values(query, limit=10)", search, queries),
            ("search_values(query, filter n>=half, limit=10)", filtered, queries),
            ("search_values(no query, limit=10)", newest, queries[: max(5, len(queries) // 3)]),
        ]
        rows: list[tuple[str, list[float]]] = []
        for name, fn, asked in names:
            if args.before:
                now, old = _paired(fn, mem.store.values, asked)
                rows += [(name, now), (f"  before: {name}", old)]
                ratio = statistics.median(old) / statistics.median(now)
                rows += [(f"  (before / now medians: {ratio:.2f})", [])]
            else:
                rows.append((name, _times(fn, asked)))
        rows.append(("assemble(session, query, budget=4096)", _times(assemble, queries)))
        for name, ms in rows:
            print(_line(name, ms) if ms else name)
        ratio = statistics.median(rows[0][1]) / statistics.median(rows[-1][1])
        print(f"search(query) / assemble medians: {ratio:.2f}")
        mem.close()
    finally:
        print(f"load average after: {os.getloadavg()}")
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
