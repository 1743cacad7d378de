"""`AssembledContext`: what was kept, what was cut and why, and the rendered output.

Its reports for people and for machines are written in `ctxbudget.core.explain`.

`PruneReason` says why an item was cut; `unsendable_reasons` gives the reason and detail for each
kind of history no provider accepts, and `tier_usage` the per-tier figures of an assembly.
"""

from __future__ import annotations

import functools
import itertools
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from ctxbudget.core.budget import Budget
from ctxbudget.core.explain import context_json, explain_context
from ctxbudget.core.history import Unsendable
from ctxbudget.core.ids import ItemRef
from ctxbudget.core.items import ContextItem, tier_name
from ctxbudget.core.packing import SolverReport
from ctxbudget.core.render import Format, Layout, Part
from ctxbudget.core.trimming import TrimReport
from ctxbudget.tokens.images import image_size_unknown

__all__ = [
    "AssembledContext",
    "PruneReason",
    "PrunedItem",
    "TierUsage",
    "tier_usage",
    "unsendable_reasons",
]


class PruneReason(StrEnum):
    """Why an item was left out."""

    OVER_BUDGET = "over_budget"
    """It did not fit in what its tier could still use."""
    TIER_CAP = "tier_cap"
    """It would have fit in the budget, but its tier had reached its cap."""
    DUPLICATE = "duplicate"
    """Another item with the same id, the same content or nearly the same meaning was kept."""
    REPLACED_BY_SUMMARY = "replaced_by_summary"
    """A summary that covers it was used instead."""
    REDUNDANT_SUMMARY = "redundant_summary"
    """A summary whose every covered item was kept."""
    ORPHAN_TOOL_RESULT = "orphan_tool_result"
    """A tool result whose call is not sent: it cannot be sent alone."""
    ORPHAN_TOOL_CALL = "orphan_tool_call"
    """An assistant turn whose tool calls are not all answered by results that are sent."""
    NO_USER_TURN = "no_user_turn"
    """History before the first user turn that is sent: a conversation starts with a user."""
    OVER_LIMIT = "over_limit"
    """It fit, but as many items as asked for (a retriever's ``k``) scored higher."""
    SUPERSEDED = "superseded"
    """A newer item restates it (`ContextItem.newer`) and both did not fit: it is never sent
    without the newer one."""


@dataclass(frozen=True, slots=True)
class PrunedItem:
    """An item left out, with the reason and a human-readable detail.

    ``duplicate_of`` is, for a ``DUPLICATE``, the item kept that it repeats (another object,
    with the same id, the same content or nearly the same meaning), when that item is sent;
    None when it was not sent either (the detail then says why).
    """

    item: ContextItem
    reason: PruneReason
    detail: str = ""
    duplicate_of: ContextItem | None = None


@dataclass(frozen=True, slots=True)
class TierUsage:
    """Per-tier figures of one assembly."""

    tier: int
    name: str
    offered: int
    kept: int
    pruned: int
    tokens: int


_SOLVERS = ("none", "all", "exact", "greedy")  # the summary names the strongest one used
_NO_CALL = "its tool call is not sent right before it"
_NO_RESULT = "not every tool call it makes has its result"
_NO_USER = "before the first user turn (a conversation sent starts with one)"


def unsendable_reasons(
    unsendable: Unsendable,
) -> list[tuple[list[ContextItem], PruneReason, str]]:
    """Each kind of history no provider accepts, with the reason and detail it is reported with.

    The lists are ``unsendable``'s own, so what is found later shows in the report too.
    """
    return [
        (unsendable.orphan_results, PruneReason.ORPHAN_TOOL_RESULT, _NO_CALL),
        (unsendable.unanswered_calls, PruneReason.ORPHAN_TOOL_CALL, _NO_RESULT),
        (unsendable.before_first_user, PruneReason.NO_USER_TURN, _NO_USER),
    ]


def _partition(
    eager: Sequence[PrunedItem],
    lazy: Iterable[tuple[Sequence[ContextItem], PruneReason, str]],
    included: Iterable[ContextItem],
) -> list[PrunedItem]:
    """The pruned entries of an assembly: ``eager``, then ``lazy``'s, as a partition.

    An item packing set aside and took back later (floors, summaries reverted) is included
    only; each item is listed once, with the first reason found. Duplicates share their id
    with the item kept.
    """
    entries = list(eager)
    for items, reason, detail in lazy:
        entries.extend(PrunedItem(item, reason, detail) for item in items)
    kept_ids = {item.id for item in included}
    seen: set[int] = set()
    kept: list[PrunedItem] = []
    for entry in entries:
        if id(entry.item) in seen or (
            entry.item.id in kept_ids and entry.reason is not PruneReason.DUPLICATE
        ):
            continue
        seen.add(id(entry.item))
        kept.append(entry)
    return kept


def tier_usage(
    offered: Mapping[int, int], included: Iterable[ContextItem], tokens: Mapping[int, int]
) -> dict[int, TierUsage]:
    """Per-tier figures: items ``offered`` and ``included`` per tier, and the ``tokens`` spent."""
    kept: dict[int, int] = {}
    for item in included:
        kept[int(item.tier)] = kept.get(int(item.tier), 0) + 1
    tiers = sorted(set(offered) | set(kept) | set(tokens))
    return {
        t: TierUsage(
            tier=t,
            name=tier_name(t),
            offered=offered.get(t, 0),
            kept=kept.get(t, 0),
            pruned=max(0, offered.get(t, 0) - kept.get(t, 0)),
            tokens=tokens.get(t, 0),
        )
        for t in tiers
    }


class AssembledContext:
    """The result of one assembly.

    ``included`` is in render order; ``pruned`` holds every other offered item with its reason.
    ``tokens_used`` is the exact count of the output as it will be sent (``to_messages()`` with
    its per-message overhead for the ``messages`` format; for ``text`` and ``compact`` the larger
    of ``render()`` and ``to_messages()``) and is never above ``tokens_available``.
    """

    __slots__ = (
        "_layout",
        "_parts",
        "_pruned",
        "_pruned_lazy",
        "budget",
        "counter_name",
        "approximate",
        "format",
        "included",
        "solvers",
        "timing_ms",
        "tokens_available",
        "tokens_used",
        "truncated",
        "tiers",
        "packing_slack",
        "prefix_tokens",
        "trim",
    )

    def __init__(
        self,
        *,
        layout: Layout,
        parts: Sequence[Part],
        included: list[ContextItem],
        pruned: list[PrunedItem],
        pruned_lazy: Sequence[tuple[Sequence[ContextItem], PruneReason, str]],
        budget: Budget,
        tokens_used: int,
        tiers: Mapping[int, TierUsage],
        solvers: Mapping[int, SolverReport],
        truncated: Sequence[str],
        timing_ms: float,
        packing_slack: int = 0,
        trim: TrimReport | None = None,
    ) -> None:
        self._layout = layout
        self._parts = tuple(parts)
        self._pruned = pruned
        self._pruned_lazy: tuple[tuple[Sequence[ContextItem], PruneReason, str], ...] | None = (
            tuple(pruned_lazy)
        )
        self.included = included
        self.budget = budget
        self.tokens_used = tokens_used
        self.tokens_available = budget.available
        self.tiers = dict(tiers)
        self.solvers = dict(solvers)
        self.truncated = tuple(truncated)
        self.timing_ms = timing_ms
        #: Tokens packing set aside (date lines it could not know were shared) that the final
        #: output did not need; ``tokens_used + packing_slack`` is what packing accounted.
        self.packing_slack = packing_slack
        #: Tokens at the start of the output identical to the previous call's (None: no
        #: ``previous=`` given); see `ctxbudget.core.prefix` for what counts, per format.
        self.prefix_tokens: int | None = None
        #: How history was trimmed with ``history_trim="step"`` (None in the other mode).
        self.trim = trim
        self.format: Format = layout.format
        self.counter_name = layout.counter.name
        self.approximate = layout.counter.approximate

    @property
    def pruned(self) -> list[PrunedItem]:
        """Every offered item left out, with its reason (built on first access)."""
        if self._pruned_lazy is not None:
            self._pruned = _partition(self._pruned, self._pruned_lazy, self.included)
            self._pruned_lazy = None
        return self._pruned

    def pruned_later(self) -> Callable[[], list[PrunedItem]]:
        """`pruned`, built when the function returned is called, in any thread.

        For work done after the call returns (the inclusion log's writer thread): building
        hundreds of entries is left to it, and the call neither reads nor changes this report,
        so `pruned` may be read here meanwhile (each builds its own equal list).
        """
        if self._pruned_lazy is None:
            done = list(self._pruned)
            return lambda: done
        return functools.partial(
            _partition, list(self._pruned), self._pruned_lazy, tuple(self.included)
        )

    def extend_pruned(self, entries: Sequence[PrunedItem]) -> None:
        """Report more offered items as pruned, with their reasons (and in `tiers`).

        For a packer that offers items in more than one pass (`pack_documents` with ``k``):
        what an earlier pass left out is offered here, so each offered item is still either
        included or pruned. An entry whose item is included (by id, unless a duplicate) is
        dropped, as in `pruned`.
        """
        self._pruned.extend(entries)
        counted = self.pruned  # the partition rules, applied to the new entries too
        listed = {id(entry.item) for entry in counted}
        for entry in entries:
            if id(entry.item) not in listed:
                continue
            tier = int(entry.item.tier)
            usage = self.tiers.get(tier)
            if usage is None:
                usage = TierUsage(tier, tier_name(tier), 0, 0, 0, 0)
            self.tiers[tier] = replace(usage, offered=usage.offered + 1, pruned=usage.pruned + 1)

    def _reason_counts(self) -> Counter[str]:
        """How many items `pruned` lists per reason, without building the list.

        A summary is made on every call of an agent, where over a thousand memories may be
        pruned: each would become an object.
        """
        if self._pruned_lazy is None:
            return Counter(entry.reason.value for entry in self._pruned)
        included = {item.id for item in self.included}
        seen: set[int] = set()
        counts: Counter[str] = Counter()
        eager = ((entry.item, entry.reason) for entry in self._pruned)
        lazy = ((item, reason) for items, reason, _ in self._pruned_lazy for item in items)
        for item, reason in itertools.chain(eager, lazy):  # the same rules as `pruned`
            if id(item) in seen or (item.id in included and reason is not PruneReason.DUPLICATE):
                continue
            seen.add(id(item))
            counts[reason.value] += 1
        return counts

    @property
    def estimated(self) -> list[str]:
        """Ids of included messages sent with images of unknown size (``messages`` format).

        Each such image is counted as ``encodings.IMAGE_TOKENS_MAX``, the most an image can
        cost, so ``tokens_used`` may be above what the provider bills, never below. Give image
        parts a ``width`` and ``height`` (or inline base64 data) to count them exactly.
        """
        if self.format != "messages":
            return []  # the text formats show an "[image]" mark instead of the image
        return [
            item.id
            for item in self.included
            if item.parts
            and self._layout.section_of(item) in ("history", "query")
            and any(isinstance(p, Mapping) and image_size_unknown(p) for p in item.parts)
        ]

    @property
    def included_ids(self) -> list[str]:
        """Ids of the included items, in render order.

        An item built from a record of another scope than the current session (a document
        chunk, another session's turn, a user-wide pin) has an id qualified with that scope,
        in ctxbudget's own id space; `included_refs` gives the caller's own ids instead.
        """
        return [item.id for item in self.included]

    @property
    def included_refs(self) -> list[ItemRef]:
        """The included items as their callers know them, in render order.

        Each is the caller's own id with its scope (`ContextItem.ref`: ``ItemRef("guide#0",
        ("collection", "kb"))``; scope None for an item passed directly); ctxbudget's own
        items (system prompt, query, tool schemas) are left out.
        """
        return [ref for ref in (item.ref for item in self.included) if ref is not None]

    def includes(self, record_id: str, scope: tuple[str, str] | None = None) -> bool:
        """Whether the item the caller knows as ``record_id`` (in ``scope``, if given) is sent.

        >>> ctx.includes("s3-0011", ("session", "s3"))  # doctest: +SKIP
        True
        """
        return any(
            ref.id == record_id and (scope is None or ref.scope == scope)
            for ref in self.included_refs
        )

    def render(self) -> str:
        """The rendered context as one string.

        For ``text`` and ``compact`` this is the output itself. For ``messages`` it is a
        readable transcript of `to_messages` (``[role]`` lines), which is what is counted there.
        """
        if self.format != "messages":
            return self._layout.to_text(self._parts)
        return "\n".join(f"[{m['role']}]\n{m['content']}" for m in self.to_messages())

    def to_messages(self) -> list[dict[str, Any]]:
        """The provider chat messages (OpenAI-style dicts: role, content, name, tool fields)."""
        return self._layout.to_messages(self._parts)

    def summary(self) -> dict[str, Any]:
        """A compact, JSON-ready summary (what the adapters put in run metadata and events).

        Keys: ``tokens_used``, ``tokens_available``, ``included`` and ``pruned`` (item counts;
        the system prompt and pinned facts are items too), ``pruned_by_reason`` (`PruneReason`
        values), ``solver`` (of the tiers packed by value: ``"greedy"`` when one was packed by
        density, else ``"exact"`` when one needed the knapsack, else ``"all"``, everything
        offered fit; None when no tier needed one: history goes newest exchange first),
        ``solvers`` (per tier name) and ``prefix_tokens`` (`prefix_tokens`: shared with the
        previous call, None when it was not given).
        """
        reasons = self._reason_counts()
        solvers = {tier_name(t): report.solver for t, report in sorted(self.solvers.items())}
        return {
            "tokens_used": self.tokens_used,
            "tokens_available": self.tokens_available,
            "included": len(self.included),
            "pruned": sum(reasons.values()),
            "pruned_by_reason": dict(sorted(reasons.items())),
            "solver": max(solvers.values(), key=_SOLVERS.index, default=None),
            "solvers": solvers,
            "prefix_tokens": self.prefix_tokens,
        }

    def to_json(self) -> str:
        """A JSON report: figures, included ids, and pruned ids with reasons."""
        return context_json(self)

    def explain(self, *, width: int = 40, show_pruned: int = 12) -> str:
        """A per-tier table, a budget bar, and what was cut and why (`core.explain`).

        Items are named as their callers know them (`ContextItem.label`: ``guide#0
        (collection kb)``), ctxbudget's own by their ids.
        """
        return explain_context(self, width=width, show_pruned=show_pruned)

    def __repr__(self) -> str:
        return (
            f"AssembledContext(format={self.format!r}, included={len(self.included)}, "
            f"tokens_used={self.tokens_used}, tokens_available={self.tokens_available})"
        )
