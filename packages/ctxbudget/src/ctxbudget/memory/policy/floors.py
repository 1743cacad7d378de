"""The floor a plain token budget keeps for retrieved items (`MemoryConfig.retrieved_floor`).

`ContextMemory.assemble`, the strategies' plan and the LangChain middleware's window budget
apply it the same way.
"""

from __future__ import annotations

from ctxbudget.core.budget import Budget
from ctxbudget.core.items import Tier

__all__ = ["retrieved_floor", "retrieved_floors"]


def retrieved_floors(floor: float) -> dict[int, float]:
    """The tier floors of a plain token budget: ``floor`` of it kept for retrieved items.

    ``floor`` is `MemoryConfig.retrieved_floor` (at most the whole budget; 0: no floor).
    `ContextMemory.assemble` applies them (`retrieved_floor`), and so does the LangChain
    middleware to the budget it makes from a window.

    >>> retrieved_floors(0.25)
    {50: 0.25}
    """
    return {int(Tier.RETRIEVED): min(1.0, floor)} if floor > 0 else {}


def retrieved_floor(budget: Budget | int, floor: float) -> Budget:
    """A plain token count keeps ``floor`` for retrieved items; a `Budget` is used as given.

    ``floor`` is `MemoryConfig.retrieved_floor` (see `retrieved_floors`).
    """
    plain = not isinstance(budget, Budget)
    budget = Budget.coerce(budget)
    floors = retrieved_floors(floor)
    if plain and floors:
        budget = Budget(window=budget.window, floors=floors)
    return budget
