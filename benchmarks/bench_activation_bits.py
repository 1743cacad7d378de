"""int8 products with 7-bit activations: exact without VNNI, and what they cost in agreement.

The default embedder's int8 arithmetic (`ctxbudget.embed.int8_graph`) quantizes each row of
activations to 8 bits (255 steps). On x86 without VNNI (plain AVX2) onnxruntime's u8s8 kernel
sums pairs of products in 16 bits, which saturate when an activation is over 127, so the default
there is fp32 (`exact_int8`). With 7-bit activations (127 steps, ``int8_graph(levels=127)``) no
pair sum can saturate (127 x 128 x 2 < 32,768), so the int8 products are exact on AVX2 too.

One run, side by side, with the load average: each arithmetic's agreement with fp32 over LoCoMo
turns (cosine: mean, p1, min) and one query's latency (a new text each time, the arithmetics
taking turns); with ``--recall N``, LoCoMo evidence recall of `ContextMemory` with fp32 and
with 7-bit activations on the first N conversations. A measurement, not a default: the 7-bit
arithmetic is not used by the product.

The data is LoCoMo (Maharana et al., ACL 2024), licensed CC BY-NC 4.0: it is read from outside
the repository and must never be copied into it.

Run: .venv/bin/python benchmarks/bench_activation_bits.py [--locomo PATH] [--texts 800]
     [--queries 60] [--recall 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from functools import partial
from typing import Any
from unittest import mock

import numpy as np
from _common import add_locomo_argument, machine, pct, require_locomo

import ctxbudget.embed.onnx as onnx_module
from ctxbudget.embed.int8_graph import exact_int8, int8_graph
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.eval import load_locomo, run_locomo, summarize


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.1f} (5 min {five:.1f})"


def embedder(levels: int | None) -> OnnxEmbedder:
    """fp32 (None), or int8 products with activations of ``levels`` steps (loaded now)."""
    if levels is None:
        made = OnnxEmbedder(arithmetic="fp32")
        made.embed_query("warm")
        return made
    with mock.patch.object(onnx_module, "int8_graph", partial(int8_graph, levels=levels)):
        made = OnnxEmbedder(arithmetic="int8", name=f"all-MiniLM-L6-v2-onnx-w8a{levels}")
        made.embed_query("warm")  # the session is built here, with the patched rewrite
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_locomo_argument(parser)
    parser.add_argument("--texts", type=int, default=800, help="LoCoMo turns compared")
    parser.add_argument("--queries", type=int, default=60, help="timed queries per arithmetic")
    parser.add_argument("--recall", type=int, default=0, help="conversations for recall (0: no)")
    args = parser.parse_args()
    data = load_locomo(require_locomo(args.locomo))
    turns = [t.text for c in data.conversations for t in c.turns][: args.texts] + ["", "hi"]
    print(f"{machine()}; VNNI (exact 8-bit int8): {exact_int8()}")
    print()
    variants: dict[str, Any] = {
        "fp32": embedder(None),
        "int8, 8-bit activations": embedder(255),
        "int8, 7-bit activations": embedder(127),
    }
    reference = np.array(variants["fp32"].embed_documents(turns))
    print(f"## Agreement with fp32 over {len(turns):,} texts (LoCoMo turns, '' and 'hi')")
    print()
    print("| arithmetic | mean | p1 | min | load |")
    print("|---|---:|---:|---:|---|")
    for name, model in variants.items():
        if name == "fp32":
            continue
        vectors = np.array(model.embed_documents(turns))
        norms = np.linalg.norm(vectors, axis=1) * np.linalg.norm(reference, axis=1)
        cosine = (vectors * reference).sum(axis=1) / np.maximum(norms, 1e-12)
        row = f"{cosine.mean():.4f} | {np.percentile(cosine, 1):.4f} | {cosine.min():.4f}"
        print(f"| {name} | {row} | {load()} |")
    print()
    times: dict[str, list[float]] = {name: [] for name in variants}
    for n in range(args.queries):
        text = f"{turns[(n * 7) % max(1, len(turns) - 2)][:160]} {n}"
        for name in sorted(variants, key=lambda _: np.random.default_rng(n).random()):
            start = time.perf_counter()
            variants[name].embed_query(text)
            times[name].append((time.perf_counter() - start) * 1000.0)
    base = statistics.median(times["fp32"])
    print(f"## One query ({args.queries} LoCoMo turns, the arithmetics taking turns), {load()}")
    print()
    print("| arithmetic | p50 ms | p95 ms | p50 / fp32 |")
    print("|---|---:|---:|---:|")
    for name, samples in times.items():
        p50 = statistics.median(samples)
        print(f"| {name} | {p50:.2f} | {pct(samples, 0.95):.2f} | {p50 / base:.2f} |")
    if args.recall:
        print()
        print(
            f"## LoCoMo evidence recall, ContextMemory defaults, first {args.recall} conversations"
        )
        print()
        for name in ("fp32", "int8, 7-bit activations"):
            run = run_locomo(
                data, embedder=variants[name], max_conversations=args.recall, progress=False
            )
            headline = summarize(run)["headline"]["ctxbudget"]
            cells = ", ".join(f"{b}: {headline[b]['recall']:.3f}" for b in headline)
            print(f"- {name}: {cells} ({load()})", flush=True)


if __name__ == "__main__":
    main()
