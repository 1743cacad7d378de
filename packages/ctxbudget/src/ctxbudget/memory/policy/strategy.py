"""`Strategy`: how a kind of app spends its budget, as a layer over `MemoryConfig`.

A chat companion, a coding agent and a RAG app want different things from the same budget: how
much of it history may take, how much is kept for retrieved memories and documents, how fast
old memories fade. A `Strategy` says only what it changes: every field is optional and None
inherits. Layers merge field by field, the later one winning where it is set (tier by tier for
floors and caps, weight by weight for scoring)::

    memory's config  <  ContextMemory(strategy=...)  <  assemble(..., strategy=...)

The named presets (``"chat"``, ``"agent"``, ``"coding"``, ``"rag"``, ``"default"``) and user
presets are in `ctxbudget.memory.policy.presets`; how one call applies the merged layers (its
`MemoryConfig` and its budget's floors and caps) is `ctxbudget.memory.policy.plan`. Like
`MemoryConfig` and `Scoring`, this module needs only numpy: it imports without Chroma.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral, Real
from types import MappingProxyType
from typing import Any

from ctxbudget.core.budget import Share
from ctxbudget.core.items import NEVER_PRUNED_TIERS, Tier, tier_name
from ctxbudget.errors import ConfigurationError, ConfigurationTypeError
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.memory.policy.floors import retrieved_floors
from ctxbudget.memory.policy.scoring import Scoring

__all__ = ["SCORING_WEIGHTS", "STRATEGY_FIELDS", "Strategy", "merge_strategies"]

SCORING_WEIGHTS = tuple(f.name for f in dataclasses.fields(Scoring))
"""The `Scoring` fields a strategy's ``scoring`` may set."""

_COUNTS = (
    "recent_messages",
    "min_exchanges",
    "semantic_k",
    "document_k",
    "other_sessions_k",
    "query_turns",
    "neighbours",
)
_SHARES = ("floors", "caps")
_TOLERANCE = 1e-9  # fractions that add up to 1 in floating point (0.1 + 0.2 + 0.7)


@dataclass(frozen=True, slots=True)
class Strategy:
    """What one kind of app changes in how `ContextMemory` gathers and budgets; None inherits.

    Shares are fractions of the tokens available (a float in (0, 1]) or token counts (an int),
    as in `Budget`. Tiers are `Tier` values, ints, or tier names (``"RETRIEVED"``, from a JSON
    file). The float floors of one strategy may add up to at most 1; ``floors={Tier.RETRIEVED:
    0}`` removes the memory's retrieved floor (`MemoryConfig.retrieved_floor`).

    Attributes:
        name: a label for reports and errors (merged layers join theirs with ``+``).
        floors: per tier, a share kept for that tier even against higher tiers (only as much as
            its candidates can use). Pinned facts, the task stack and tool schemas are never
            cut, so floors matter for history (``RECENT``), retrieved memories and documents
            (``RETRIEVED``), summaries (``SUMMARY``) and your own tiers.
        caps: per tier, the most that tier may use.
        scoring: `Scoring` weights by name (``{"half_life_days": 7, "recency_weight": 0.5}``).
        recent_share: `MemoryConfig.recent_share`, the (least, most) share of history.
        recent_messages: `MemoryConfig.recent_messages`.
        min_exchanges: `MemoryConfig.min_exchanges`.
        semantic_k: `MemoryConfig.semantic_k`.
        document_k: `MemoryConfig.document_k`.
        other_sessions: `MemoryConfig.other_sessions`.
        other_sessions_k: `MemoryConfig.other_sessions_k`.
        query_turns: `MemoryConfig.query_turns`.
        neighbours: `MemoryConfig.neighbours`.

    Raises:
        ConfigurationError: a share, weight or count out of range, unknown tier or weight
            names, float floors adding up to more than 1, or a floor above its tier's cap (the
            message names the field, the tier and the numbers).

    >>> s = Strategy(floors={Tier.RETRIEVED: 0.5}, scoring={"half_life_days": 30})
    >>> s.merge(Strategy(document_k=16)).document_k
    16
    >>> s.apply(MemoryConfig()).scoring.half_life_days
    30.0
    """

    name: str | None = None
    floors: Mapping[int, Share] | None = None
    caps: Mapping[int, Share] | None = None
    scoring: Mapping[str, float] | None = None
    recent_share: tuple[float, float] | None = None
    recent_messages: int | None = None
    min_exchanges: int | None = None
    semantic_k: int | None = None
    document_k: int | None = None
    other_sessions: bool | None = None
    other_sessions_k: int | None = None
    query_turns: int | None = None
    neighbours: int | None = None

    def __post_init__(self) -> None:
        if self.name is not None and (not isinstance(self.name, str) or not self.name.strip()):
            msg = f"Strategy.name must be non-empty text or None, got {self.name!r}"
            raise ConfigurationError(msg)
        for kind in _SHARES:
            value = getattr(self, kind)
            if value is not None:
                object.__setattr__(self, kind, MappingProxyType(self._shares(kind, value)))
        self._check_floors()
        if self.scoring is not None:
            object.__setattr__(self, "scoring", MappingProxyType(self._weights(self.scoring)))
        if self.recent_share is not None:
            object.__setattr__(self, "recent_share", self._recent_share(self.recent_share))
        for name in _COUNTS:
            count = getattr(self, name)
            if count is not None and (
                isinstance(count, bool) or not isinstance(count, Integral) or count < 0
            ):
                msg = f"{self._where()}{name} must be an int of 0 or more, got {count!r}"
                raise ConfigurationError(msg)
            if count is not None:
                object.__setattr__(self, name, int(count))
        if self.other_sessions is not None and not isinstance(self.other_sessions, bool):
            msg = (
                f"{self._where()}other_sessions must be True or False, got {self.other_sessions!r}"
            )
            raise ConfigurationError(msg)

    # -- validation --------------------------------------------------------------------------
    def _where(self) -> str:
        return f"strategy {self.name!r}: " if self.name else "Strategy: "

    def _shares(self, kind: str, shares: object) -> dict[int, Share]:
        if not isinstance(shares, Mapping):
            msg = (
                f"{self._where()}{kind} must be a mapping of tier to share, got {shares!r}; "
                f"e.g. {kind}={{Tier.RETRIEVED: 0.4}}"
            )
            raise ConfigurationTypeError(msg)
        out: dict[int, Share] = {}
        for key, share in shares.items():
            tier = self._tier(kind, key)
            label = f"{self._where()}{kind}[{tier_name(tier)}]"
            if tier in NEVER_PRUNED_TIERS:
                msg = (
                    f"{label}: {tier_name(tier)} is never pruned, so a floor or cap there has "
                    "no effect; remove it"
                )
                raise ConfigurationError(msg)
            if isinstance(share, bool) or not isinstance(share, Real):
                msg = (
                    f"{label} must be a fraction (float) or a number of tokens (int), got {share!r}"
                )
                raise ConfigurationTypeError(msg)
            if isinstance(share, Integral):
                if share < 0:
                    msg = f"{label} = {share}: a number of tokens cannot be negative"
                    raise ConfigurationError(msg)
                out[tier] = int(share)
                continue
            fraction = float(share)
            if not (math.isfinite(fraction) and 0.0 < fraction <= 1.0):
                msg = (
                    f"{label} = {share!r}: a float share is a fraction of the budget in (0, 1]; "
                    "pass an int for a number of tokens (0 for none)"
                )
                raise ConfigurationError(msg)
            out[tier] = fraction
        return out

    def _tier(self, kind: str, key: object) -> int:
        if isinstance(key, str):
            try:
                return int(Tier[key.strip().upper()])
            except KeyError:
                names = ", ".join(t.name for t in Tier if t not in NEVER_PRUNED_TIERS)
                msg = (
                    f"{self._where()}{kind}: unknown tier {key!r}; use a Tier (Tier.RETRIEVED), "
                    f"its name ({names}) or an int"
                )
                raise ConfigurationError(msg) from None
        if isinstance(key, bool) or not isinstance(key, Integral):
            msg = (
                f"{self._where()}{kind}: keys must be tiers (a Tier, an int or a name), got {key!r}"
            )
            raise ConfigurationTypeError(msg)
        return int(key)

    def _check_floors(self) -> None:
        floors = self.floors or {}
        fractions = {t: s for t, s in floors.items() if isinstance(s, float)}
        total = sum(fractions.values())
        if total > 1.0 + _TOLERANCE:
            parts = " + ".join(f"{tier_name(t)} {s:g}" for t, s in sorted(fractions.items()))
            msg = (
                f"{self._where()}the tier floors add up to {total:g} of the budget ({parts}); "
                "together they may keep at most all of it (1.0): lower some floors"
            )
            raise ConfigurationError(msg)
        for tier, floor in floors.items():
            cap = (self.caps or {}).get(tier)
            if cap is not None and type(cap) is type(floor) and floor > cap:
                msg = (
                    f"{self._where()}{tier_name(tier)}: floor {floor!r} is larger than cap "
                    f"{cap!r}; a tier cannot be promised more than it may use"
                )
                raise ConfigurationError(msg)

    def _weights(self, scoring: object) -> dict[str, float]:
        if not isinstance(scoring, Mapping):
            msg = (
                f"{self._where()}scoring must be a mapping of Scoring weight names to numbers, "
                f"got {scoring!r}; e.g. scoring={{'half_life_days': 30}}"
            )
            raise ConfigurationTypeError(msg)
        out: dict[str, float] = {}
        for key, value in scoring.items():
            if key not in SCORING_WEIGHTS:
                msg = (
                    f"{self._where()}scoring: unknown weight {key!r}; "
                    f"known: {', '.join(SCORING_WEIGHTS)}"
                )
                raise ConfigurationError(msg)
            if isinstance(value, bool) or not isinstance(value, Real):
                msg = f"{self._where()}scoring[{key!r}] must be a number, got {value!r}"
                raise ConfigurationTypeError(msg)
            out[key] = float(value)
        try:
            Scoring(**out)
        except ConfigurationError as exc:
            msg = f"{self._where()}scoring: {exc}"
            raise ConfigurationError(msg) from exc
        return out

    def _recent_share(self, given: object) -> tuple[float, float]:
        pair = tuple(given) if isinstance(given, Sequence) and not isinstance(given, str) else ()
        if len(pair) != 2 or not all(isinstance(v, Real) and not isinstance(v, bool) for v in pair):
            msg = f"{self._where()}recent_share must be a pair (least, most), got {given!r}"
            raise ConfigurationTypeError(msg)
        least, most = float(pair[0]), float(pair[1])
        if not 0.0 <= least <= most <= 1.0:
            msg = (
                f"{self._where()}recent_share = ({least:g}, {most:g}): it must be (least, most) "
                "with 0 <= least <= most <= 1"
            )
            raise ConfigurationError(msg)
        return least, most

    # -- layers ------------------------------------------------------------------------------
    def merge(self, override: Strategy) -> Strategy:
        """``override`` over this strategy: its set fields win, tier by tier and weight by weight.

        Raises:
            ConfigurationError: the merged floors add up to more than 1, or a floor of one layer
                is larger than the cap of the other.
        """
        return merge_strategies(self, override)

    def apply(self, config: MemoryConfig) -> MemoryConfig:
        """``config`` with this strategy's settings (a fraction floor of RETRIEVED included).

        >>> Strategy(document_k=3).apply(MemoryConfig()).document_k
        3
        """
        changes: dict[str, Any] = {
            name: getattr(self, name)
            for name in (*_COUNTS, "recent_share", "other_sessions")
            if getattr(self, name) is not None
        }
        if self.scoring:
            changes["scoring"] = dataclasses.replace(config.scoring, **self.scoring)
        retrieved = (self.floors or {}).get(int(Tier.RETRIEVED))
        if isinstance(retrieved, float) or retrieved == 0:
            changes["retrieved_floor"] = float(retrieved)
        return dataclasses.replace(config, **changes) if changes else config

    @classmethod
    def from_config(cls, config: MemoryConfig, *, name: str | None = None) -> Strategy:
        """The strategy that sets everything ``config`` sets (its retrieved floor as a floor).

        >>> Strategy.from_config(MemoryConfig()).floors[Tier.RETRIEVED]
        0.35
        """
        return cls(
            name=name,
            floors=retrieved_floors(config.retrieved_floor),
            caps={},
            scoring=dataclasses.asdict(config.scoring),
            recent_share=config.recent_share,
            other_sessions=config.other_sessions,
            **{count: getattr(config, count) for count in _COUNTS},
        )

    def as_dict(self) -> dict[str, Any]:
        """The fields that are set, JSON-ready (tiers by name); ``Strategy(**d)`` rebuilds it.

        >>> Strategy(name="mine", floors={Tier.RETRIEVED: 0.5}).as_dict()
        {'name': 'mine', 'floors': {'RETRIEVED': 0.5}}
        """
        out: dict[str, Any] = {}
        for name in STRATEGY_FIELDS:
            value = getattr(self, name)
            if value is None:
                continue
            if name in _SHARES:
                value = {_tier_key(t): s for t, s in value.items()}
            elif name == "scoring":
                value = dict(value)
            elif name == "recent_share":
                value = list(value)
            out[name] = value
        return out


STRATEGY_FIELDS = tuple(f.name for f in dataclasses.fields(Strategy))
"""The fields of `Strategy`, in order (the keys a strategy mapping may have)."""


def _tier_key(tier: int) -> str | int:
    try:
        return Tier(tier).name
    except ValueError:
        return tier


def merge_strategies(*layers: Strategy) -> Strategy:
    """The layers merged in order: each one's set fields win over the ones before.

    Floors, caps and scoring merge key by key; names join with ``+``. Merging is associative,
    and the layers are checked together once, at the end.

    Raises:
        ConfigurationError: the merged floors add up to more than 1, or a floor of one layer is
            larger than the cap of another (the message names the merged layers).

    >>> merge_strategies(Strategy(name="a", document_k=1), Strategy(name="b")).name
    'a+b'
    """
    fields: dict[str, Any] = {}
    for layer in layers:
        if not isinstance(layer, Strategy):
            msg = f"merge_strategies takes Strategy values, got {layer!r}"
            raise ConfigurationTypeError(msg)
        for name in STRATEGY_FIELDS:
            value = getattr(layer, name)
            if value is None:
                continue
            if name in (*_SHARES, "scoring"):
                fields[name] = {**fields.get(name, {}), **value}
            elif name == "name" and "name" in fields:
                fields[name] = f"{fields[name]}+{value}"
            else:
                fields[name] = value
    return Strategy(**fields)
