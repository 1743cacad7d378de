"""How far the greedy knapsack falls from the exact one, and what the exactness costs.

On seeded random instances (token weights 10-400, capacity a random 10-50% of the total weight),
`ctxbudget.core.packing.solve` runs once with the exact DP forced (``exact_limit`` huge) and once with
the greedy forced (``exact_limit=0``). Per size and score distribution it prints the greedy's
value gap to the optimum (1 - greedy/exact: mean and worst), how often the greedy was optimal,
the slack of the LP bound the greedy reports (upper_bound/exact - 1), both median solve times,
and how often the default ``exact_limit`` would already have fallen back to the greedy.

Score distributions: ``uniform`` U(0, 1); ``skewed`` exponential (mean 1); ``correlated`` weakly
correlated with the weight (w/400 +- 10%); ``strong`` strongly correlated (w + 40)/400, the
classic hard case for density-greedy (every item has nearly the same density).

Run: .venv/bin/python benchmarks/bench_knapsack_gap.py [--instances 200] [--sizes 20,50,100,200]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

from _common import machine

from ctxbudget.core.packing import DEFAULT_EXACT_LIMIT, solve

MIN_WEIGHT, MAX_WEIGHT = 10, 400
EXACT = 10**15  # large enough that every instance here runs the DP
TOLERANCE = 1e-9  # relative; the DP breaks ties with an absolute epsilon of 1e-9


def _uniform(rng: random.Random, weight: int) -> float:
    return rng.random()


def _skewed(rng: random.Random, weight: int) -> float:
    return rng.expovariate(1.0)


def _correlated(rng: random.Random, weight: int) -> float:
    return max(0.0, weight / MAX_WEIGHT * rng.uniform(0.9, 1.1))


def _strong(rng: random.Random, weight: int) -> float:
    return (weight + MAX_WEIGHT / 10) / MAX_WEIGHT


DISTRIBUTIONS: dict[str, Callable[[random.Random, int], float]] = {
    "uniform": _uniform,
    "skewed": _skewed,
    "correlated": _correlated,
    "strong": _strong,
}


def instance(
    rng: random.Random, n: int, scores: Callable[[random.Random, int], float]
) -> tuple[list[float], list[int], int]:
    weights = [rng.randint(MIN_WEIGHT, MAX_WEIGHT) for _ in range(n)]
    values = [scores(rng, w) for w in weights]
    capacity = int(rng.uniform(0.1, 0.5) * sum(weights))
    return values, weights, capacity


def timed_solve(
    values: list[float], weights: list[int], capacity: int, exact_limit: int, repeat: int
) -> tuple[list[int], float, float, list[float]]:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        chosen, report = solve(values, weights, capacity, exact_limit=exact_limit)
        samples.append((time.perf_counter() - start) * 1000.0)
    return chosen, report.value, report.upper_bound, samples


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--instances", type=int, default=200, help="instances per size and distribution"
    )
    parser.add_argument("--sizes", default="20,50,100,200", help="item counts, comma-separated")
    parser.add_argument(
        "--repeat", type=int, default=3, help="timed solves per instance and solver"
    )
    parser.add_argument("--seed", type=int, default=2024)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    print(f"machine: {machine()}")
    print(
        f"instances: {args.instances} per row, weights {MIN_WEIGHT}-{MAX_WEIGHT} tokens, capacity "
        f"U(10%, 50%) of the total weight, seed {args.seed}; times are medians over "
        f"{args.instances} instances x {args.repeat} runs"
    )
    print()
    print(
        "| items | scores | greedy gap mean | greedy gap worst | greedy optimal | LP bound slack mean "
        "| LP bound slack worst | exact ms (p50) | greedy ms (p50) | default solver greedy |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    problems: list[str] = []
    started = time.perf_counter()
    for n in sizes:
        for name, scores in DISTRIBUTIONS.items():
            rng = random.Random(f"{args.seed}-{n}-{name}")
            gaps: list[float] = []
            slacks: list[float] = []
            optimal = 0
            default_greedy = 0
            exact_ms: list[float] = []
            greedy_ms: list[float] = []
            for k in range(args.instances):
                values, weights, capacity = instance(rng, n, scores)
                chosen, exact, _, t_exact = timed_solve(
                    values, weights, capacity, EXACT, args.repeat
                )
                picked, greedy, bound, t_greedy = timed_solve(
                    values, weights, capacity, 0, args.repeat
                )
                exact_ms.extend(t_exact)
                greedy_ms.extend(t_greedy)
                for label, ids in (("exact", chosen), ("greedy", picked)):
                    if sum(weights[i] for i in ids) > capacity:
                        problems.append(f"{n}/{name}#{k}: {label} choice exceeds the capacity")
                if exact <= 0:
                    continue
                gap = 1.0 - greedy / exact
                gaps.append(max(0.0, gap))
                slacks.append(bound / exact - 1.0)
                optimal += gap <= TOLERANCE
                default_greedy += n * (capacity + 1) > DEFAULT_EXACT_LIMIT
                if greedy > exact * (1 + TOLERANCE):
                    problems.append(f"{n}/{name}#{k}: greedy {greedy:.6f} beats exact {exact:.6f}")
                if bound < exact * (1 - TOLERANCE):
                    problems.append(
                        f"{n}/{name}#{k}: LP bound {bound:.6f} below optimum {exact:.6f}"
                    )
                if greedy < exact / 2 * (1 - TOLERANCE):
                    problems.append(f"{n}/{name}#{k}: greedy below half the optimum")
            count = len(gaps)
            print(
                f"| {n} | {name} | {statistics.fmean(gaps):.2%} | {max(gaps):.2%} "
                f"| {optimal / count:.0%} | {statistics.fmean(slacks):.2%} | {max(slacks):.2%} "
                f"| {statistics.median(exact_ms):.2f} | {statistics.median(greedy_ms):.3f} "
                f"| {default_greedy / count:.0%} |"
            )
    print()
    print(
        "gap = 1 - greedy/exact; LP bound slack = greedy's upper_bound/exact - 1 (how much the "
        "reported gap overstates the true one); default solver greedy = share of instances where "
        f"items x (capacity + 1) > DEFAULT_EXACT_LIMIT ({DEFAULT_EXACT_LIMIT:,})"
    )
    print(
        f"checks (capacity respected, greedy <= exact <= bound, greedy >= exact/2): {len(problems)} failures"
    )
    for problem in problems[:20]:
        print(f"  {problem}")
    print(f"total run time: {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
