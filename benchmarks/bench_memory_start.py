"""ContextMemory with the default install (`ctxbudget[memory]`, no torch): start-up and writes.

Side by side, default embedder (ONNX int8) and sentence-transformers (torch extra), in one run
with the load average:

1. first assemble in a new process: interpreter start, ``import ctxbudget``, ``ContextMemory()``
   on a new folder, one ``add_message`` and the first ``assemble`` (median of --repeat runs);
   which heavy modules that process imported;
2. ``add_message`` latency p50/p95 on LoCoMo turns (one message per call, Chroma write included);
3. ``add_messages`` ingest rate (messages/s) for whole LoCoMo sessions.

The data is LoCoMo (CC BY-NC 4.0), read from outside the repository.

Run: nice -n 10 .venv/bin/python benchmarks/bench_memory_start.py [--locomo PATH] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import add_locomo_argument, machine, pct, require_locomo

from ctxbudget.eval import load_locomo

EMBEDDERS = {
    "onnx int8 (default)": "None",
    "sentence-transformers": "__import__('ctxbudget.embed.local').embed.local.LocalEmbedder()",
}

FIRST = """
import json, sys, time
start = time.perf_counter()
import ctxbudget
memory = ctxbudget.ContextMemory({folder!r}, embedder={embedder})
memory.add_message("s1", "user", "I adopted a grey cat called Miso last spring.")
ctx = memory.assemble("s1", "What is my cat called?", budget=2000)
seconds = time.perf_counter() - start
heavy = sorted(m for m in ("torch", "sentence_transformers", "transformers", "scipy") if m in sys.modules)
print(json.dumps({{"seconds": seconds, "heavy": heavy, "fits": ctx.tokens_used <= 2000}}))
"""


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.1f} (5 min {five:.1f})"


def first_assemble(repeat: int) -> None:
    print(f"## New process: ContextMemory() to first assemble (s, median of {repeat})")
    print()
    print(
        "| embedder | in process (import + open + add + assemble) | wall | heavy modules | load |"
    )
    print("|---|---:|---:|---|---|")
    for name, embedder in EMBEDDERS.items():
        inner, wall, heavy = [], [], []
        for _ in range(repeat):
            with tempfile.TemporaryDirectory() as folder:
                code = FIRST.format(folder=str(Path(folder) / "mem"), embedder=embedder)
                clock = time.perf_counter()
                done = subprocess.run(
                    [sys.executable, "-c", code], capture_output=True, text=True, check=True
                )
                wall.append(time.perf_counter() - clock)
                out = json.loads(done.stdout.strip().splitlines()[-1])
                inner.append(out["seconds"])
                heavy = out["heavy"]
        print(
            f"| {name} | {statistics.median(inner):.2f} | {statistics.median(wall):.2f} "
            f"| {', '.join(heavy) or 'none'} | {load()} |"
        )
    print()


def writes(turns: list[list[tuple[str, str]]], samples: int, pause: float) -> None:
    """add_message latency and ingest rate, with write-behind (the default) and without.

    ``add_message`` is timed until it returns (acknowledged: journaled), with ``pause`` seconds
    between calls as in a conversation, and again followed by ``flush()`` (stored in Chroma).
    Ingest is timed until everything is stored (``flush()`` included), so it is the rate at
    which messages become searchable, not only acknowledged.
    """
    from ctxbudget import ContextMemory
    from ctxbudget.embed.local import LocalEmbedder

    print(
        f"## Writes on LoCoMo turns ({samples} add_message calls, {pause * 1000:.0f} ms apart; "
        "add_messages of whole sessions, until stored)"
    )
    print()
    print(
        "| embedder | writes | add_message p50 / p95 ms | add_message + flush p50 / p95 ms "
        "| add_messages msg/s (stored) | messages | load |"
    )
    print("|---|---|---:|---:|---:|---:|---|")
    for name in EMBEDDERS:
        embedder = LocalEmbedder() if "sentence" in name else None
        for mode, behind in (("write-behind (default)", True), ("synchronous", False)):
            with tempfile.TemporaryDirectory() as folder:
                memory = ContextMemory(Path(folder) / "mem", embedder=embedder, write_behind=behind)
                flat = [m for session in turns for m in session]
                memory.add_message("warm", "user", "warm up")
                memory.flush()
                acked, stored = [], []
                for number, (speaker, text) in enumerate(flat[: 2 * samples]):
                    start = time.perf_counter()
                    memory.add_message("single", speaker, text)
                    took = time.perf_counter() - start
                    if number % 2:
                        memory.flush()
                        stored.append((time.perf_counter() - start) * 1000.0)
                    else:
                        acked.append(took * 1000.0)
                    time.sleep(pause)
                memory.flush()
                start = time.perf_counter()
                count = 0
                for number, session in enumerate(turns):
                    payload = [{"role": r, "content": t} for r, t in session]
                    memory.add_messages(f"bulk-{number}", payload, progress=False)
                    count += len(payload)
                memory.flush()
                rate = count / (time.perf_counter() - start)
                memory.close()
            print(
                f"| {name} | {mode} | {statistics.median(acked):.1f} / {pct(acked, 0.95):.1f} "
                f"| {statistics.median(stored):.1f} / {pct(stored, 0.95):.1f} "
                f"| {rate:,.0f} | {count:,} | {load()} |"
            )
    print()


def main() -> None:
    parser = argparse.ArgumentParser()
    add_locomo_argument(parser)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--pause", type=float, default=0.05, help="s between add_message calls")
    parser.add_argument("--skip-start", action="store_true", help="only the writes")
    args = parser.parse_args()
    print(machine())
    print()
    if not args.skip_start:
        first_assemble(args.repeat)
    data = load_locomo(require_locomo(args.locomo))
    conversation = data.conversations[0]
    sessions: dict[str, list[tuple[str, str]]] = {}
    for turn in conversation.turns:
        role = "user" if turn.speaker == conversation.speakers[0] else "assistant"
        sessions.setdefault(str(turn.session), []).append((role, turn.text))
    writes(list(sessions.values())[: args.sessions], args.samples, args.pause)


if __name__ == "__main__":
    main()
