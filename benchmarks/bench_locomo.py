"""LoCoMo evidence recall: ContextMemory's defaults against a vector top-k and a recency window.

The full evaluation of ``ctxbudget eval locomo``: every conversation of the file, every question
with evidence, budgets 1k/2k/4k/8k, all three methods on the same tokens and the same rendering
(compact format, counted for gpt-4o). Prints the Markdown table (headline recall, answer
containment, tokens and latency, per category, adversarial apart) and the run time; ``--out``
also writes the JSON file and the plot.

The data is LoCoMo (Maharana et al., ACL 2024), licensed CC BY-NC 4.0: it is read from outside
the repository and must never be copied into it.

Run: .venv/bin/python benchmarks/bench_locomo.py [--locomo ../shared/data/locomo/locomo_dev.json]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from _common import add_locomo_argument, machine, require_locomo

from ctxbudget.eval import load_locomo, plot_recall, run_locomo, to_json, to_markdown
from ctxbudget.eval.runner import DEFAULT_BUDGETS


def main() -> None:
    parser = argparse.ArgumentParser()
    add_locomo_argument(parser)
    parser.add_argument("--out", type=Path, default=None, help="also write JSON and PNG here")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args()
    path = require_locomo(args.locomo)
    started = time.perf_counter()
    data = load_locomo(path)
    run = run_locomo(data, budgets=DEFAULT_BUDGETS, progress=not args.no_progress)
    elapsed = time.perf_counter() - started
    print(f"machine: {machine()}, load average {os.getloadavg()[0]:.1f} at the end")
    print(f"data: {path.name}")
    print()
    print(to_markdown(run))
    print(f"whole benchmark (model load included): {elapsed:.0f} s")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "locomo.md").write_text(to_markdown(run), encoding="utf-8")
        (args.out / "locomo.json").write_text(to_json(run), encoding="utf-8")
        plot_recall(run, args.out / "locomo_recall.png")
        print(f"wrote {args.out}/locomo.md, locomo.json and locomo_recall.png")


if __name__ == "__main__":
    main()
