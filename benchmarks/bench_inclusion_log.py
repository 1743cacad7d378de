"""What the inclusion log adds to `ContextMemory.assemble`: per call, with the log on and off.

Two embedded stores (folders of their own) hold the same session of ``--messages`` chat
messages (`_common.sentence`, the default embedder): one memory logs its assemblies (the
default), the other does not (``inclusion_log=False``). The script alternates their calls
(on, off, off, on, ...) over ``--calls`` queries each, after warm-up calls, so both see the same
machine load, and reports:

- the median wall-clock ms of ``assemble`` with the log on and off, their difference and ratio;
- the median ms of the logging step alone (`InclusionLog.log` on a finished result: what the
  call pays on its critical path; building the record and writing it happen on the store's
  background thread);
- back to back (the background writes then compete with the next calls: the worst case), and
  with a pause of about ``--gap`` seconds between calls (an LLM call's; drawn at random
  between half and one and a half times it, so the writes do not fall in step with one
  memory's calls), where the writer works in the pauses, as in an application;
- how many records the session's log holds at the end (at most the retention limit).

With ``--with-locomo``, then on LoCoMo (``--locomo``, default the dev subset; budgets 1,000 and
4,000, compact format): the evaluation once with the log off and once on (recall, ``assemble``
p50/p95), and once with ``MemoryConfig(access_salience=0.5)`` (recall and containment against
the default's).

Run: .venv/bin/python benchmarks/bench_inclusion_log.py [--messages 300] [--calls 60] [--gap 0.3]
     [--with-locomo [--locomo PATH]]
"""

from __future__ import annotations

import os

os.environ["ANONYMIZED_TELEMETRY"] = "False"
os.environ["ORT_DISABLE_TELEMETRY"] = "1"
os.environ["HF_HUB_OFFLINE"] = "1"

import argparse
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from _common import add_locomo_argument, machine, require_locomo, sentence, summary

from ctxbudget.memory.context import ContextMemory

QUERIES = [
    "what did we decide about the trip to Lisbon?",
    "when is the deadline for the design review?",
    "which train do we take to Porto?",
    "what about the vegetarian dinner on Tuesday?",
    "how is the Portuguese lesson going?",
]


def loadavg() -> str:
    path = Path("/proc/loadavg")
    return " ".join(path.read_text().split()[:3]) if path.exists() else "n/a"


def run(on: ContextMemory, off: ContextMemory, calls: int, gap: float) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"on": [], "off": [], "hook": []}
    pauses = random.Random(11)
    for i in range(calls):
        query = f"{QUERIES[i % len(QUERIES)]} ({i})"
        order = (("on", on), ("off", off)) if i % 2 == 0 else (("off", off), ("on", on))
        for name, memory in order:
            start = time.perf_counter()
            result = memory.assemble(
                "s1", query, budget=4096, system="You are a helpful assistant."
            )
            times[name].append((time.perf_counter() - start) * 1e3)
            if gap:
                time.sleep(gap * pauses.uniform(0.5, 1.5))
        # The logging step alone, on the last result (logged to another session).
        start = time.perf_counter()
        on.inclusion_log.log(
            result, session_id="hook", user_id="u1", model="gpt-4o", counter=on.counter
        )
        times["hook"].append((time.perf_counter() - start) * 1e3)
    on.flush()
    return times


def report(label: str, times: dict[str, list[float]]) -> None:
    p50_on, p50_off = statistics.median(times["on"]), statistics.median(times["off"])
    print(f"{label}:")
    for name in ("on", "off"):
        print(f"  assemble, log {name + ':':<5} {summary(times[name])}")
    print(f"  added per call (p50): {p50_on - p50_off:+.2f} ms (ratio {p50_on / p50_off:.3f})")
    print(f"  logging step alone:   {summary(times['hook'])}")


def locomo(path: Path) -> None:
    """The LoCoMo runs: log off and on, then access salience 0 (the log-on run) and 0.5."""
    import functools

    import ctxbudget.eval.runner as runner
    from ctxbudget.eval import load_locomo, run_locomo
    from ctxbudget.eval.report import summarize
    from ctxbudget.memory.policy.config import MemoryConfig

    data = load_locomo(require_locomo(path))
    runs = [("log off", False, 0.0), ("log on", True, 0.0), ("access_salience=0.5", True, 0.5)]
    for label, logged, weight in runs:
        runner.ContextMemory = functools.partial(ContextMemory, inclusion_log=logged)  # type: ignore[misc]
        started = time.perf_counter()
        run = run_locomo(
            data, budgets=(1000, 4000), config=MemoryConfig(access_salience=weight), progress=False
        )
        head = summarize(run)["headline"]["ctxbudget"]
        figures = ", ".join(
            f"@{b}: recall {v['recall']:.3f}, containment {v['containment']:.3f}, "
            f"p50 {v['latency_p50_ms']:.2f} ms, p95 {v['latency_p95_ms']:.1f} ms"
            for b, v in head.items()
        )
        print(
            f"LoCoMo, {label} ({head['1000']['n']} questions, {time.perf_counter() - started:.0f} s, load {loadavg()}): {figures}"
        )
    runner.ContextMemory = ContextMemory  # type: ignore[misc]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=300)
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument(
        "--gap", type=float, default=0.3, help="seconds between calls in the second run"
    )
    parser.add_argument(
        "--linger", type=float, default=None, help="the log writer's linger (default: the store's)"
    )
    parser.add_argument("--with-locomo", action="store_true", help="also the LoCoMo runs")
    add_locomo_argument(parser)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="ctxbudget-bench-log-"))
    try:
        on = ContextMemory(folder / "on")
        off = ContextMemory(folder / "off", inclusion_log=False)
        if args.linger is not None:
            on.store.logs.linger = args.linger
        rng = random.Random(7)
        messages = [
            {
                "role": "user" if i % 2 == 0 else "assistant",
                "text": sentence(rng),
                "timestamp": 1.7e9 + 60 * i,
            }
            for i in range(args.messages)
        ]
        for memory in (on, off):
            memory.add_messages("s1", messages, user_id="u1", progress=False)
            memory.flush()
        for memory in (on, off, on, off):  # warm-up: model, session copy, count cache
            memory.assemble("s1", "warm up", budget=4096)
        print(f"machine: {machine()}; load average before: {loadavg()}")
        print(f"session: {args.messages} messages; budget 4,096; {args.calls} calls per memory")
        report("back to back", run(on, off, args.calls, 0.0))
        report(f"about {args.gap:.2f} s between calls", run(on, off, args.calls, args.gap))
        print(
            f"records in the session's log: {len(on.contexts('s1'))} (retain {on.inclusion_log.config.retain})"
        )
        print(f"dropped: {on.store.logs.dropped}, failed: {on.store.logs.failed}")
        print(f"load average after: {loadavg()}")
        on.close()
        off.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if args.with_locomo:
        locomo(args.locomo)


if __name__ == "__main__":
    main()
