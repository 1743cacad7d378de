"""Where the event loop's stalls come from (issue 40; ``bench_async.py --write-bounds``).

`recording` times every `Connection.call` (by action, the function that made it and the thread)
and every call of the default embedder, in the benchmark only. `attribute` lays the ticker's
stalls (ticks over 20 ms late) over those intervals: an embedded Chroma call holds the
interpreter lock for its whole length and calls on one store never overlap (the store's lock),
so a stall's time is given to the Chroma call running then, what is left to an embedder call
running then, the rest to nothing recorded (the loop's own work, the other threads' Python).
`write_bounds` runs the variants of `_async_variants` interleaved and prints their tables.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import shutil
import statistics
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _async_variants import prepare, variant
from _common import pct

from ctxbudget.store.connection import Connection

__all__ = [
    "STALL_MS",
    "Calls",
    "attribute",
    "lag_summary",
    "load",
    "recording",
    "stall_report",
    "write_bounds",
]

STALL_MS = 20.0


@dataclass
class Calls:
    """Recorded intervals: (start, end, label, thread), perf_counter seconds."""

    chroma: list[tuple[float, float, str, str]] = field(default_factory=list)
    embed: list[tuple[float, float, str, str]] = field(default_factory=list)


def _thread() -> str:
    name = threading.current_thread().name
    if name.startswith("ctxbudget_"):  # the async runner's pool: ctxbudget_0, ctxbudget_1
        return "async worker"
    return name


@contextlib.contextmanager
def recording() -> Iterator[Calls]:
    """Record every `Connection.call` and default-embedder call made inside."""
    from ctxbudget.embed.onnx import OnnxEmbedder

    calls = Calls()
    original = Connection.call

    def call(self: Connection, action: str, fn: Callable[[], Any], **kw: Any) -> Any:
        caller = sys._getframe(1)  # noqa: SLF001 - which function made the call
        while caller.f_code.co_name == "<lambda>" and caller.f_back is not None:
            caller = caller.f_back
        where = caller.f_globals.get("__name__", "?").rsplit(".", 1)[-1]
        label = f"{action} ({where}.{caller.f_code.co_name})"

        def timed() -> Any:  # the Chroma call alone, inside the store's lock
            start = time.perf_counter()
            try:
                return fn()
            finally:
                calls.chroma.append((start, time.perf_counter(), label, _thread()))

        return original(self, action, timed, **kw)

    def timed(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def run(self: Any, *args: Any, **kw: Any) -> Any:
            start = time.perf_counter()
            try:
                return method(self, *args, **kw)
            finally:
                calls.embed.append((start, time.perf_counter(), f"embed: {name}", _thread()))

        return run

    saved = {n: getattr(OnnxEmbedder, n) for n in ("embed_documents", "embed_query")}
    setattr(Connection, "call", call)  # noqa: B010 - typed as any Connection.call
    for name, method in saved.items():
        setattr(OnnxEmbedder, name, timed(name, method))
    try:
        yield calls
    finally:
        setattr(Connection, "call", original)  # noqa: B010
        for name, method in saved.items():
            setattr(OnnxEmbedder, name, method)


def _overlap(a0: float, a1: float, b0: float, b1: float) -> float:
    return max(0.0, min(a1, b1) - max(a0, b0))


def attribute(
    ticks: Sequence[tuple[float, float]], calls: Calls
) -> tuple[dict[str, list[float]], dict[str, float], float]:
    """Chroma and embedder call durations (ms) by label and thread, the stalled ms each accounts
    for, and the stalled ms in all (ticks over `STALL_MS` late: their whole length)."""
    durations: dict[str, list[float]] = {}
    for start, end, label, thread in calls.chroma + calls.embed:
        durations.setdefault(f"{label} [{thread}]", []).append((end - start) * 1e3)
    stalls = [(s, e) for s, e in ticks if (e - s) * 1e3 - 1.0 > STALL_MS]
    blame: dict[str, float] = {}
    total = 0.0
    chroma = sorted(calls.chroma)
    embed = sorted(calls.embed)
    for s, e in stalls:
        total += (e - s) * 1e3
        covered = 0.0
        held: list[tuple[float, float]] = []
        for c0, c1, label, thread in chroma:
            if c0 >= e:
                break
            part = _overlap(s, e, c0, c1)
            if part > 0:
                key = f"{label} [{thread}]"
                blame[key] = blame.get(key, 0.0) + part * 1e3
                covered += part
                held.append((max(s, c0), min(e, c1)))
        best: dict[str, float] = {}
        for c0, c1, label, thread in embed:
            if c0 >= e:
                break
            part = _overlap(s, e, c0, c1) - sum(_overlap(h0, h1, c0, c1) for h0, h1 in held)
            if part > 0:
                key = f"{label} [{thread}]"
                best[key] = max(best.get(key, 0.0), part)
        left = (e - s) - covered
        for key, part in sorted(best.items(), key=lambda kv: -kv[1]):
            part = min(part, left)
            blame[key] = blame.get(key, 0.0) + part * 1e3
            left -= part
        blame["nothing recorded"] = blame.get("nothing recorded", 0.0) + max(0.0, left) * 1e3
    return durations, blame, total


def stall_report(ticks: Sequence[tuple[float, float]], calls: Calls, title: str) -> str:
    """Two markdown tables: calls over `STALL_MS` by label, and the stalled time by label."""
    durations, blame, total = attribute(ticks, calls)
    lines = [
        f"\n### {title}: calls over {STALL_MS:.0f} ms (of all calls of that kind)\n",
        "| call [thread] | calls | over 20 ms | p50 of those | max ms | ms over 20 in all |",
        "|---|--:|--:|--:|--:|--:|",
    ]
    rows = []
    for key, times in durations.items():
        slow = [t for t in times if t > STALL_MS]
        if slow:
            rows.append((sum(slow), key, len(times), slow))
    for spent, key, n, slow in sorted(rows, reverse=True):
        lines.append(
            f"| {key} | {n} | {len(slow)} | {statistics.median(slow):.0f} | {max(slow):.0f} "
            f"| {spent:.0f} |"
        )
    lines += [
        f"\n### {title}: the loop's stalled time ({total:.0f} ms in ticks over "
        f"{STALL_MS:.0f} ms late), by what ran then\n",
        "| call [thread] | stalled ms | share |",
        "|---|--:|--:|",
    ]
    for key, ms in sorted(blame.items(), key=lambda kv: -kv[1]):
        if ms >= 0.005 * total:
            lines.append(f"| {key} | {ms:.0f} | {100 * ms / max(total, 1e-9):.0f}% |")
    return "\n".join(lines)


# -- variants ----------------------------------------------------------------------------------


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.1f} (5 min {five:.1f})"


def lag_summary(lags: list[float], wall: float) -> dict[str, float]:
    """Lag p50/p99/max by tick, the p99 by time, and the % of ``wall`` s stalled over 20 ms."""
    # A tick's lag weighted by how long it lasted: what a request arriving at a random moment
    # meets (a 300 ms stall is one tick of thousands, but 300 ms of the run).
    weighted = sorted(lags)
    total = sum(lag + 1.0 for lag in weighted)
    running, timed_p99 = 0.0, weighted[-1]
    for lag in weighted:
        running += lag + 1.0
        if running >= 0.99 * total:
            timed_p99 = lag
            break
    stalled = sum(lag + 1.0 for lag in lags if lag > STALL_MS) / (wall * 1000.0)
    return {
        "p50": statistics.median(lags),
        "p99": pct(lags, 0.99),
        "max": max(lags),
        "timed_p99": timed_p99,
        "stalled": 100.0 * stalled,
    }


Run = Callable[[Path], Coroutine[Any, Any, dict[str, list[float]]]]


def write_bounds(
    args: argparse.Namespace, tokens: list[str], copy: Callable[[], Path], run: Run
) -> None:
    """``run`` (the embedded async run, on a ``copy`` of the sessions) under each variant of
    ``tokens`` (`_async_variants.variant`), interleaved ``args.rounds`` times; ``args.stalls``:
    record every Chroma and embedder call and tell where the loop's stalls went, per variant
    (all rounds together)."""
    results: dict[str, list[dict[str, float]]] = {t: [] for t in tokens}
    traces: dict[str, tuple[list[tuple[float, float]], Calls]] = {t: ([], Calls()) for t in tokens}
    before = load()
    for r in range(args.rounds):
        for token in tokens if r % 2 == 0 else list(reversed(tokens)):
            folder = copy()
            prepare(token, folder)
            ticks, calls = traces[token]
            watch = recording() if args.stalls else contextlib.nullcontext(Calls())
            try:
                with variant(token)(), watch as seen:
                    result = asyncio.run(run(folder))
            finally:
                shutil.rmtree(folder, ignore_errors=True)
            calls.chroma += seen.chroma
            calls.embed += seen.embed
            starts, lags = result["starts"], result["lag"]
            ticks += [(s, s + (lag + 1.0) / 1e3) for s, lag in zip(starts, lags, strict=True)]
            m = {**lag_summary(lags, result["wall"][0]), "rate": result["rate"][0]}
            results[token].append(m)
            print(
                f"  round {r + 1}, {token}: lag p50 {m['p50']:.1f}, p99 {m['p99']:.1f}, by time "
                f"p99 {m['timed_p99']:.1f}, max {m['max']:.0f} ms; {m['stalled']:.1f}% stalled; "
                f"{m['rate']:.1f} turns/s; load {load()}",
                flush=True,
            )
    log = "context log on" if args.log else "context log off"
    print(
        f"\n## {args.conversations} conversations, embedded, async (default), {log}: medians of "
        f"{args.rounds} interleaved rounds; load {before} before, {load()} after\n"
    )
    print(
        "| variant | lag p50 ms | p99 (by tick) | p99 (by time) | max | stalled > 20 ms | turns/s |"
    )
    print("|---|--:|--:|--:|--:|--:|--:|")
    for token, runs in results.items():
        m = {key: statistics.median(x[key] for x in runs) for key in runs[0]}
        print(
            f"| {token} | {m['p50']:.1f} | {m['p99']:.1f} | {m['timed_p99']:.1f} | {m['max']:.0f} "
            f"| {m['stalled']:.1f}% | {m['rate']:.1f} |"
        )
    if args.stalls:
        for token, (ticks, calls) in traces.items():
            print(stall_report(ticks, calls, f"{token}, {args.rounds} rounds"))
