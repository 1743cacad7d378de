"""Choosing items within one tier: exact 0/1 knapsack when small enough, greedy with a bound.

Both maximize the total score of the chosen items under a token capacity. The exact solver is a
dynamic program over capacities (NumPy), used when ``items x capacity`` is at most
``exact_limit``. Otherwise items are taken by score density (score per token); the result is at
least half the optimum (the better of the greedy fill and the best single item), and the report
carries the LP-relaxation upper bound of the optimum, so the gap is known on every call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

__all__ = ["DEFAULT_EXACT_LIMIT", "SolverReport", "solve"]

DEFAULT_EXACT_LIMIT = 1_000_000
_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class SolverReport:
    """How one tier was packed.

    Attributes:
        solver: ``"all"`` (everything fit), ``"exact"`` (knapsack DP), ``"greedy"`` (by density),
            or ``"none"`` (no room).
        candidates: items offered.
        capacity: tokens the tier could use.
        value: total score chosen.
        upper_bound: a proven upper bound of the best possible total (equal to ``value`` for
            ``all`` and ``exact``).
    """

    solver: Literal["all", "exact", "greedy", "none"]
    candidates: int
    capacity: int
    value: float
    upper_bound: float

    @property
    def gap(self) -> float:
        """Upper bound of the value lost against the optimum, as a fraction of the bound."""
        if self.upper_bound <= 0:
            return 0.0
        return max(0.0, (self.upper_bound - self.value) / self.upper_bound)


def solve(
    values: Sequence[float],
    weights: Sequence[int],
    capacity: int,
    *,
    exact_limit: int = DEFAULT_EXACT_LIMIT,
) -> tuple[list[int], SolverReport]:
    """Choose item indices maximizing the total value with total weight at most ``capacity``.

    Values below zero count as zero. Ties are broken by index (earlier first), so the same input
    always gives the same choice.

    >>> solve([6.0, 10.0, 12.0], [1, 2, 3], 5)[0]
    [1, 2]
    """
    n = len(values)
    gains = [max(0.0, float(v)) for v in values]
    if n == 0 or capacity < 0:
        return [], SolverReport("none", n, max(capacity, 0), 0.0, 0.0)
    if sum(weights) <= capacity:
        return list(range(n)), SolverReport("all", n, capacity, sum(gains), sum(gains))
    free = [i for i in range(n) if weights[i] == 0]
    rest = [i for i in range(n) if 0 < weights[i] <= capacity]
    if not rest:
        value = sum(gains[i] for i in free)
        return free, SolverReport("none", n, capacity, value, value)
    if len(rest) * (capacity + 1) <= exact_limit:
        chosen = _exact([gains[i] for i in rest], [weights[i] for i in rest], capacity)
        picked = sorted(free + [rest[i] for i in chosen])
        value = sum(gains[i] for i in picked)
        return picked, SolverReport("exact", n, capacity, value, value)
    chosen, bound = _greedy([gains[i] for i in rest], [weights[i] for i in rest], capacity)
    picked = sorted(free + [rest[i] for i in chosen])
    value = sum(gains[i] for i in picked)
    free_value = sum(gains[i] for i in free)
    return picked, SolverReport("greedy", n, capacity, value, bound + free_value)


def _exact(values: Sequence[float], weights: Sequence[int], capacity: int) -> list[int]:
    best = np.zeros(capacity + 1, dtype=np.float64)
    keep = np.zeros((len(values), capacity + 1), dtype=np.bool_)
    for i, (value, weight) in enumerate(zip(values, weights, strict=True)):
        with_item = best[: capacity + 1 - weight] + value
        better = with_item > best[weight:] + _EPS
        keep[i, weight:] = better
        best[weight:] = np.where(better, with_item, best[weight:])
    chosen: list[int] = []
    room = capacity
    for i in range(len(values) - 1, -1, -1):
        if keep[i, room]:
            chosen.append(i)
            room -= weights[i]
    chosen.reverse()
    return chosen


def _greedy(
    values: Sequence[float], weights: Sequence[int], capacity: int
) -> tuple[list[int], float]:
    keys = [(-values[i] / weights[i], -values[i]) for i in range(len(values))]
    order = sorted(range(len(values)), key=keys.__getitem__)  # stable: ties by index
    chosen: list[int] = []
    room = capacity
    for i in order:
        if weights[i] <= room:
            chosen.append(i)
            room -= weights[i]
    # Dantzig's bound: whole items by density until one does not fit, plus its fraction.
    bound = 0.0
    left = capacity
    for i in order:
        if weights[i] <= left:
            bound += values[i]
            left -= weights[i]
        else:
            bound += values[i] * left / weights[i]
            break
    total = sum(values[i] for i in chosen)
    best_single = max(range(len(values)), key=lambda i: (values[i], -i))
    if values[best_single] > total + _EPS:
        # The classic half-approximation: the best single item beats a poor greedy fill.
        chosen = [best_single]
        room = capacity - weights[best_single]
        for i in order:
            if i != best_single and weights[i] <= room:
                chosen.append(i)
                room -= weights[i]
    return sorted(chosen), bound
