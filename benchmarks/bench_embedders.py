"""all-MiniLM-L6-v2 two ways: sentence-transformers (torch) against int8 ONNX (onnxruntime).

One run, side by side, with the load average at each step (the machine is shared):

1. agreement: cosine between the two embedders' vectors of LoCoMo turns (mean, min);
2. single-query latency p50/p95 for each, on a quiet machine and with the other core busy (a
   busy-loop subprocess runs during that part);
3. batch throughput (texts/s) of ``embed_documents`` on LoCoMo turns;
4. cold start: import + first embedding in a fresh process;
5. ingest rate (messages/s) of ``ContextMemory.add_messages`` with each embedder (Chroma writes
   included), on the conversations of the recall part;
6. LoCoMo evidence recall of ``ContextMemory`` defaults (and the vector top-k baseline) with each
   embedder on the same conversations and questions (ingest rate again as a by-product).

The data is LoCoMo (Maharana et al., ACL 2024), licensed CC BY-NC 4.0: it is read from outside
the repository and must never be copied into it.

Run: nice -n 10 .venv/bin/python benchmarks/bench_embedders.py [--locomo PATH]
     [--conversations 2] [--parts agreement,latency,throughput,cold,ingest,recall]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from _common import add_locomo_argument, machine, pct, require_locomo

from ctxbudget.embed.local import Embedder, LocalEmbedder
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.eval import LocomoData, load_locomo, run_locomo, summarize
from ctxbudget.eval.runner import DEFAULT_BUDGETS

PARTS = ("agreement", "latency", "throughput", "cold", "ingest", "recall")

COLD = {
    "sentence-transformers": (
        "from ctxbudget.embed.local import LocalEmbedder\nLocalEmbedder().embed_query('hello there')"
    ),
    "onnx int8": (
        "from ctxbudget.embed.onnx import OnnxEmbedder\nOnnxEmbedder().embed_query('hello there')"
    ),
}


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.1f} (5 min {five:.1f})"


@contextmanager
def other_core_busy() -> Iterator[None]:
    """A pure-Python busy loop in a child process for the duration of the block."""
    child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)  # let the scheduler see it
        yield
    finally:
        child.kill()
        child.wait()


def turns_of(data: LocomoData) -> list[str]:
    return [turn.text for conversation in data.conversations for turn in conversation.turns]


def questions_of(data: LocomoData) -> list[str]:
    return [q.question for conversation in data.conversations for q in conversation.questions]


def agreement(embedders: dict[str, Embedder], texts: list[str]) -> None:
    import numpy as np

    (name_a, a), (name_b, b) = embedders.items()
    va = np.array(a.embed_documents(texts))
    vb = np.array(b.embed_documents(texts))
    cosines = (va * vb).sum(axis=1)
    print(f"## Agreement: cosine({name_a}, {name_b}) over {len(texts):,} LoCoMo turns ({load()})")
    print()
    print("| mean | median | p1 | min |")
    print("|---:|---:|---:|---:|")
    print(
        f"| {cosines.mean():.4f} | {float(np.median(cosines)):.4f} "
        f"| {float(np.percentile(cosines, 1)):.4f} | {cosines.min():.4f} |"
    )
    print()


def latencies(embed: Callable[[str], object], queries: list[str]) -> list[float]:
    out = []
    for query in queries:
        start = time.perf_counter()
        embed(query)
        out.append((time.perf_counter() - start) * 1000.0)
    return out


def latency(embedders: dict[str, Embedder], queries: list[str]) -> None:
    print(f"## Single-query latency, {len(queries)} LoCoMo questions each (ms)")
    print()
    print("| embedder | quiet p50 | quiet p95 | other core busy p50 | other core busy p95 |")
    print("|---|---:|---:|---:|---:|")
    loads = []
    rows: dict[str, list[float]] = {}
    for name, embedder in embedders.items():
        latencies(embedder.embed_query, queries[:20])  # warm up
        loads.append(f"quiet {load()}")
        quiet = latencies(embedder.embed_query, queries)
        with other_core_busy():
            busy = latencies(embedder.embed_query, queries)
            loads.append(f"busy {load()}")
        rows[name] = [
            statistics.median(quiet),
            pct(quiet, 0.95),
            statistics.median(busy),
            pct(busy, 0.95),
        ]
    for name, row in rows.items():
        print(f"| {name} | " + " | ".join(f"{x:.1f}" for x in row) + " |")
    print()
    print("Load averages: " + "; ".join(loads))
    print()


def throughput(embedders: dict[str, Embedder], texts: list[str], repeat: int) -> None:
    print(f"## Batch throughput: embed_documents of {len(texts):,} LoCoMo turns (texts/s)")
    print()
    print(f"| embedder | median of {repeat} | best | load |")
    print("|---|---:|---:|---|")
    for name, embedder in embedders.items():
        embedder.embed_documents(texts[:64])  # warm up
        rates = []
        for _ in range(repeat):
            start = time.perf_counter()
            embedder.embed_documents(texts)
            rates.append(len(texts) / (time.perf_counter() - start))
        print(f"| {name} | {statistics.median(rates):,.0f} | {max(rates):,.0f} | {load()} |")
    print()


def cold(repeat: int) -> None:
    print(f"## Cold start: import + first embedding in a fresh process (s, median of {repeat})")
    print()
    print("| embedder | in process (import + load + embed) | wall, interpreter start included |")
    print("|---|---:|---:|")
    for name, code in COLD.items():
        inner, wall = [], []
        for _ in range(repeat):
            script = (
                "import time\nstart = time.perf_counter()\n"
                + code
                + "\nprint(time.perf_counter() - start)"
            )
            clock = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-c", script], capture_output=True, text=True, check=True
            )
            wall.append(time.perf_counter() - clock)
            inner.append(float(done.stdout.strip().splitlines()[-1]))
        print(f"| {name} | {statistics.median(inner):.2f} | {statistics.median(wall):.2f} |")
    print()
    print(f"({load()} at the end)")
    print()


def ingest(embedders: dict[str, Embedder], data: LocomoData, conversations: int) -> None:
    print(f"## Ingest: ContextMemory.add_messages of the first {conversations} conversations")
    print()
    print("| embedder | turns | seconds | messages/s | load |")
    print("|---|---:|---:|---:|---|")
    for name, embedder in embedders.items():
        run = run_locomo(
            data,
            embedder=embedder,
            max_conversations=conversations,
            max_questions=1,
            progress=False,
        )
        seconds = run.seconds["ingest"]
        print(f"| {name} | {run.turns} | {seconds:.1f} | {run.turns / seconds:,.0f} | {load()} |")
    print()


def recall(embedders: dict[str, Embedder], data: LocomoData, conversations: int) -> None:
    results: dict[str, dict[str, Any]] = {}
    ingest: dict[str, float] = {}
    for name, embedder in embedders.items():
        started = time.perf_counter()
        run = run_locomo(data, embedder=embedder, max_conversations=conversations, progress=False)
        summary = summarize(run)
        results[name] = summary["headline"]
        ingest[name] = run.turns / run.seconds["ingest"]
        elapsed = time.perf_counter() - started
        print(
            f"recall run with {name}: {elapsed:.0f} s ({run.turns} turns, "
            f"{summary['questions']['headline']} questions), {load()} at the end",
            flush=True,
        )
    first = next(iter(results.values()))
    some = next(iter(first.values()))
    budgets = [str(b) for b in DEFAULT_BUDGETS if str(b) in some]
    print()
    print(f"## LoCoMo evidence recall, first {conversations} conversations, same questions")
    print()
    print("| method | embedder | " + " | ".join(f"{int(b):,}" for b in budgets) + " |")
    print("|---|---|" + "---:|" * len(budgets))
    for method in ("ctxbudget", "top-k"):
        for name, headline in results.items():
            cells = " | ".join(f"{headline[method][b]['recall']:.3f}" for b in budgets)
            print(f"| {method} | {name} | {cells} |")
    print()
    names = list(results)
    if len(names) == 2:
        deltas = [
            results[names[1]]["ctxbudget"][b]["recall"]
            - results[names[0]]["ctxbudget"][b]["recall"]
            for b in budgets
        ]
        print(
            f"ContextMemory recall, {names[1]} minus {names[0]}: "
            + ", ".join(f"{d:+.3f}" for d in deltas)
            + f" (largest gap {max(abs(d) for d in deltas):.3f})"
        )
    print(
        "Ingest rate (ContextMemory.add_messages, Chroma writes included): "
        + ", ".join(f"{name} {rate:,.0f} messages/s" for name, rate in ingest.items())
    )
    print()


def main() -> None:
    parser = argparse.ArgumentParser()
    add_locomo_argument(parser)
    parser.add_argument("--conversations", type=int, default=2, help="for the recall part")
    parser.add_argument("--queries", type=int, default=200, help="latency samples per setting")
    parser.add_argument("--turns", type=int, default=800, help="texts for the throughput part")
    parser.add_argument("--repeat", type=int, default=3, help="throughput and cold-start runs")
    parser.add_argument("--parts", default=",".join(PARTS), help="comma-separated subset")
    args = parser.parse_args()
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    unknown = parts - set(PARTS)
    if unknown:
        parser.error(f"unknown parts {sorted(unknown)}; choose from {', '.join(PARTS)}")
    path = require_locomo(args.locomo)
    data = load_locomo(path)
    print(f"machine: {machine()}, {load()} at the start; data: {path.name}")
    print()
    embedders: dict[str, Embedder] = {
        "sentence-transformers": LocalEmbedder(),
        "onnx int8": OnnxEmbedder(),
    }
    texts = turns_of(data)
    if "agreement" in parts:
        agreement(embedders, texts)
    if "latency" in parts:
        latency(embedders, questions_of(data)[: args.queries])
    if "throughput" in parts:
        rates = dict(embedders)
        rates["onnx int8, parallel_batches=1"] = OnnxEmbedder(parallel_batches=1)
        throughput(rates, texts[: args.turns], args.repeat)
    if "cold" in parts:
        cold(args.repeat)
    if "ingest" in parts:
        ingest(embedders, data, args.conversations)
    if "recall" in parts:
        recall(embedders, data, args.conversations)
    print(f"done, {load()}")


if __name__ == "__main__":
    main()
