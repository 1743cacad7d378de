"""What the OpenTelemetry spans cost one `ContextAssembler.assemble` (docs/observability.md, "Cost").

Four set-ups, each in a fresh process (the first traced call decides for the process), each
timed against the method without its span decorator (``assemble.__wrapped__``), the two
alternated so that the machine's load falls on both alike; each figure is the fastest of
``--repeat`` runs, ``+`` the difference between the fastest runs:

- ``absent``: opentelemetry not importable (``pip install ctxbudget`` without the otel extra);
- ``disabled``: installed, ``telemetry.configure(enabled=False)``;
- ``api-only``: installed, no SDK set up (the API's placeholder provider: nothing records);
- ``sdk``: an SDK provider with an in-memory exporter (every span recorded and exported).

``span`` is what the decorator adds to a method that does nothing: the fixed cost of a call.
Then two assemblies: one query item (the smallest, where a fixed cost shows most) and a turn of
20 history messages with 50 retrieved candidates under a 2,000-token budget; with the SDK the
difference includes building the span's attributes from the report and exporting it.

Run: .venv/bin/python benchmarks/bench_telemetry.py [--repeat 25]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import timeit

MODES = ["absent", "disabled", "api-only", "sdk"]


def measure(mode: str, repeat: int) -> dict[str, float]:
    if mode == "absent":
        sys.modules["opentelemetry"] = None  # type: ignore[assignment]
    from _common import conversation, retrieved

    from ctxbudget import ContextAssembler, ContextItem, Tier, telemetry

    if mode == "disabled":
        telemetry.configure(enabled=False)
    if mode == "sdk":
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
        telemetry.configure(tracer_provider=provider)
    assembler = ContextAssembler(model="gpt-4o")
    traced = ContextAssembler.assemble
    bare = traced.__wrapped__  # type: ignore[attr-defined]
    query = ContextItem("q", "Where is the station?", tier=Tier.QUERY)
    turn = [*conversation(20), *retrieved(50), query]
    out: dict[str, float] = {"span": span_cost(repeat)}
    for name, items, budget, number in (("1 item", [query], 64, 500), ("turn", turn, 2000, 20)):
        traced(assembler, items, budget=budget)
        # Alternated with the bare method, so that the machine's load falls on both alike.
        pairs = []
        for _ in range(repeat):
            times = [
                timeit.timeit(
                    lambda f=f, i=items, b=budget: f(assembler, i, budget=b), number=number
                )
                / number
                * 1e6
                for f in (bare, traced)
            ]
            pairs.append(times)
        # The fastest run of each: what the code costs, without what other processes took.
        out[name] = min(b for b, _ in pairs)
        out[name + " +"] = min(t for _, t in pairs) - out[name]
    return out


def span_cost(repeat: int) -> float:
    """Microseconds the span decorator adds to a method that does nothing (no attributes)."""
    from ctxbudget.telemetry.spans import traced

    def nothing(items: object, *, budget: int) -> object:
        return items

    wrapped = traced("bench", in_assembly=True)(nothing)
    number = 20_000
    runs = {
        f: min(timeit.timeit(lambda f=f: f(1, budget=2), number=number) for _ in range(repeat))
        for f in (nothing, wrapped)
    }
    return (runs[wrapped] - runs[nothing]) / number * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=25)
    parser.add_argument("--mode", choices=MODES)
    args = parser.parse_args()
    if args.mode:
        print(json.dumps(measure(args.mode, args.repeat)))
        return
    results = {}
    for mode in MODES:
        done = subprocess.run(
            [sys.executable, __file__, "--mode", mode, "--repeat", str(args.repeat)],
            capture_output=True,
            text=True,
            check=True,
        )
        results[mode] = json.loads(done.stdout)
    print(f"{'set-up':<10} {'span':>7} {'1 item':>8} {'+':>7} {'turn':>8} {'+':>7}  (us)")
    for mode, got in results.items():
        print(
            f"{mode:<10} {got['span']:>+7.2f} {got['1 item']:>8.1f} {got['1 item +']:>+7.1f} "
            f"{got['turn']:>8.1f} {got['turn +']:>+7.1f}"
        )


if __name__ == "__main__":
    main()
