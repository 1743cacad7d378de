"""Budget analytics over the inclusion log: how each tier uses the budget, and what gets cut.

`budget_stats` sums up `ContextRecord` s (a session's, a user's or a namespace's:
`ContextMemory.budget_stats`) into a `BudgetStats`:

- per tier (`TierStats`): in how many assemblies it was offered items; its tokens and its share
  of the tokens available at p50, p90 and max over those assemblies; the items it was offered,
  kept and pruned in all; how often it hit its cap and how often it was held to its floor;
- the tokens used and the share of the budget used, at p50, p90 and max;
- over-budget errors: assemblies that failed because their never-pruned items did not fit;
- pruned items by reason, and the most-pruned items: id, in how many assemblies it was pruned,
  and the reason most of them gave.

Definitions. Percentiles are nearest-rank (the smallest value that at least that share of the
values do not exceed), so each is a value that occurred and p50 <= p90 <= max. A tier *hit its
cap* in an assembly when it has a cap and an item of it was pruned for ``tier_cap``, or its
tokens reached the cap. A tier was *held to its floor* when it has a floor, an item of it was
pruned for ``over_budget`` and its tokens did not exceed the floor: it got what the floor
promised and no more. Failed assemblies count in ``assemblies`` and ``errors`` only.

`plot_budget_stats` draws a `BudgetStats` (matplotlib, the ``eval`` extra). `access_counts`
counts, per item id, the assemblies that included it (the system prompt, the query and tool
schemas left out): what `MemoryConfig.access_salience` feeds into scoring.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxbudget.core.items import Tier, tier_name
from ctxbudget.core.report import PruneReason
from ctxbudget.errors import ConfigurationError
from ctxbudget.extras import missing_extra
from ctxbudget.memory.log.entries import ContextRecord

__all__ = [
    "BudgetStats",
    "PrunedStat",
    "TierStats",
    "access_counts",
    "budget_stats",
    "is_memory_tier",
    "percentile",
    "plot_budget_stats",
]

_NOT_MEMORY = frozenset({int(Tier.SYSTEM), int(Tier.QUERY), int(Tier.TOOLS)})


def is_memory_tier(tier: int) -> bool:
    """Whether items of ``tier`` count as memories (not system prompt, query or tool schemas)."""
    return tier not in _NOT_MEMORY


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q`` percentile (``q`` in [0, 100]) of ``values`` (0 when empty).

    >>> percentile([5, 1, 3, 2, 4], 50), percentile([5, 1, 3, 2, 4], 90)
    (3, 5)
    """
    if not values:
        return 0
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


@dataclass(frozen=True, slots=True)
class TierStats:
    """One tier over many assemblies (see the module docstring for the definitions)."""

    tier: int
    assemblies: int
    tokens_p50: int
    tokens_p90: int
    tokens_max: int
    share_p50: float
    share_p90: float
    share_max: float
    offered: int
    kept: int
    pruned: int
    cap_hits: int
    floor_hits: int

    @property
    def name(self) -> str:
        """The tier's display name (``"RECENT"``, ``"tier 45"``)."""
        return tier_name(self.tier)


@dataclass(frozen=True, slots=True)
class PrunedStat:
    """An item pruned in ``count`` assemblies, most often for ``reason``.

    ``reasons`` gives every reason with the assemblies that gave it, most frequent first (ties
    by name); an item is counted once per assembly, with the first reason that one gave.
    """

    id: str
    count: int
    reason: str
    reasons: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class BudgetStats:
    """The budget analytics of a set of logged assemblies (see the module docstring)."""

    assemblies: int
    errors: int
    tokens_used_p50: int = 0
    tokens_used_p90: int = 0
    tokens_used_max: int = 0
    used_share_p50: float = 0.0
    used_share_p90: float = 0.0
    used_share_max: float = 0.0
    tiers: tuple[TierStats, ...] = ()
    pruned_by_reason: tuple[tuple[str, int], ...] = ()
    most_pruned: tuple[PrunedStat, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (what ``ctxbudget stats --contexts --json`` prints)."""
        return {
            "assemblies": self.assemblies,
            "errors": self.errors,
            "tokens_used": {
                "p50": self.tokens_used_p50,
                "p90": self.tokens_used_p90,
                "max": self.tokens_used_max,
            },
            "used_share": {
                "p50": self.used_share_p50,
                "p90": self.used_share_p90,
                "max": self.used_share_max,
            },
            "tiers": {
                t.name: {
                    "tier": t.tier,
                    "assemblies": t.assemblies,
                    "tokens": {"p50": t.tokens_p50, "p90": t.tokens_p90, "max": t.tokens_max},
                    "share": {"p50": t.share_p50, "p90": t.share_p90, "max": t.share_max},
                    "offered": t.offered,
                    "kept": t.kept,
                    "pruned": t.pruned,
                    "cap_hits": t.cap_hits,
                    "floor_hits": t.floor_hits,
                }
                for t in self.tiers
            },
            "pruned_by_reason": dict(self.pruned_by_reason),
            "most_pruned": [
                {"id": p.id, "count": p.count, "reason": p.reason, "reasons": dict(p.reasons)}
                for p in self.most_pruned
            ],
        }


@dataclass(slots=True)
class _Tier:
    tokens: list[int] = field(default_factory=list)
    shares: list[float] = field(default_factory=list)
    offered: int = 0
    kept: int = 0
    pruned: int = 0
    cap_hits: int = 0
    floor_hits: int = 0


def budget_stats(records: Iterable[ContextRecord], *, top: int | None = 10) -> BudgetStats:
    """The `BudgetStats` of ``records`` (``top``: most-pruned items listed; None: all).

    >>> budget_stats([]).assemblies
    0

    Raises:
        ConfigurationError: ``top`` is neither None nor an int of 0 or more.
    """
    if top is not None and (isinstance(top, bool) or not isinstance(top, int) or top < 0):
        msg = f"top must be None or an int of 0 or more, got {top!r}"
        raise ConfigurationError(msg)
    tiers: dict[int, _Tier] = {}
    reasons: Counter[str] = Counter()
    pruned_in: dict[str, Counter[str]] = {}
    used: list[int] = []
    shares: list[float] = []
    assemblies = errors = 0
    for record in records:
        assemblies += 1
        if record.error is not None:
            errors += 1
            continue
        available = max(record.tokens_available, 1)
        used.append(record.tokens_used)
        shares.append(record.tokens_used / available)
        first: dict[str, str] = {}
        cut_for: dict[int, set[str]] = {}
        for entry in record.pruned:
            reasons[entry.reason] += 1
            first.setdefault(entry.id, entry.reason)
            cut_for.setdefault(entry.tier, set()).add(entry.reason)
        for item, reason in first.items():
            pruned_in.setdefault(item, Counter())[reason] += 1
        for usage in record.tiers:
            if not usage.offered:
                continue
            figures = tiers.setdefault(usage.tier, _Tier())
            figures.tokens.append(usage.tokens)
            figures.shares.append(usage.tokens / available)
            figures.offered += usage.offered
            figures.kept += usage.kept
            figures.pruned += usage.pruned
            why = cut_for.get(usage.tier, set())
            if usage.cap is not None and (
                PruneReason.TIER_CAP.value in why or usage.tokens >= usage.cap
            ):
                figures.cap_hits += 1
            held = PruneReason.OVER_BUDGET.value in why and usage.tokens <= usage.floor
            if usage.floor > 0 and held:
                figures.floor_hits += 1
    ranked = sorted(pruned_in.items(), key=lambda kv: (-kv[1].total(), kv[0]))
    return BudgetStats(
        assemblies=assemblies,
        errors=errors,
        tokens_used_p50=int(percentile(used, 50)),
        tokens_used_p90=int(percentile(used, 90)),
        tokens_used_max=max(used, default=0),
        used_share_p50=float(percentile(shares, 50)),
        used_share_p90=float(percentile(shares, 90)),
        used_share_max=max(shares, default=0.0),
        tiers=tuple(_tier_stats(t, f) for t, f in sorted(tiers.items())),
        pruned_by_reason=tuple(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))),
        most_pruned=tuple(_pruned_stat(i, c) for i, c in ranked[:top]),
    )


def _tier_stats(tier: int, figures: _Tier) -> TierStats:
    return TierStats(
        tier=tier,
        assemblies=len(figures.tokens),
        tokens_p50=int(percentile(figures.tokens, 50)),
        tokens_p90=int(percentile(figures.tokens, 90)),
        tokens_max=max(figures.tokens),
        share_p50=float(percentile(figures.shares, 50)),
        share_p90=float(percentile(figures.shares, 90)),
        share_max=max(figures.shares),
        offered=figures.offered,
        kept=figures.kept,
        pruned=figures.pruned,
        cap_hits=figures.cap_hits,
        floor_hits=figures.floor_hits,
    )


def _pruned_stat(item: str, reasons: Counter[str]) -> PrunedStat:
    ordered = tuple(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])))
    return PrunedStat(item, reasons.total(), ordered[0][0], ordered)


def access_counts(records: Iterable[ContextRecord]) -> dict[str, int]:
    """How many of ``records`` included each item (system, query and tool schemas left out).

    >>> access_counts([])
    {}
    """
    counts: Counter[str] = Counter()
    for record in records:
        counts.update({e.id for e in record.included if e.tier not in _NOT_MEMORY})
    return dict(counts)


def plot_budget_stats(stats: BudgetStats, path: str | Path, *, title: str = "") -> Path:
    """Draw per-tier budget use and cap/floor hits of ``stats`` into a PNG file.

    Left: each tier's share of the budget at p50 (bar), p90 (whisker) and max (dot); right: in
    what share of its assemblies each tier hit its cap or was held to its floor. Drawn on
    matplotlib's Agg canvas (no display needed; pyplot's state is left alone).

    Raises:
        MissingDependencyError: matplotlib is not installed (the ``eval`` extra).

    >>> plot_budget_stats(mem.budget_stats("s1"), "budget.png")  # doctest: +SKIP
    PosixPath('budget.png')
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        error = missing_extra("eval", "the budget plot (ctxbudget stats --plot)", exc)
        raise error from exc
    figure = Figure(figsize=(9.6, 4.2), dpi=120)
    FigureCanvasAgg(figure)
    use, hits = figure.subplots(1, 2)
    names = [t.name for t in stats.tiers]
    where = list(range(len(names)))
    p50 = [100 * t.share_p50 for t in stats.tiers]
    p90 = [100 * t.share_p90 for t in stats.tiers]
    use.bar(where, p50, color="#4c72b0", label="p50")
    use.errorbar(
        where,
        p50,
        yerr=[[0] * len(p50), [b - a for a, b in zip(p50, p90, strict=True)]],
        fmt="none",
        ecolor="#222222",
        capsize=4,
        label="p90",
    )
    use.scatter(
        where,
        [100 * t.share_max for t in stats.tiers],
        marker="o",
        color="#c44e52",
        zorder=3,
        label="max",
    )
    use.set_xticks(where, names, rotation=30, ha="right")
    use.set_ylabel("share of the budget (%)")
    use.set_title("tokens per tier")
    use.legend(frameon=False)
    width = 0.4
    runs = [max(t.assemblies, 1) for t in stats.tiers]
    caps = [100 * t.cap_hits / n for t, n in zip(stats.tiers, runs, strict=True)]
    floors = [100 * t.floor_hits / n for t, n in zip(stats.tiers, runs, strict=True)]
    hits.bar([x - width / 2 for x in where], caps, width, color="#dd8452", label="hit its cap")
    hits.bar([x + width / 2 for x in where], floors, width, color="#55a868", label="held to floor")
    hits.set_xticks(where, names, rotation=30, ha="right")
    hits.set_ylim(0, 100)
    hits.set_ylabel("share of the tier's assemblies (%)")
    hits.set_title("caps and floors")
    hits.legend(frameon=False)
    figure.suptitle(
        title or f"{stats.assemblies:,} assemblies, {stats.errors:,} over-budget errors"
    )
    out = Path(path)
    figure.savefig(out, format="png", bbox_inches="tight")
    return out
