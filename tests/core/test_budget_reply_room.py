"""`with_reply_room`: a budget whose reserve is at least what the model is set to generate.

The one place both adapters take the reply's room from (LangChain's ``reply_room`` with a chat
model's ``max_tokens``, LlamaIndex's ``from_defaults(llm=)`` with ``metadata.num_output``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxbudget import Budget, InvalidBudgetError, Tier
from ctxbudget.core import budget as budget_module
from ctxbudget.core.budget import with_reply_room


def test_it_is_a_public_name_of_the_budget_module() -> None:
    assert "with_reply_room" in budget_module.__all__


@given(
    window=st.integers(1, 10**6),
    reserve=st.integers(0, 10**6),
    safety=st.integers(0, 1_000),
    output=st.integers(1, 2 * 10**6),
)
def test_the_reserve_is_at_least_the_output_or_the_budget_is_refused(
    window: int, reserve: int, safety: int, output: int
) -> None:
    if window - reserve - safety <= 0:
        return
    budget = Budget(window=window, reserve=reserve, safety=safety)
    room = max(reserve, output)
    if window - room - safety <= 0:
        with pytest.raises(InvalidBudgetError, match=f"up to {output:,} tokens"):
            with_reply_room(budget, output)
        return
    made = with_reply_room(budget, output)
    assert (made.window, made.reserve, made.safety) == (window, room, safety)
    assert made.available == window - room - safety > 0


def test_none_keeps_the_budget_and_floors_and_caps_are_kept() -> None:
    budget = Budget(window=8_192, reserve=100, floors={Tier.RECENT: 0.2}, caps={Tier.RECENT: 0.5})
    assert with_reply_room(budget, None) is budget
    made = with_reply_room(budget, np.int64(1_024))  # numpy's ints too
    assert made.reserve == 1_024 and type(made.reserve) is int
    assert (dict(made.floors), dict(made.caps)) == (dict(budget.floors), dict(budget.caps))


def test_the_refusal_gives_the_numbers_the_source_and_the_fix() -> None:
    budget = Budget(window=2_000, safety=10)
    with pytest.raises(InvalidBudgetError) as caught:
        with_reply_room(budget, 1_990, source="the chat model", fix="lower its max_tokens")
    assert str(caught.value) == (
        "the chat model is set to generate up to 1,990 tokens, which leaves no room for the "
        "prompt in its window of 2,000 (safety 10); lower its max_tokens"
    )


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, math.nan, "100"])
def test_an_output_that_is_not_a_count_is_refused(bad: object) -> None:
    with pytest.raises(InvalidBudgetError, match=r"the reply's tokens \(the model\)"):
        with_reply_room(Budget(window=8_192), bad)  # type: ignore[arg-type]
