"""Named strategies: ``"chat"``, ``"agent"``, ``"coding"``, ``"rag"``, ``"default"``, and yours.

`preset` looks a name up, `register_preset` adds one, `as_strategy` turns what a caller passes
as ``strategy=`` (a name, a `Strategy` or a mapping of its fields) into a `Strategy`. Why each
preset has the numbers it has is in docs/strategies.md; ``"default"`` is exactly what
`MemoryConfig()` does, so ``ContextMemory(strategy="default")`` changes nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from ctxbudget.core.items import Tier
from ctxbudget.core.numbers import shown
from ctxbudget.errors import ConfigurationError, ConfigurationTypeError
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.memory.policy.strategy import STRATEGY_FIELDS, Strategy

__all__ = ["BUILTIN_PRESETS", "PRESETS", "StrategyLike", "as_strategy", "preset", "register_preset"]

StrategyLike = Strategy | str | Mapping[str, Any]
"""What ``strategy=`` takes: a preset name, a `Strategy`, or a mapping of `Strategy` fields."""

_RETRIEVED, _SUMMARY = int(Tier.RETRIEVED), int(Tier.SUMMARY)

_BUILTIN = {
    # Today's defaults, unchanged (tuned on LoCoMo, see docs/benchmarks.md).
    "default": Strategy.from_config(MemoryConfig(), name="default"),
    # A companion: one relationship over months; what was said long ago stays true.
    "chat": Strategy(
        name="chat",
        floors={_RETRIEVED: 0.5, _SUMMARY: 0.05},
        recent_share=(0.05, 0.4),
        other_sessions_k=16,
        document_k=2,
    ),
    # A tool-using agent: the task's running chain of calls and results comes first.
    "agent": Strategy(
        name="agent",
        floors={_RETRIEVED: 0.15},
        caps={_RETRIEVED: 0.35},
        recent_share=(0.25, 0.8),
        recent_messages=80,
        min_exchanges=2,
        semantic_k=16,
        document_k=4,
        other_sessions_k=4,
        query_turns=3,
        scoring={"half_life_days": 7.0, "recency_weight": 0.5},
    ),
    # A coding agent: long tool outputs (files, diffs, test runs), exact identifiers.
    "coding": Strategy(
        name="coding",
        floors={_RETRIEVED: 0.1},
        caps={_RETRIEVED: 0.3},
        recent_share=(0.35, 0.85),
        recent_messages=120,
        min_exchanges=2,
        semantic_k=16,
        document_k=12,
        other_sessions_k=2,
        scoring={"half_life_days": 3.0, "recency_weight": 0.5, "lexical_weight": 0.7},
    ),
    # Questions over documents: the retrieved chunks are the answer, the chat is context.
    "rag": Strategy(
        name="rag",
        floors={_RETRIEVED: 0.6},
        recent_share=(0.02, 0.25),
        document_k=24,
        other_sessions_k=4,
        scoring={"half_life_days": 3650.0, "recency_weight": 0.05},
    ),
}

BUILTIN_PRESETS = tuple(sorted(_BUILTIN))
"""The names of the presets ctxbudget ships (they cannot be replaced)."""

_REGISTRY: dict[str, Strategy] = dict(_BUILTIN)
_LOCK = threading.Lock()

PRESETS: Mapping[str, Strategy] = MappingProxyType(_REGISTRY)
"""Every preset by name, the built-in ones and those `register_preset` added (read-only)."""


def _key(name: object) -> str:
    if not isinstance(name, str) or not name.strip():
        msg = f"a preset name is non-empty text, got {name!r}"
        raise ConfigurationTypeError(msg)
    return name.strip().lower()


def preset(name: str) -> Strategy:
    """The preset called ``name`` (case does not matter).

    Raises:
        ConfigurationError: no preset has that name (the message lists those that do).

    >>> preset("rag").document_k
    24
    """
    key = _key(name)
    found = _REGISTRY.get(key)
    if found is None:
        msg = (
            f"unknown strategy preset {name!r}; known presets: {', '.join(sorted(_REGISTRY))} "
            "(add your own with register_preset(name, Strategy(...)))"
        )
        raise ConfigurationError(msg)
    return found


def register_preset(
    name: str, strategy: Strategy | Mapping[str, Any], *, replace: bool = False
) -> Strategy:
    """Make ``strategy`` available as ``strategy=name`` everywhere in this process.

    Its unset fields inherit, like any strategy: from the memory's `MemoryConfig`. To start
    from a preset, merge: ``register_preset("support", preset("rag").merge(Strategy(...)))``.

    Args:
        name: the preset's name (case does not matter).
        strategy: a `Strategy`, or a mapping of its fields.
        replace: replace a preset registered before under that name (never a built-in one).

    Returns:
        The registered strategy, named ``name``.

    Raises:
        ConfigurationError: the name is a built-in preset's, or already registered without
            ``replace=True``; or the strategy is invalid.
    """
    key = _key(name)
    if key in _BUILTIN:
        msg = (
            f"{name!r} is a built-in preset and cannot be replaced; register yours under "
            f"another name (e.g. 'my-{key}'), starting from it with preset({key!r}).merge(...)"
        )
        raise ConfigurationError(msg)
    given = as_strategy(strategy) if isinstance(strategy, Mapping) else strategy
    if not isinstance(given, Strategy):
        msg = f"register_preset takes a Strategy or a mapping of its fields, got {strategy!r}"
        raise ConfigurationTypeError(msg)
    named = Strategy(**{**given.as_dict(), "name": key})
    with _LOCK:
        if key in _REGISTRY and not replace:
            msg = f"a preset named {key!r} is already registered; pass replace=True to replace it"
            raise ConfigurationError(msg)
        _REGISTRY[key] = named
    return named


def as_strategy(value: StrategyLike) -> Strategy:
    """A `Strategy` from what ``strategy=`` takes: a preset name, a `Strategy`, or a mapping.

    Raises:
        ConfigurationError: an unknown preset name, a mapping with keys that are no `Strategy`
            field, or invalid values.

    >>> as_strategy({"document_k": 4}).document_k
    4
    """
    if isinstance(value, Strategy):
        return value
    if isinstance(value, str):
        return preset(value)
    if isinstance(value, Mapping):
        unknown = sorted(str(k) for k in value if k not in STRATEGY_FIELDS)
        if unknown:
            msg = (
                f"strategy mapping: unknown field(s) {', '.join(map(repr, unknown))}; "
                f"a strategy sets {', '.join(STRATEGY_FIELDS)}"
            )
            raise ConfigurationError(msg)
        return Strategy(**{str(k): v for k, v in value.items()})
    msg = (
        f"strategy must be a preset name ({', '.join(sorted(_REGISTRY))}), a Strategy or a "
        f"mapping of its fields, got {shown(value)}"
    )
    raise ConfigurationTypeError(msg)
