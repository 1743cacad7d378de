"""`ContextAssembler`: the pure core that turns items and a budget into an `AssembledContext`.

One path for every caller (DESIGN.md): dedupe, substitute summaries, allocate per tier, pack
each tier, render, count. Nothing here does I/O.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import compress, groupby
from operator import attrgetter
from time import perf_counter

from ctxbudget.core.budget import Budget
from ctxbudget.core.dedupe import Duplicate, dedupe, dedupe_ids
from ctxbudget.core.history import HistoryPacker, Unsendable, iter_exchanges, sendable
from ctxbudget.core.ids import internal_id
from ctxbudget.core.items import NEVER_PRUNED_TIERS, ContextItem, Shrink, Tier, tier_name
from ctxbudget.core.packing import DEFAULT_EXACT_LIMIT, SolverReport, solve
from ctxbudget.core.render import Format, Layout, Part
from ctxbudget.core.report import AssembledContext, PrunedItem, PruneReason, TierUsage
from ctxbudget.core.summaries import Summarizer, truncate_to_tokens
from ctxbudget.errors import BudgetExceededError, ConfigurationError, InvalidItemError
from ctxbudget.tokens.counter import TokenCounter

__all__ = ["ContextAssembler"]

_RECENT = int(Tier.RECENT)
_TIER = attrgetter("tier")
_ID = attrgetter("id")
_SHRINK = attrgetter("shrink")
_NEVER = Shrink.NEVER


@dataclass(slots=True)
class _State:
    """Mutable bookkeeping of one packing pass."""

    layout: Layout
    budget: Budget
    used: int = 0
    sections: set[str] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)
    included: list[ContextItem] = field(default_factory=list)
    included_ids: set[str] = field(default_factory=set)
    section: dict[str, str] = field(default_factory=dict)
    tier_tokens: dict[int, int] = field(default_factory=dict)
    capped_tokens: dict[int, int] = field(default_factory=dict)
    pruned: list[PrunedItem] = field(default_factory=list)
    lazy: list[tuple[Sequence[ContextItem], PruneReason, str]] = field(default_factory=list)
    solvers: dict[int, SolverReport] = field(default_factory=dict)
    truncated: list[str] = field(default_factory=list)
    history: list[ContextItem] = field(default_factory=list)
    dates: set[tuple[str, str]] = field(default_factory=set)
    originals: dict[str, ContextItem] = field(default_factory=dict)
    sent: set[int] = field(default_factory=set)  # history items added before packing (by id())

    def date_cost(self, item: ContextItem, section: str) -> int:
        """The date line ``item`` would open in a section sorted by date (history: 0 here)."""
        if section == "history" or item.timestamp is None:
            return 0
        date = self.layout.date_of(item, section)
        if not date or (section, date) in self.dates:
            return 0
        return self.layout.date_line_cost(date)

    def charge(self, tier: int, tokens: int) -> None:
        """Tokens spent for a tier outside any one item (the date lines of history)."""
        self.used += tokens
        self.tier_tokens[tier] = self.tier_tokens.get(tier, 0) + tokens
        self.capped_tokens[tier] = self.capped_tokens.get(tier, 0) + tokens

    def open_cost(self, section: str) -> int:
        if section in self.sections:
            return 0
        cost = self.layout.open_cost(section)
        for group in self.layout.groups_of(section):
            if group not in self.groups:
                cost += self.layout.group_open_cost(group)
        return cost

    def add(self, item: ContextItem, section: str, cost: int, *, capped: bool = True) -> None:
        opening = self.open_cost(section) + self.date_cost(item, section)
        self.sections.add(section)
        self.groups.update(self.layout.groups_of(section))
        if section != "history":
            date = self.layout.date_of(item, section)
            if date:
                self.dates.add((section, date))
        self.used += cost + opening
        packed_as = int(item.tier)
        item = self.originals.get(item.id, item)  # a summary standing in keeps its own tier
        tier = int(item.tier)
        self.tier_tokens[tier] = self.tier_tokens.get(tier, 0) + cost + opening
        if capped:
            self.capped_tokens[packed_as] = self.capped_tokens.get(packed_as, 0) + cost + opening
        self.included.append(item)
        self.included_ids.add(item.id)
        self.section[item.id] = section


class ContextAssembler:
    """Packs context items into a token budget and renders them; the output always fits.

    Args:
        counter: the token counter of the target model (default: ``gpt-4o``'s encoding).
        model: a model name, used for the counter when ``counter`` is not given.
        summarizer: makes summaries on the fly for items with ``shrink="summarize"``.
        min_exchanges: the newest history exchanges kept before pinned facts and tools are
            packed (a floor for the conversation's thread); 0 makes history strictly a tier.
        near_duplicate_threshold: cosine similarity at which items with embeddings count as
            duplicates (None turns it off).
        exact_limit: largest ``items x capacity`` solved by the exact knapsack.
        truncate_min_tokens: shortest truncated text worth keeping.
        verify: count the whole rendered output again even with an additive (tiktoken) counter.

    >>> from ctxbudget import ContextItem, Tier
    >>> assembler = ContextAssembler(model="gpt-4o")
    >>> ctx = assembler.assemble(
    ...     [ContextItem("sys", "You are terse.", tier=Tier.SYSTEM),
    ...      ContextItem("q", "Hi!", tier=Tier.QUERY)], budget=100)
    >>> ctx.tokens_used <= ctx.tokens_available, ctx.included_ids
    (True, ['sys', 'q'])
    """

    def __init__(
        self,
        counter: TokenCounter | None = None,
        *,
        model: str | None = None,
        summarizer: Summarizer | None = None,
        min_exchanges: int = 1,
        near_duplicate_threshold: float | None = 0.95,
        exact_limit: int = DEFAULT_EXACT_LIMIT,
        truncate_min_tokens: int = 16,
        verify: bool = False,
    ) -> None:
        if counter is None:
            counter = TokenCounter.for_model(model or "gpt-4o")
        if min_exchanges < 0:
            msg = f"min_exchanges must be 0 or more, got {min_exchanges}"
            raise ConfigurationError(msg)
        self.counter = counter
        self.summarizer = summarizer
        self.min_exchanges = min_exchanges
        self.near_duplicate_threshold = near_duplicate_threshold
        self.exact_limit = exact_limit
        self.truncate_min_tokens = truncate_min_tokens
        self.verify = verify
        self._layouts: dict[str, Layout] = {}

    def layout(self, fmt: Format) -> Layout:
        """The (cached) rendering rules of ``fmt`` for this assembler's counter."""
        layout = self._layouts.get(fmt) if isinstance(fmt, str) else None  # Layout checks it
        if layout is None:
            layout = self._layouts[fmt] = Layout(fmt, self.counter)
        return layout

    def assemble(
        self,
        items: Iterable[ContextItem],
        *,
        budget: Budget | int,
        format: Format = "messages",  # noqa: A002 - the public name the issue asks for
    ) -> AssembledContext:
        """Choose, order and render ``items`` within ``budget``.

        Raises:
            InvalidBudgetError: the budget is zero, negative, or all reserve.
            BudgetExceededError: the never-pruned items alone do not fit.
            InvalidItemError: something other than a `ContextItem` was given.
        """
        start = perf_counter()
        budget = Budget.coerce(budget)
        layout = self.layout(format)
        offered = _checked(items)
        groups, duplicates, offered_per_tier = self._group(offered)

        state = self._pack(groups, budget, layout, replaced={})
        replaced = self._substitutions(groups, state)
        if replaced:
            state = self._pack(groups, budget, layout, replaced=replaced)
            # A summary that did not fit after all must not take what it covers down with it.
            missed = {s.id for s in replaced.values() if s.id not in state.included_ids}
            if missed:
                replaced = {k: s for k, s in replaced.items() if s.id not in missed}
                state = self._pack(groups, budget, layout, replaced=replaced)
        for dup in duplicates:
            detail = f"same {dup.how} as {dup.kept_id}"
            state.pruned.append(PrunedItem(dup.item, PruneReason.DUPLICATE, detail))

        placed = _place(state, groups, offered)
        if state.sent:
            # Packed history is valid by construction (whole steps, from a user turn on);
            # merged with messages sent whatever happens, it is checked again.
            _drop_unsendable(state, placed, {id(it) for it in groups.get(None, ())})
        included = [it for s in _SECTION_ORDER for it in placed.get(s, ())]
        parts = layout.render_sections(placed)
        tokens_used = self._exact_tokens(layout, state, parts)
        if tokens_used > budget.available:
            # Only reachable with counters whose counts are not additive (Hugging Face,
            # approximate): drop the least valuable items until the exact count fits.
            included, parts, tokens_used = self._shrink_to_fit(layout, state, placed)
        return AssembledContext(
            layout=layout,
            parts=parts,
            included=included,
            pruned=state.pruned,
            pruned_lazy=state.lazy,
            budget=budget,
            tokens_used=tokens_used,
            tiers=_usage(offered_per_tier, state),
            solvers=state.solvers,
            truncated=state.truncated,
            timing_ms=(perf_counter() - start) * 1000.0,
            packing_slack=max(0, state.used - tokens_used),
        )

    def _group(
        self, offered: list[ContextItem]
    ) -> tuple[dict[int | None, list[ContextItem]], list[Duplicate], dict[int, int]]:
        """Items by tier (``None``: never pruned, whatever the tier), duplicates removed.

        Everything here runs at C speed over the whole input (runs of equal tiers are sliced,
        not walked); only the non-history items are compared by content.
        """
        duplicates: list[Duplicate] = []
        kept = offered
        if len(set(map(_ID, offered))) != len(offered):
            keep = [True] * len(offered)
            dedupe_ids(offered, keep, duplicates)
            kept = list(compress(offered, keep))
        groups: dict[int | None, list[ContextItem]] = defaultdict(list)
        start = 0
        for tier, run in groupby(map(_TIER, kept)):
            end = start + len(list(run))
            groups[tier].extend(kept[start:end])
            start = end
        offered_per_tier = {int(t): len(g) for t, g in groups.items() if t is not None}
        for dup in duplicates:
            tier = int(dup.item.tier)
            offered_per_tier[tier] = offered_per_tier.get(tier, 0) + 1
        if _NEVER in map(_SHRINK, kept):
            history = groups.get(_RECENT, [])
            if any(it.shrink is _NEVER for it in history):
                # Sent whatever happens, with what it cannot be sent without; they stay in the
                # history too, so that packing sees the conversation whole.
                groups[None].extend(_with_partners(history))
            for tier in [t for t in groups if t is not None and t != _RECENT]:
                never = [it for it in groups[tier] if it.shrink is _NEVER]
                if never:
                    groups[None].extend(never)
                    groups[tier] = [it for it in groups[tier] if it.shrink is not _NEVER]
        others = [it for t, g in groups.items() if t != _RECENT for it in g]
        if len(others) > 1:
            unique, dropped = dedupe(others, near_threshold=self.near_duplicate_threshold)
            if dropped:
                duplicates.extend(dropped)
                alive = set(map(id, unique))
                for t in list(groups):
                    if t != _RECENT:
                        groups[t] = [it for it in groups[t] if id(it) in alive]
        return groups, duplicates, offered_per_tier

    # -- packing ---------------------------------------------------------------------------
    def _pack(
        self,
        groups: dict[int | None, list[ContextItem]],
        budget: Budget,
        layout: Layout,
        *,
        replaced: dict[str, ContextItem],
    ) -> _State:
        state = _State(layout=layout, budget=budget)
        promoted = {s.id: s for s in replaced.values()}
        state.originals = {
            it.id: it for it in groups.get(int(Tier.SUMMARY), []) if it.id in promoted
        }
        required: list[ContextItem] = []
        by_tier: dict[int, list[ContextItem]] = {}
        history: list[ContextItem] = []
        required.extend(groups.get(None, ()))
        for tier, members in sorted((t, m) for t, m in groups.items() if t is not None):
            if tier in NEVER_PRUNED_TIERS:
                required.extend(members)
                continue
            if replaced:
                members = [it for it in members if it.id not in replaced and it.id not in promoted]
            if tier == _RECENT:
                history, members = members, []
            if members:
                by_tier[tier] = members
        for summary in sorted(promoted.values(), key=lambda it: it.id, reverse=True):
            # A summary standing in for what it covers is packed first in their tier.
            by_tier.setdefault(int(summary.tier), []).insert(0, summary)
        if replaced:
            covered = [it for members in groups.values() for it in members if it.id in replaced]
            state.lazy.append((covered, PruneReason.REPLACED_BY_SUMMARY, "a summary covers it"))

        state.used = layout.base_cost()
        queries: list[ContextItem] = []
        for item in required:
            section = _section(item, promoted)
            state.add(item, section, layout.cost(item, section), capped=False)
            if section == "query":
                queries.append(item)
        if len(queries) > 1:
            # Every query but the last is followed by a separator: charge all but the cheapest.
            joins = sorted(layout.query_join_cost(q) for q in queries)
            state.charge(int(Tier.QUERY), sum(joins[1:]))
        if state.used > budget.available:
            raise _too_big(state, budget)
        sent = state.sent = {id(it) for it in required if state.section[it.id] == "history"}

        tiers = sorted(set(by_tier) | ({_RECENT} if history else set()))
        reserved = self._floors(tiers, by_tier, history, state, promoted)
        unsendable = Unsendable()

        def history_cost(run: Sequence[ContextItem]) -> int:  # what was paid is not again
            paid = sum(layout.cost(it, "history") for it in run if id(it) in sent)
            return layout.run_cost(run, "history") - paid

        packer = HistoryPacker(
            iter_exchanges(history, unsendable),
            cost=history_cost if sent else partial(layout.run_cost, section="history"),
            refund=lambda older, newer: layout.join_refund(older, newer, "history"),
            kept=[],
            cut=[],
        )

        def room(tier: int) -> int:
            others = sum(tokens for t, tokens in reserved.items() if t != tier)
            allowance = budget.available - state.used - others
            cap = budget.cap_tokens(tier)
            if cap is not None:
                allowance = min(allowance, cap - state.capped_tokens.get(tier, 0))
            return allowance

        if history and self.min_exchanges:
            self._take_history(packer, state, room(_RECENT), self.min_exchanges)
        for tier in tiers:
            candidates = by_tier.get(tier, [])
            if candidates:
                self._pack_tier(tier, candidates, state, room(tier), promoted)
            if tier == _RECENT and history:
                self._take_history(packer, state, room(_RECENT), None)
            reserved.pop(tier, None)
        if budget.floors:
            self._fill(by_tier, state, budget, promoted)

        state.history = packer.chronological()
        if packer.cut:
            state.lazy.append((packer.cut, PruneReason.OVER_BUDGET, "history kept newest first"))
        state.lazy.append((_Remaining(packer), PruneReason.OVER_BUDGET, "older than kept history"))
        # Last: walking the remaining history (above, when a report asks) finds more of these.
        for found, reason, detail in (
            (unsendable.orphan_results, PruneReason.ORPHAN_TOOL_RESULT, _NO_CALL),
            (unsendable.unanswered_calls, PruneReason.ORPHAN_TOOL_CALL, _NO_RESULT),
            (unsendable.before_first_user, PruneReason.NO_USER_TURN, _NO_USER),
        ):
            state.lazy.append((found, reason, detail))
        return state

    def _take_history(
        self, packer: HistoryPacker, state: _State, allowance: int, limit: int | None
    ) -> None:
        header = state.open_cost("history")
        before = len(packer.blocks)
        if allowance > header:
            packer.take(allowance - header, max_exchanges=limit)
        layout = state.layout
        new = zip(packer.blocks[before:], packer.block_costs[before:], strict=True)
        for block, block_cost in new:
            fresh = [it for it in block if id(it) not in state.sent] if state.sent else block
            costs = [layout.cost(item, "history") for item in fresh]
            for item, cost in zip(fresh, costs, strict=True):
                state.add(item, "history", cost)
            state.charge(_RECENT, block_cost - sum(costs))

    def _pack_tier(
        self,
        tier: int,
        candidates: list[ContextItem],
        state: _State,
        allowance: int,
        promoted: dict[str, ContextItem],
    ) -> None:
        layout = state.layout
        budget = state.budget
        fresh: list[ContextItem] = []
        for item in candidates:
            if item.id in state.included_ids:
                continue
            if item.tier == Tier.SUMMARY and _redundant(item, state.included_ids):
                detail = "everything it covers is included"
                state.pruned.append(PrunedItem(item, PruneReason.REDUNDANT_SUMMARY, detail))
                continue
            fresh.append(item)
        if not fresh:
            return
        sections = [_section(it, promoted) for it in fresh]
        base = [layout.cost(it, s) for it, s in zip(fresh, sections, strict=True)]
        # The solver's weights: each item as if it opened its date line (an upper bound).
        costs = [b + state.date_cost(it, s) for b, it, s in zip(base, fresh, sections, strict=True)]
        opening = max(state.open_cost(s) for s in set(sections))
        capacity = allowance - opening
        held_back = 0
        if self.summarizer is not None and sum(costs) > capacity:
            if any(it.shrink is Shrink.SUMMARIZE for it in fresh):
                # Room for the summary of what will not fit whole, decided before packing.
                held_back = max(2 * self.truncate_min_tokens, allowance // 4)
                held_back = min(held_back, max(capacity, 0))
                capacity -= held_back
        negated = [-it.score for it in fresh]
        ranked = sorted(range(len(fresh)), key=negated.__getitem__)  # stable: ties by input
        values = [fresh[i].score for i in ranked]
        weights = [costs[i] for i in ranked]
        chosen, report = solve(values, weights, max(capacity, -1), exact_limit=self.exact_limit)
        state.solvers[tier] = report
        picked = {ranked[i] for i in chosen}
        before = state.used
        for i in sorted(picked):
            state.add(fresh[i], sections[i], base[i])
        # Fill with exact costs: the solver's weights charged every item its own date line, and
        # items the objective ignored (score <= 0) may still use room nobody else wants.
        left = allowance - held_back - (state.used - before)
        for i in ranked:
            if i in picked or base[i] > left:
                continue
            section = sections[i]
            extra = state.open_cost(section) + state.date_cost(fresh[i], section)
            if base[i] + extra <= left:
                picked.add(i)
                state.add(fresh[i], section, base[i])
                left -= base[i] + extra
        left += held_back
        rest = [i for i in ranked if i not in picked]
        if self.summarizer is not None or any(fresh[i].shrink is Shrink.TRUNCATE for i in rest):
            self._shrink_rest(fresh, sections, rest, state, left)
        free = state.budget.available - state.used
        cap = budget.cap_tokens(tier)
        capped: list[ContextItem] = []
        over: list[ContextItem] = []
        for i in rest:
            if fresh[i].id in state.included_ids:
                continue
            (capped if cap is not None and costs[i] <= free else over).append(fresh[i])
        if capped:
            detail = f"{tier_name(tier)} cap of {cap:,} tokens reached"
            state.lazy.append((capped, PruneReason.TIER_CAP, detail))
        if over:
            state.lazy.append((over, PruneReason.OVER_BUDGET, f"{tier_name(tier)} was full"))

    def _shrink_rest(
        self,
        items: list[ContextItem],
        sections: list[str],
        rest: list[int],
        state: _State,
        left: int,
    ) -> int:
        """Use what room is left for items that may be truncated or summarized."""
        layout = state.layout
        summarizable: list[int] = []
        for i in rest:
            item, section = items[i], sections[i]
            if item.shrink is Shrink.SUMMARIZE and self.summarizer is not None:
                summarizable.append(i)
                continue
            if item.shrink is not Shrink.TRUNCATE:
                continue
            room = left - state.open_cost(section) - state.date_cost(item, section)
            if room < self.truncate_min_tokens:
                continue

            def cost(text: str, item: ContextItem = item, section: str = section) -> int:
                return layout.cost(dataclasses.replace(item, text=text, tokens=None), section)

            text = truncate_to_tokens(item.text, room, cost)
            if text is None or cost(text) < self.truncate_min_tokens:
                continue
            short = dataclasses.replace(item, text=text, tokens=None)
            before = state.used
            state.add(short, section, cost(text))
            left -= state.used - before
            state.truncated.append(item.id)
        if summarizable and self.summarizer is not None:
            left = self._summarize(self.summarizer, items, summarizable, state, left)
        return left

    def _summarize(
        self,
        summarizer: Summarizer,
        items: list[ContextItem],
        indices: list[int],
        state: _State,
        left: int,
    ) -> int:
        layout = state.layout
        group = [items[i] for i in indices]
        template = dataclasses.replace(
            group[0],
            id=internal_id("summary", _digest(sorted(it.id for it in group))),
            text="",
            summary_of=tuple(it.id for it in group),
            shrink=Shrink.DROP,
            role=None,
            name=None,
            tokens=None,
            tool_calls=(),
            tool_call_id=None,
            parts=None,
            metadata={},
        )
        section = "summaries"
        room = left - state.open_cost(section) - state.date_cost(template, section)
        overhead = layout.cost(dataclasses.replace(template, text="x"), section) - 1
        if room - overhead < self.truncate_min_tokens:
            return left
        text = summarizer.summarize([it.text for it in group], room - overhead).strip()
        if not text:
            return left
        summary = dataclasses.replace(template, text=text)
        cost = layout.cost(summary, section)
        if cost > room:
            shorter = truncate_to_tokens(
                text, room, lambda t: layout.cost(dataclasses.replace(summary, text=t), section)
            )
            if shorter is None:
                return left
            summary = dataclasses.replace(summary, text=shorter)
            cost = layout.cost(summary, section)
        before = state.used
        state.add(summary, section, cost)
        for item in group:
            detail = f"summarized into {summary.id}"
            state.pruned.append(PrunedItem(item, PruneReason.REPLACED_BY_SUMMARY, detail))
            state.included_ids.add(item.id)  # handled: not reported again as over budget
        return left - (state.used - before)

    def _floors(
        self,
        tiers: list[int],
        by_tier: dict[int, list[ContextItem]],
        history: list[ContextItem],
        state: _State,
        promoted: dict[str, ContextItem],
    ) -> dict[int, int]:
        """Tokens kept for each floored tier: its floor, but never more than it could use."""
        reserved: dict[int, int] = {}
        layout = state.layout
        for tier in tiers:
            floor = state.budget.floor_tokens(tier)
            if floor <= 0:
                continue
            demand = 0
            for item in by_tier.get(tier, []):
                demand += layout.cost(item, _section(item, promoted))
                if demand >= floor:
                    break
            if tier == _RECENT:
                for item in reversed(history):
                    if demand >= floor:
                        break
                    demand += layout.cost(item, "history")
            if demand:
                demand += max(state.open_cost(s) for s in ("history", "knowledge", "pinned"))
            reserved[tier] = min(floor, demand)
        return reserved

    def _fill(
        self,
        by_tier: dict[int, list[ContextItem]],
        state: _State,
        budget: Budget,
        promoted: dict[str, ContextItem],
    ) -> None:
        """After floors: room a floored tier left unused goes to whatever still fits."""
        layout = state.layout
        for tier in sorted(by_tier):
            cap = budget.cap_tokens(tier)
            for item in sorted(by_tier[tier], key=lambda it: -it.score):
                if item.id in state.included_ids:
                    continue
                section = _section(item, promoted)
                cost = (
                    layout.cost(item, section)
                    + state.open_cost(section)
                    + state.date_cost(item, section)
                )
                if cost > budget.available - state.used:
                    continue
                if cap is not None and state.capped_tokens.get(tier, 0) + cost > cap:
                    continue
                state.add(item, section, layout.cost(item, section))
                state.pruned = [p for p in state.pruned if p.item.id != item.id]

    def _substitutions(
        self, groups: dict[int | None, list[ContextItem]], state: _State
    ) -> dict[str, ContextItem]:
        """Summaries to use in place of clusters that did not fully fit, costliest first.

        A summary covers the ids in its ``summary_of``, or, when that is empty, every item of
        its ``cluster_id``. It replaces them when at least one of them was left out for want of
        room; it then takes the highest tier and score of what it covers.
        """
        summaries = [
            it for it in groups.get(int(Tier.SUMMARY), []) if it.summary_of or it.cluster_id
        ]
        if not summaries:
            return {}
        items = [it for members in groups.values() for it in members]
        left_out = {p.item.id for p in state.pruned if p.reason in _ROOM_REASONS}
        for items_lazy, reason, _ in state.lazy:
            if reason in _ROOM_REASONS and not isinstance(items_lazy, _Remaining):
                left_out.update(it.id for it in items_lazy)
        remaining = next((s for s, _, _ in state.lazy if isinstance(s, _Remaining)), None)
        if remaining is not None:
            left_out.update(it.id for it in remaining)
        by_id = {it.id: it for it in items}
        required = {id(it) for it in groups.get(None, ())}
        layout = state.layout
        plans: list[tuple[int, str, ContextItem, list[ContextItem]]] = []
        for summary in summaries:
            if summary.summary_of:
                members = [by_id[i] for i in summary.summary_of if i in by_id]
            else:
                members = [
                    it for it in items if it.cluster_id == summary.cluster_id and it is not summary
                ]
            members = [
                m
                for m in members
                if not m.never_pruned and m.tier != Tier.SUMMARY and id(m) not in required
            ]
            if not members or not any(m.id in left_out for m in members):
                continue
            cost = sum(layout.cost(m, _section(m, {})) for m in members)
            plans.append((cost, summary.id, summary, members))
        replaced: dict[str, ContextItem] = {}
        for _, _, summary, members in sorted(plans, key=lambda p: (-p[0], p[1])):
            members = [m for m in members if m.id not in replaced]
            if not members:
                continue
            promoted = dataclasses.replace(
                summary,
                tier=min(int(m.tier) for m in members),
                score=max(m.score for m in members),
            )
            for member in members:
                replaced[member.id] = promoted
        return replaced

    # -- counting --------------------------------------------------------------------------
    def _exact_tokens(self, layout: Layout, state: _State, parts: Sequence[Part]) -> int:
        counter = layout.counter
        system = [it for it in state.included if state.section[it.id] == "system"]
        # A system text after another may start with "/", which tiktoken can join to the end
        # of the one before it: the one fragment shape packing cannot control.
        joined = any(it.text.strip().startswith("/") for it in system[1:])
        if counter.additive and not self.verify and not joined:
            # Exact by construction: fragments count additively, and the messages form of the
            # text formats holds every fragment plus the message overhead (never less).
            return layout.parts_tokens(parts)
        return self._exact_tokens_full(layout, parts)

    def _shrink_to_fit(
        self,
        layout: Layout,
        state: _State,
        placed: dict[str, list[ContextItem]],
    ) -> tuple[list[ContextItem], list[Part], int]:
        budget = state.budget
        while True:
            victim = _least_valuable(placed)
            if victim is None:
                msg = (
                    "the never-pruned items do not fit when counted exactly: "
                    f"{budget.available:,} tokens available; raise the budget"
                )
                raise BudgetExceededError(
                    msg, required=budget.available + 1, available=budget.available
                )
            section, items = victim
            for item in items:
                placed[section].remove(item)
                state.pruned.append(
                    PrunedItem(item, PruneReason.OVER_BUDGET, "exact count of the rendered output")
                )
                state.included_ids.discard(item.id)
            parts = layout.render_sections(placed)
            tokens = self._exact_tokens_full(layout, parts)
            if tokens <= budget.available:
                included = [it for s in _SECTION_ORDER for it in placed.get(s, ())]
                kept_ids = {it.id for it in included}
                state.included = [it for it in state.included if it.id in kept_ids]
                return included, parts, tokens

    @staticmethod
    def _exact_tokens_full(layout: Layout, parts: Sequence[Part]) -> int:
        messages = layout.counter.count_messages(layout.to_messages(parts))
        if layout.format == "messages":
            return messages
        return max(messages, layout.counter.count(layout.to_text(parts)))


_SECTION_ORDER = ("system", "pinned", "tools", "summaries", "knowledge", "history", "query")
_ROOM_REASONS = frozenset({PruneReason.OVER_BUDGET, PruneReason.TIER_CAP})


class _Remaining(Sequence[ContextItem]):
    """History never reached by packing, materialized only when a report asks for it."""

    def __init__(self, packer: HistoryPacker) -> None:
        self._packer = packer
        self._items: list[ContextItem] | None = None

    def _all(self) -> list[ContextItem]:
        if self._items is None:
            self._items = self._packer.remaining()
        return self._items

    def __len__(self) -> int:
        return len(self._all())

    def __getitem__(self, index: int) -> ContextItem:  # type: ignore[override]
        return self._all()[index]

    def __iter__(self) -> Iterator[ContextItem]:
        return iter(self._all())


def _place(
    state: _State, groups: dict[int | None, list[ContextItem]], offered: Sequence[ContextItem]
) -> dict[str, list[ContextItem]]:
    """Included items by section, in render order."""
    placed: dict[str, list[ContextItem]] = {}
    for item in state.included:
        placed.setdefault(state.section[item.id], []).append(item)
    index = {
        it.id: i
        for tier, members in groups.items()
        if tier != _RECENT
        for i, it in enumerate(members)
    }
    layout = state.layout
    for section, members in placed.items():
        if section != "history":
            # Dated sections are in date order, so each date line appears once.
            members.sort(
                key=lambda it: (
                    layout.date_of(it, section),
                    int(it.tier),
                    it.timestamp if it.timestamp is not None else float("-inf"),
                    index.get(it.id, len(index)),
                    it.id,
                )
            )
        elif len(members) == len(state.history):
            members[:] = state.history
        else:  # required messages joined the packed ones: order as the conversation goes
            order = _conversation_order(groups.get(_RECENT, []))
            members.sort(key=lambda it: order.get(id(it), -1))
    return placed


_NO_CALL = "its tool call is not sent right before it"
_NO_RESULT = "not every tool call it makes has its result"
_NO_USER = "before the first user turn (a conversation sent starts with one)"


def _with_partners(history: list[ContextItem]) -> list[ContextItem]:
    """The history items sent whatever happens, with what they cannot be sent without.

    A ``shrink="never"`` message comes with the results of its calls (or the call it answers
    and that call's other results) and the user turn of its exchange.

    Raises:
        InvalidItemError: a never-pruned message that cannot be sent with its partners.
    """
    unsendable = Unsendable()
    keep: set[int] = set()
    for exchange in iter_exchanges(history, unsendable):
        head = [] if exchange.head is None else [exchange.head]
        for step in [tuple(head), *exchange.steps]:
            if any(it.shrink is _NEVER for it in step):
                keep.update(id(it) for it in (*head, *step))
    stuck = [it for it in unsendable.items() if it.shrink is _NEVER]
    if stuck:
        item = stuck[0]
        if any(it is item for it in unsendable.before_first_user):
            why = "it comes before the first user turn, and a conversation starts with one"
        elif item.role == "tool":
            why = f"the call it answers ({item.tool_call_id!r}) is not in its exchange"
        else:
            why = "not every tool call it makes has a result in its exchange"
        msg = (
            f"history item {item.id!r} is never pruned (shrink='never'), but it cannot be sent: "
            f"{why}; give it its partners or let it be pruned"
        )
        raise InvalidItemError(msg)
    return [it for it in history if id(it) in keep]


def _conversation_order(history: list[ContextItem]) -> dict[int, int]:
    """Position of each history item as sent: exchanges in order, results after their call."""
    exchanges = list(iter_exchanges(history, Unsendable()))
    ordered = [it for exchange in reversed(exchanges) for it in exchange.items()]
    return {id(it): index for index, it in enumerate(ordered)}


def _drop_unsendable(
    state: _State, placed: dict[str, list[ContextItem]], required: set[int]
) -> None:
    """Take out of the history what no provider accepts (summaries or floors may leave it)."""
    kept, unsendable = sendable(placed["history"])
    if not unsendable:
        return
    if any(id(it) in required for it in unsendable.items()):  # _with_partners prevents it
        msg = "a never-pruned history item could not be sent with its partners"
        raise InvalidItemError(msg)
    placed["history"] = kept
    dropped = {id(it) for it in unsendable.items()}
    state.included = [it for it in state.included if id(it) not in dropped]
    for found, reason, detail in (
        (unsendable.orphan_results, PruneReason.ORPHAN_TOOL_RESULT, _NO_CALL),
        (unsendable.unanswered_calls, PruneReason.ORPHAN_TOOL_CALL, _NO_RESULT),
        (unsendable.before_first_user, PruneReason.NO_USER_TURN, _NO_USER),
    ):
        for item in found:
            state.included_ids.discard(item.id)
            tokens = state.layout.cost(item, "history")
            state.tier_tokens[int(item.tier)] = state.tier_tokens.get(int(item.tier), 0) - tokens
            state.pruned.append(PrunedItem(item, reason, detail))


def _checked(items: Iterable[ContextItem]) -> list[ContextItem]:
    if isinstance(items, ContextItem | str | bytes):
        msg = "items must be an iterable of ContextItem, not a single item or a string"
        raise InvalidItemError(msg)
    out = list(items)
    if set(map(type, out)) <= {ContextItem}:
        return out
    for index, item in enumerate(out):
        if not isinstance(item, ContextItem):
            msg = (
                f"item {index} is a {type(item).__name__}, not a ContextItem; wrap it, e.g. "
                "ContextItem(id=..., text=..., tier=Tier.RETRIEVED)"
            )
            raise InvalidItemError(msg)
    return out


def _digest(ids: Sequence[str]) -> str:
    return hashlib.sha1("\x1f".join(ids).encode("utf-8", "surrogatepass")).hexdigest()[:12]


def _section(item: ContextItem, promoted: dict[str, ContextItem]) -> str:
    if item.id in promoted:
        return "summaries"
    return Layout.section_of(item)


def _redundant(summary: ContextItem, included: set[str]) -> bool:
    return bool(summary.summary_of) and all(i in included for i in summary.summary_of)


def _too_big(state: _State, budget: Budget) -> BudgetExceededError:
    parts = ", ".join(
        f"{tier_name(t).lower()} {n:,}" for t, n in sorted(state.tier_tokens.items()) if n
    )
    msg = (
        f"the items that are never pruned need {state.used:,} tokens ({parts}, with formatting) "
        f"but only {budget.available:,} are available (window {budget.window:,} - reserve "
        f"{budget.reserve:,} - safety {budget.safety:,}); raise the window, lower the reserve, "
        "or shorten the system prompt and the query"
    )
    return BudgetExceededError(msg, required=state.used, available=budget.available)


def _least_valuable(
    placed: dict[str, list[ContextItem]],
) -> tuple[str, list[ContextItem]] | None:
    candidates = [
        (section, index, item)
        for section, items in placed.items()
        if section != "history"
        for index, item in enumerate(items)
        if not item.never_pruned
    ]
    if candidates:
        section, _, item = max(candidates, key=lambda c: (int(c[2].tier), -c[2].score, c[1]))
        return section, [item]
    history = [it for it in placed.get("history", []) if not it.never_pruned]
    if not history:
        return None
    # The oldest exchange goes first: up to (not including) the next user message.
    drop = [history[0]]
    for item in history[1:]:
        if (item.role or "user") == "user":
            break
        drop.append(item)
    return "history", drop


def _usage(counts: dict[int, int], state: _State) -> dict[int, TierUsage]:
    kept: dict[int, int] = {}
    for item in state.included:
        kept[int(item.tier)] = kept.get(int(item.tier), 0) + 1
    tiers = sorted(set(counts) | set(kept) | set(state.tier_tokens))
    return {
        t: TierUsage(
            tier=t,
            name=tier_name(t),
            offered=counts.get(t, 0),
            kept=kept.get(t, 0),
            pruned=max(0, counts.get(t, 0) - kept.get(t, 0)),
            tokens=state.tier_tokens.get(t, 0),
        )
        for t in tiers
    }
