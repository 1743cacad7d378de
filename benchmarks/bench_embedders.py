"""all-MiniLM-L6-v2 three ways: sentence-transformers (torch) and the int8 ONNX file on
onnxruntime with int8 arithmetic (the default ``OnnxEmbedder``) and with fp32 arithmetic
(``arithmetic="fp32"``, the default before).

One run, side by side, with the load average at each step (the machine is shared; where a part
repeats, the embedders take turns so that load changes hit them alike, and ratios are to onnx
fp32 in the same run):

1. agreement: cosine of each ONNX variant's vectors of LoCoMo turns to sentence-transformers'
   (mean, median, p1, min);
2. single-query latency p50/p95 for each, on a quiet machine and with the other core busy (a
   busy-loop subprocess runs during that part);
3. batch throughput (texts/s) of ``embed_documents`` on LoCoMo turns;
4. cold start: import + first embedding in a fresh process;
5. ingest rate (messages/s) of ``ContextMemory.add_messages`` with each embedder (Chroma writes
   included), until stored (``flush``) and acknowledged, on the conversations of the recall
   part;
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

REFERENCE = "sentence-transformers"
BASELINE = "onnx fp32"  # ratios and recall deltas are to this one
INT8 = "onnx int8 (default)"

COLD = {
    REFERENCE: (
        "from ctxbudget.embed.local import LocalEmbedder\nLocalEmbedder().embed_query('hello there')"
    ),
    INT8: "from ctxbudget.embed.onnx import OnnxEmbedder\nOnnxEmbedder().embed_query('hello there')",
    BASELINE: (
        "from ctxbudget.embed.onnx import OnnxEmbedder\n"
        "OnnxEmbedder(arithmetic='fp32').embed_query('hello there')"
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

    reference = np.array(embedders[REFERENCE].embed_documents(texts))
    print(f"## Agreement: cosine to {REFERENCE} over {len(texts):,} LoCoMo turns")
    print()
    print("| embedder | mean | median | p1 | min | load |")
    print("|---|---:|---:|---:|---:|---|")
    for name, embedder in embedders.items():
        if name == REFERENCE:
            continue
        cosines = (np.array(embedder.embed_documents(texts)) * reference).sum(axis=1)
        print(
            f"| {name} | {cosines.mean():.4f} | {float(np.median(cosines)):.4f} "
            f"| {float(np.percentile(cosines, 1)):.4f} | {cosines.min():.4f} | {load()} |"
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


def rounds(
    embedders: dict[str, Any], repeat: int, measure: Callable[[Any], float]
) -> tuple[dict[str, list[float]], list[str]]:
    """``measure`` of each embedder, ``repeat`` rounds taking turns; the load after each round."""
    rates: dict[str, list[float]] = {name: [] for name in embedders}
    loads = []
    for _ in range(repeat):
        for name, embedder in embedders.items():
            rates[name].append(measure(embedder))
        loads.append(load())
    return rates, loads


def rate_table(rates: dict[str, list[float]], loads: list[str], unit: str) -> None:
    base = statistics.median(rates[BASELINE]) if BASELINE in rates else None
    repeat = len(next(iter(rates.values())))
    print(f"| embedder | median of {repeat} ({unit}) | best | x {BASELINE} (medians) |")
    print("|---|---:|---:|---:|")
    for name, values in rates.items():
        ratio = f"{statistics.median(values) / base:.2f}" if base else "-"
        print(f"| {name} | {statistics.median(values):,.0f} | {max(values):,.0f} | {ratio} |")
    print()
    print("Load after each round: " + "; ".join(loads))
    print()


def throughput(embedders: dict[str, Embedder], texts: list[str], repeat: int) -> None:
    print(f"## Batch throughput: embed_documents of {len(texts):,} LoCoMo turns")
    print()
    for embedder in embedders.values():
        embedder.embed_documents(texts[:64])  # warm up

    def measure(embedder: Embedder) -> float:
        start = time.perf_counter()
        embedder.embed_documents(texts)
        return len(texts) / (time.perf_counter() - start)

    rate_table(*rounds(embedders, repeat, measure), "texts/s")


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


def ingest(
    embedders: dict[str, Embedder], data: LocomoData, conversations: int, repeat: int
) -> None:
    """Messages/s of ``add_messages`` alone and until stored (``flush``), fresh store each run.

    ContextMemory acknowledges messages once journaled and embeds them in the background
    (write-behind), so ``add_messages`` alone does not wait for the embedder; the stored rate
    (add_messages + flush) is the one the embedder bounds.
    """
    import tempfile

    from ctxbudget import ContextMemory

    chosen = data.conversations[:conversations]
    batches = [
        [
            {
                "id": turn.dia_id,
                "role": "user" if turn.speaker == c.speakers[0] else "assistant",
                "text": turn.text,
                "name": turn.speaker,
                "timestamp": turn.timestamp,
            }
            for turn in c.turns
        ]
        for c in chosen
    ]
    turns = sum(len(b) for b in batches)
    print(f"## Ingest: ContextMemory.add_messages of the first {conversations} conversations")
    print()
    print(f"{turns} turns into a fresh embedded Chroma store per run (Chroma writes included).")
    print()
    acknowledged: dict[str, list[float]] = {name: [] for name in embedders}

    def measure(embedder: Embedder) -> float:
        name = next(n for n, e in embedders.items() if e is embedder)
        with (
            tempfile.TemporaryDirectory(prefix="ctxbudget-bench-") as folder,
            ContextMemory(folder, embedder=embedder) as memory,
        ):
            start = time.perf_counter()
            for number, messages in enumerate(batches):
                memory.add_messages(f"c{number}", messages, progress=False)
            acknowledged[name].append(turns / (time.perf_counter() - start))
            memory.flush()
            return turns / (time.perf_counter() - start)

    stored, loads = rounds(embedders, repeat, measure)
    print("Until stored (add_messages, then flush):")
    print()
    rate_table(stored, loads, "messages/s")
    print("add_messages alone (acknowledged: journaled, embedding still in the background):")
    print()
    rate_table(acknowledged, loads, "messages/s")


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
    for name in results:
        if name == BASELINE or BASELINE not in results:
            continue
        deltas = [
            results[name]["ctxbudget"][b]["recall"] - results[BASELINE]["ctxbudget"][b]["recall"]
            for b in budgets
        ]
        print(
            f"ContextMemory recall, {name} minus {BASELINE}: "
            + ", ".join(f"{d:+.3f}" for d in deltas)
            + f" (largest gap {max(abs(d) for d in deltas):.3f})"
        )
    print(
        "add_messages rate in these runs (acknowledged: with write-behind the embedding "
        "finishes later; see the ingest part for the stored rate): "
        + ", ".join(f"{name} {rate:,.0f} messages/s" for name, rate in ingest.items())
    )
    print()


def main() -> None:
    parser = argparse.ArgumentParser()
    add_locomo_argument(parser)
    parser.add_argument("--conversations", type=int, default=2, help="for the recall part")
    parser.add_argument("--queries", type=int, default=200, help="latency samples per setting")
    parser.add_argument("--turns", type=int, default=800, help="texts for the throughput part")
    parser.add_argument("--repeat", type=int, default=3, help="throughput, ingest, cold runs")
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
        REFERENCE: LocalEmbedder(),
        BASELINE: OnnxEmbedder(arithmetic="fp32"),
        INT8: OnnxEmbedder(),
    }
    texts = turns_of(data)
    if "agreement" in parts:
        agreement(embedders, texts)
    if "latency" in parts:
        latency(embedders, questions_of(data)[: args.queries])
    if "throughput" in parts:
        rates = dict(embedders)
        rates[f"{INT8}, parallel_batches=1"] = OnnxEmbedder(parallel_batches=1)
        throughput(rates, texts[: args.turns], args.repeat)
    if "cold" in parts:
        cold(args.repeat)
    if "ingest" in parts:
        ingest(embedders, data, args.conversations, args.repeat)
    if "recall" in parts:
        recall(embedders, data, args.conversations)
    print(f"done, {load()}")


if __name__ == "__main__":
    main()
