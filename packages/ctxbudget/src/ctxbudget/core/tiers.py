"""One packing pass: what goes in, tier by tier, within a budget's floors and caps.

The never-pruned items go in first (or the budget is too small); then the newest history
exchanges (``min_exchanges``), then each tier in order: the knapsack of `packing` over its
candidates, the room left to what may be truncated or summarized (`summaries.shrink_rest`), and
for the history tier its exchanges newest first (`history.HistoryPacker`), back to the anchor
`trimming` chooses when ``history_trim="step"``. Each tier may use what is left but the floors
kept for the tiers after it, up to its cap; what floors kept but did not use is filled last.
Everything is written to a `PackState`.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from ctxbudget.core.accounting import PackState
from ctxbudget.core.budget import Budget
from ctxbudget.core.history import HistoryPacker, RemainingHistory, Unsendable, iter_exchanges
from ctxbudget.core.items import NEVER_PRUNED_TIERS, ContextItem, Shrink, Tier, tier_name
from ctxbudget.core.newer import keep_newer, link
from ctxbudget.core.packing import solve
from ctxbudget.core.render import Layout
from ctxbudget.core.report import PrunedItem, PruneReason, unsendable_reasons
from ctxbudget.core.summaries import Summarizer, is_redundant, shrink_rest
from ctxbudget.core.trimming import DEFAULT_TRIM_STEP, TrimMode, TrimReport, plan_steps, step_tokens
from ctxbudget.errors import BudgetExceededError

__all__ = ["pack_tiers"]

_RECENT = int(Tier.RECENT)
_QUERY = int(Tier.QUERY)
_NEWEST = "the newest user message (a conversation's question is never dropped)"


def pack_tiers(
    groups: dict[int | None, list[ContextItem]],
    budget: Budget,
    layout: Layout,
    *,
    replaced: dict[str, ContextItem],
    min_exchanges: int,
    exact_limit: int,
    summarizer: Summarizer | None,
    truncate_min_tokens: int,
    history_trim: TrimMode = "message",
    trim_step: float = DEFAULT_TRIM_STEP,
    previous_start: str | None = None,
) -> PackState:
    """Pack ``groups`` (items by tier; None: never pruned) into ``budget``.

    Args:
        groups: the items by tier, ``None`` for those never pruned whatever their tier.
        budget: the window, reserve, floors and caps.
        layout: the format's rendering rules and costs.
        replaced: the summary standing in for each covered id (`summaries.substitutions`).
        min_exchanges: the newest history exchanges packed before any other tier.
        exact_limit: largest ``items x capacity`` solved by the exact knapsack.
        summarizer: summarizes ``shrink="summarize"`` items that did not fit whole.
        truncate_min_tokens: shortest truncated text worth keeping.
        history_trim: ``"step"`` cuts history only at anchors (`ctxbudget.core.trimming`);
            ``"message"`` keeps the newest exchanges that fit.
        trim_step: the share of history's room one step drops.
        previous_start: the id of the user turn the previous call's history started with.

    Raises:
        BudgetExceededError: the never-pruned items alone do not fit.
    """
    link(groups)  # before any cost is known: an earlier item's row is marked
    state = PackState(layout=layout, budget=budget)
    promoted = {s.id: s for s in replaced.values()}
    state.originals = {it.id: it for it in groups.get(int(Tier.SUMMARY), []) if it.id in promoted}
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
    # Sent on every call of a session, unlike the query: what the step is a share of the rest of.
    fixed = state.used - state.tier_tokens.get(_QUERY, 0) - state.tier_tokens.get(_RECENT, 0)

    tiers = sorted(set(by_tier) | ({_RECENT} if history else set()))
    reserved = _floors(tiers, by_tier, history, state, promoted)
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
        going_on=not queries,  # a question sent apart: every exchange of history is answered
    )

    def room(tier: int) -> int:
        others = sum(tokens for t, tokens in reserved.items() if t != tier)
        allowance = budget.available - state.used - others
        cap = budget.cap_tokens(tier)
        if cap is not None:
            allowance = min(allowance, cap - state.capped_tokens.get(tier, 0))
        return allowance

    if history and min_exchanges:
        _take_history(packer, state, room(_RECENT), min_exchanges)
    for tier in tiers:
        candidates = by_tier.get(tier, [])
        if candidates:
            _pack_tier(
                tier,
                candidates,
                state,
                room(tier),
                promoted,
                exact_limit=exact_limit,
                summarizer=summarizer,
                truncate_min_tokens=truncate_min_tokens,
            )
        if tier == _RECENT and history and history_trim == "step":
            step = step_tokens(trim_step, budget, fixed=fixed, history_tier=_RECENT)
            allowance = room(_RECENT)
            header = state.open_cost("history")
            plan = plan_steps(
                packer,
                layout,
                history,
                step=step,
                room=allowance - header,
                previous_start=previous_start,
            )
            _take_history(packer, state, allowance, plan.limit)
            first = max(0, plan.exchanges - packer.exchanges_kept)
            state.trim = TrimReport(
                step_tokens=step,
                exchanges=plan.exchanges,
                first_kept=first,
                # By message, history may still happen to be kept whole.
                anchored=plan.anchored if plan.limit is not None else not first and not packer.cut,
                held=plan.held,
            )
        elif tier == _RECENT and history:
            _take_history(packer, state, room(_RECENT), None)
        reserved.pop(tier, None)
    if budget.floors:
        _fill(by_tier, state, budget, promoted)
    # Whatever was packed, an earlier statement never goes without the newer ones (`newer`).
    keep_newer(state, by_tier, partial(_section, promoted=promoted))

    state.history = packer.chronological()
    if packer.cut:
        state.lazy.append((packer.cut, PruneReason.OVER_BUDGET, "history kept newest first"))
    state.lazy.append(
        (RemainingHistory(packer), PruneReason.OVER_BUDGET, "older than kept history")
    )
    # Last: walking the remaining history (above, when a report asks) finds more of these.
    state.lazy.extend(unsendable_reasons(unsendable))
    return state


def _take_history(
    packer: HistoryPacker, state: PackState, allowance: int, limit: int | None
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
    tier: int,
    candidates: list[ContextItem],
    state: PackState,
    allowance: int,
    promoted: dict[str, ContextItem],
    *,
    exact_limit: int,
    summarizer: Summarizer | None,
    truncate_min_tokens: int,
) -> None:
    layout = state.layout
    budget = state.budget
    fresh: list[ContextItem] = []
    for item in candidates:
        if item.id in state.included_ids:
            continue
        if item.tier == Tier.SUMMARY and is_redundant(item, state.included_ids):
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
    if summarizer is not None and sum(costs) > capacity:
        if any(it.shrink is Shrink.SUMMARIZE for it in fresh):
            # Room for the summary of what will not fit whole, decided before packing.
            held_back = max(2 * truncate_min_tokens, allowance // 4)
            held_back = min(held_back, max(capacity, 0))
            capacity -= held_back
    negated = [-it.score for it in fresh]
    ranked = sorted(range(len(fresh)), key=negated.__getitem__)  # stable: ties by input
    values = [fresh[i].score for i in ranked]
    weights = [costs[i] for i in ranked]
    chosen, report = solve(values, weights, max(capacity, -1), exact_limit=exact_limit)
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
    if summarizer is not None or any(fresh[i].shrink.cuts for i in rest):
        shrink_rest(
            fresh,
            sections,
            rest,
            state,
            left,
            summarizer=summarizer,
            min_tokens=truncate_min_tokens,
        )
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


def _floors(
    tiers: list[int],
    by_tier: dict[int, list[ContextItem]],
    history: list[ContextItem],
    state: PackState,
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
    by_tier: dict[int, list[ContextItem]],
    state: PackState,
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
            base = layout.cost(item, section)
            room = budget.available - state.used
            if base > room:  # the usual case once packed: no need for the rest of its cost
                continue
            cost = base + state.open_cost(section) + state.date_cost(item, section)
            if cost > room:
                continue
            if cap is not None and state.capped_tokens.get(tier, 0) + cost > cap:
                continue
            state.add(item, section, layout.cost(item, section))
            state.pruned = [p for p in state.pruned if p.item.id != item.id]


def _section(item: ContextItem, promoted: dict[str, ContextItem]) -> str:
    if item.id in promoted:
        return "summaries"
    return Layout.section_of(item)


def _too_big(state: PackState, budget: Budget) -> BudgetExceededError:
    shorter = _NEWEST if state.tier_tokens.get(_RECENT) else "the query"
    parts = ", ".join(
        f"{tier_name(t).lower()} {n:,}" for t, n in sorted(state.tier_tokens.items()) if n
    )
    msg = (
        f"the items that are never pruned need {state.used:,} tokens ({parts}, with formatting) "
        f"but only {budget.available:,} are available (window {budget.window:,} - reserve "
        f"{budget.reserve:,} - safety {budget.safety:,}); raise the window, lower the reserve, "
        f"or shorten the system prompt and {shorter}"
    )
    return BudgetExceededError(msg, required=state.used, available=budget.available)
