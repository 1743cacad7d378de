from __future__ import annotations

import pytest

from ctxbudget import Budget, InvalidBudgetError, Tier, UnknownModelError


def test_available_is_window_minus_reserve_and_safety() -> None:
    assert Budget(window=8192, reserve=1024, safety=100).available == 7068


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"window": 0}, "positive"),
        ({"window": -5}, "positive"),
        ({"window": 1000, "reserve": 1000}, "no room"),
        ({"window": 1000, "reserve": 2000}, "lower the reserve"),
        ({"window": 1000, "reserve": -1}, "cannot be negative"),
        ({"window": 1000, "floors": {Tier.RECENT: 1.5}}, "fraction"),
        ({"window": 1000, "floors": {Tier.RECENT: 600, Tier.PINNED: 600}}, "floors add up"),
        ({"window": 1000, "floors": {Tier.RECENT: 500}, "caps": {Tier.RECENT: 100}}, "floor"),
        ({"window": 10.5}, "int"),
    ],
)
def test_invalid_budgets_say_what_to_change(kwargs: dict[str, object], words: str) -> None:
    with pytest.raises(InvalidBudgetError, match=words) as info:
        Budget(**kwargs)  # type: ignore[arg-type]
    assert isinstance(info.value, ValueError)


def test_shares_are_fractions_or_tokens() -> None:
    budget = Budget(window=1000, floors={Tier.RECENT: 0.25}, caps={Tier.RETRIEVED: 300})
    assert budget.floor_tokens(Tier.RECENT) == 250
    assert budget.cap_tokens(Tier.RETRIEVED) == 300
    assert budget.cap_tokens(Tier.PINNED) is None


def test_for_model_knows_windows() -> None:
    budget = Budget.for_model("gpt-4o", reserve=4096)
    assert budget.window == 128_000 and budget.available == 128_000 - 4096
    assert Budget.for_model("gpt-4").window == 8192
    assert Budget.for_model("gpt-4").reserve <= 8192 // 4


def test_for_model_unknown_model() -> None:
    with pytest.raises(UnknownModelError):
        Budget.for_model("no-such-model-anywhere")


def test_coerce() -> None:
    assert Budget.coerce(500).available == 500
    with pytest.raises(InvalidBudgetError):
        Budget.coerce(0)
    with pytest.raises(InvalidBudgetError):
        Budget.coerce("500")  # type: ignore[arg-type]
