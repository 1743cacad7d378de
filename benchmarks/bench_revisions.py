"""Run a benchmark on an earlier revision and on the working tree, alternating, in one run.

The machine is shared and noisy, so the two sides take turns (base, current, base, ...) and
the table gives the median of each figure over the rounds, with the load average. The base
revision is checked out into a temporary git worktree; its own benchmark script and core
package are used (the installed dependencies are shared).

Run: .venv/bin/python benchmarks/bench_revisions.py --base d563cb1 [--rounds 5]
         [--script bench_assemble.py] [-- --repeat 30]
     (``--script bench_middleware.py -- --turns 40``: issue 40's agent turn, base and current)
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("ctxbudget", "langchain-ctxbudget", "llamaindex-ctxbudget")
_MEMORY_ROW = r"\| memory, write-behind \(default\) \| "
# Figures read from each script's output.
FIGURES_OF = {
    # bench_assemble.py: the p50 of each line, and the speed-up.
    "bench_assemble.py": {
        "assemble messages p50 (ms)": re.compile(r"assemble \(messages\), warm:\s+p50 ([\d.]+)"),
        "assemble messages CPU p50 (ms)": re.compile(r"process CPU time:\s+p50 ([\d.]+)"),
        "assemble compact p50 (ms)": re.compile(r"assemble \(compact\), warm:\s+p50 ([\d.]+)"),
        "trim_messages p50 (ms)": re.compile(r"trim_messages \(tiktoken counter\):\s+p50 ([\d.]+)"),
        "speed-up vs trim_messages (x)": re.compile(r"speed-up at p50: ([\d.]+)x"),
    },
    # bench_middleware.py (issue 40): the agent turn bare and with memory, one embedding.
    "bench_middleware.py": {
        "bare agent turn p50 (ms)": re.compile(r"\| no middleware \| ([\d.]+) \|"),
        "memory turn p50 (ms)": re.compile(_MEMORY_ROW + r"([\d.]+) \|"),
        "memory turn p95 (ms)": re.compile(_MEMORY_ROW + r"[\d.]+ \| ([\d.]+) \|"),
        "memory overhead p50 (ms)": re.compile(_MEMORY_ROW + r"[\d.]+ \| [\d.]+ \| ([\d.]+) \|"),
        "one query embedding p50 (ms)": re.compile(r"one query embedding .*: p50 ([\d.]+) ms"),
        "turn p95 / bare p50 (x)": None,
        "overhead / one embedding (x)": None,
    },
}
FIGURES = FIGURES_OF["bench_assemble.py"]


def run(tree: Path, script: str, extra: list[str]) -> dict[str, float]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [*(str(tree / "packages" / p / "src") for p in PACKAGES), str(tree / "benchmarks")]
    )
    out = subprocess.run(
        [sys.executable, str(tree / "benchmarks" / script), *extra],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=tree,
    ).stdout
    figures = {}
    for name, pattern in FIGURES_OF.get(script, FIGURES).items():
        if pattern is None:  # derived below
            continue
        match = pattern.search(out)
        if match:
            figures[name] = float(match.group(1))
    bare, p95 = figures.get("bare agent turn p50 (ms)"), figures.get("memory turn p95 (ms)")
    overhead = figures.get("memory overhead p50 (ms)")
    embedding = figures.get("one query embedding p50 (ms)")
    if bare and p95:  # issue 40's two multiples, of each run
        figures["turn p95 / bare p50 (x)"] = p95 / bare
    if overhead and embedding:
        figures["overhead / one embedding (x)"] = overhead / embedding
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", required=True, help="the git revision to compare against")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--script", default="bench_assemble.py")
    args, extra = parser.parse_known_args()
    extra = [a for a in extra if a != "--"]
    base_rev = subprocess.run(
        ["git", "rev-parse", "--short", args.base],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    ).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        subprocess.run(
            ["git", "worktree", "add", "--detach", "--quiet", str(base), base_rev],
            check=True,
            cwd=ROOT,
        )
        try:
            results: dict[str, list[dict[str, float]]] = {"base": [], "current": []}
            loads = []
            for _ in range(args.rounds):
                loads.append(os.getloadavg()[0])
                sides = [("base", base), ("current", ROOT)]
                for side, tree in sides if len(loads) % 2 else sides[::-1]:  # turn about
                    results[side].append(run(tree, args.script, extra))
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(base)], check=True, cwd=ROOT
            )
    print(f"{args.script}: base {base_rev} vs working tree, {args.rounds} alternating rounds")
    print(f"load average (1 min) at each round: {', '.join(f'{x:.1f}' for x in loads)}")
    print(f"{'median over rounds':<34}{'base':>10}{'current':>10}{'current/base':>14}")
    for name in FIGURES_OF.get(args.script, FIGURES):
        before = [r[name] for r in results["base"] if name in r]
        after = [r[name] for r in results["current"] if name in r]
        if not before or not after:
            continue
        b, a = statistics.median(before), statistics.median(after)
        print(f"{name:<34}{b:>10.2f}{a:>10.2f}{a / b:>14.2f}")
    # trim_messages is the same code on both sides (LangChain's, installed once): its timings
    # from every round together are the steadier reference for the speed-up of each side.
    trim = [r[k] for side in results.values() for r in side for k in r if k.startswith("trim")]
    ours = "assemble messages p50 (ms)"
    if trim and all(ours in r for side in results.values() for r in side):
        pooled = statistics.median(trim)
        b = pooled / statistics.median(r[ours] for r in results["base"])
        a = pooled / statistics.median(r[ours] for r in results["current"])
        label = "speed-up vs pooled trim_messages"
        print(f"{label:<34}{b:>10.1f}{a:>10.1f}{a / b:>14.2f}")


if __name__ == "__main__":
    main()
