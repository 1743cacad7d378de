"""`Plan`: what one call uses once its strategies are merged: a `MemoryConfig` and budget shares.

`ContextMemory` keeps its config with its own strategy applied (`memory_strategy`); each call
merges the strategy it is given over the memory's (`plan_for`) and uses the plan's config to
gather candidates and its shares to budget them (`Plan.budget`). The adapters call the same
two functions, so ``strategy=`` means the same everywhere.

With no strategy at all, nothing changes: a plain token budget keeps
`MemoryConfig.retrieved_floor` for retrieved items and a `Budget` is used as given. With one,
a plain token budget gets the strategy's floors and caps over that retrieved floor, and a
`Budget` gets them for every tier it sets neither a floor nor a cap for (its own win).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from ctxbudget.core.budget import Budget, Share
from ctxbudget.core.items import Tier
from ctxbudget.errors import ConfigurationError, InvalidBudgetError
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.memory.policy.floors import retrieved_floor, retrieved_floors
from ctxbudget.memory.policy.presets import StrategyLike, as_strategy
from ctxbudget.memory.policy.strategy import Strategy, merge_strategies

__all__ = ["Plan", "memory_strategy", "plan_for"]

_NONE: Mapping[int, Share] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Plan:
    """The settings of one call: its config, and the floors and caps of its budget.

    Attributes:
        config: the `MemoryConfig` candidates are gathered with.
        strategy: the merged strategy (None: no strategy was given, today's rules apply).
        floors: tier floors for a plain token budget.
        caps: tier caps for a plain token budget.
    """

    config: MemoryConfig
    strategy: Strategy | None = None
    floors: Mapping[int, Share] = field(default_factory=dict)
    caps: Mapping[int, Share] = field(default_factory=dict)

    def budget(self, budget: Budget | int) -> Budget:
        """``budget`` with this plan's floors and caps (see the module docstring).

        Raises:
            InvalidBudgetError: not a budget, or the shares cannot be met by it (token floors
                larger than what it has available; a strategy floor above the budget's own
                caps); the message names the strategy.
        """
        if self.strategy is None:  # exactly as before strategies (no floors: no memory)
            if not self.floors:
                return Budget.coerce(budget)
            return retrieved_floor(budget, self.config.retrieved_floor)
        given = Budget.coerce(budget)
        own = set(given.floors) | set(given.caps) if isinstance(budget, Budget) else set()
        floors = {t: s for t, s in self.floors.items() if t not in own}
        caps = {t: s for t, s in self.caps.items() if t not in own}
        if not floors and not caps:
            return given
        try:
            return dataclasses.replace(
                given, floors={**floors, **given.floors}, caps={**caps, **given.caps}
            )
        except InvalidBudgetError as exc:
            msg = (
                f"strategy {self.strategy.name or '(unnamed)'!r} on a budget of "
                f"{given.available:,} available tokens: {exc}"
            )
            raise InvalidBudgetError(msg) from exc


def memory_strategy(
    config: MemoryConfig | None, strategy: StrategyLike | None
) -> tuple[MemoryConfig, Strategy | None]:
    """A memory's config with its strategy applied, and that strategy (`ContextMemory`).

    Raises:
        ConfigurationError: an unknown preset or an invalid strategy.
    """
    config = config or MemoryConfig()
    if strategy is None:
        return config, None
    chosen = as_strategy(strategy)
    return chosen.apply(config), chosen


def plan_for(
    config: MemoryConfig | None,
    strategy: Strategy | None = None,
    override: StrategyLike | None = None,
) -> Plan:
    """The plan of one call: ``override`` merged over a memory's ``strategy``.

    Args:
        config: the memory's config, its ``strategy`` already applied (`memory_strategy`);
            None for a caller without memory (nothing retrieved: no retrieved floor).
        strategy: the memory's strategy.
        override: the call's ``strategy=``.

    Raises:
        ConfigurationError: an unknown preset, an invalid strategy, or merged floors that add
            up to more than the whole budget.

    >>> plan_for(MemoryConfig(), None, "rag").config.document_k
    24
    """
    base = config or MemoryConfig()
    given = None if override is None else as_strategy(override)
    layers = [s for s in (strategy, given) if s is not None]
    if not layers:
        return Plan(
            base, floors=retrieved_floors(base.retrieved_floor) if config is not None else _NONE
        )
    merged = merge_strategies(*layers)
    kept: dict[int, float] = {}
    if config is not None and int(Tier.RETRIEVED) not in (merged.floors or {}):
        kept = retrieved_floors(base.retrieved_floor)
    try:
        shares = merge_strategies(Strategy(floors=kept), merged)
    except ConfigurationError as exc:
        if not kept:
            raise
        msg = (
            f"{exc} (RETRIEVED {base.retrieved_floor:g} is the memory's retrieved_floor, kept "
            "unless the strategy sets its own: set floors={Tier.RETRIEVED: ...} or lower others)"
        )
        raise ConfigurationError(msg) from exc
    return Plan(
        base if given is None else given.apply(base),
        merged,
        floors=MappingProxyType(dict(shares.floors or {})),
        caps=MappingProxyType(dict(shares.caps or {})),
    )
