"""The within-tier solvers: exact is optimal, greedy is within its proven bound."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget.core.packing import solve

instances = st.lists(
    st.tuples(st.floats(0, 100, allow_nan=False), st.integers(0, 60)), min_size=0, max_size=10
)


def brute_force(values: list[float], weights: list[int], capacity: int) -> float:
    best = 0.0
    for r in range(len(values) + 1):
        for combo in itertools.combinations(range(len(values)), r):
            if sum(weights[i] for i in combo) <= capacity:
                best = max(best, sum(values[i] for i in combo))
    return best


@settings(max_examples=300, deadline=None)
@given(instance=instances, capacity=st.integers(0, 150))
def test_exact_is_optimal_and_feasible(instance: list[tuple[float, int]], capacity: int) -> None:
    values = [v for v, _ in instance]
    weights = [w for _, w in instance]
    chosen, report = solve(values, weights, capacity)
    assert sum(weights[i] for i in chosen) <= capacity
    assert len(set(chosen)) == len(chosen)
    assert abs(report.value - brute_force(values, weights, capacity)) < 1e-6
    assert report.solver in ("all", "exact", "none")


@settings(max_examples=300, deadline=None)
@given(instance=instances, capacity=st.integers(0, 150))
def test_greedy_is_feasible_and_within_its_bound(
    instance: list[tuple[float, int]], capacity: int
) -> None:
    values = [v for v, _ in instance]
    weights = [w for _, w in instance]
    chosen, report = solve(values, weights, capacity, exact_limit=0)
    optimum = brute_force(values, weights, capacity)
    assert sum(weights[i] for i in chosen) <= capacity
    assert report.value <= optimum + 1e-6
    assert optimum <= report.upper_bound + 1e-6  # the bound is a real bound
    assert report.value >= optimum / 2 - 1e-6  # the half-approximation guarantee


def test_ties_break_by_index() -> None:
    assert solve([1.0, 1.0, 1.0], [5, 5, 5], 10)[0] == [0, 1]


def test_negative_values_count_as_zero() -> None:
    chosen, report = solve([-5.0, 3.0], [1, 1], 1)
    assert chosen == [1] and report.value == 3.0
