"""`ContextAssembler`: the pure core that turns items and a budget into an `AssembledContext`.

One path for every caller (DESIGN.md): dedupe, substitute summaries, allocate per tier, pack
each tier, render, count. Nothing here does I/O. `ContextAssembler.assemble` runs the steps in
order; each step lives with its subject:

- grouping by tier and dropping duplicates: here (`dedupe` compares);
- packing tier by tier, floors and caps: `tiers`, which keeps its accounts in `accounting`;
- summaries standing in for what they cover, truncating, summarizing: `summaries`;
- what a conversation must keep together: `history`; where it is cut in steps: `trimming`;
- what repeats the previous call's output (a provider's cached prefix): `prefix`;
- the exact count, and what goes when it is over: `fit`;
- the per-tier figures and prune reasons of the report: `report`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from functools import partial
from itertools import compress, groupby
from operator import attrgetter
from time import perf_counter

from ctxbudget.core.accounting import PackState
from ctxbudget.core.budget import Budget
from ctxbudget.core.dedupe import Duplicate, dedupe, dedupe_ids, pruned_duplicates
from ctxbudget.core.fit import exact_tokens, shrink_to_fit
from ctxbudget.core.history import conversation_order, sendable, with_partners
from ctxbudget.core.items import ContextItem, Shrink, Tier
from ctxbudget.core.markup import SECTIONS
from ctxbudget.core.packing import DEFAULT_EXACT_LIMIT
from ctxbudget.core.prefix import Previous, history_start, shared_prefix_tokens
from ctxbudget.core.render import Format, Layout
from ctxbudget.core.report import (
    AssembledContext,
    PrunedItem,
    tier_usage,
    unsendable_reasons,
)
from ctxbudget.core.summaries import Summarizer, substitutions
from ctxbudget.core.tiers import pack_tiers
from ctxbudget.core.trimming import DEFAULT_TRIM_STEP, TrimMode, check_trim
from ctxbudget.errors import ConfigurationError, ConfigurationTypeError, InvalidItemError
from ctxbudget.telemetry.operations import assembly_span
from ctxbudget.tokens.counter import TokenCounter

__all__ = ["ContextAssembler"]

_RECENT = int(Tier.RECENT)
_TIER = attrgetter("tier")
_ID = attrgetter("id")
_SHRINK = attrgetter("shrink")
_NEVER = Shrink.NEVER


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
        history_trim: how history shrinks when it does not all fit: ``"message"`` keeps the
            newest exchanges that fit; ``"step"`` cuts it only at anchors that stay put as turns
            are appended, so consecutive calls share a prefix a provider's prompt cache reuses
            (`ctxbudget.core.trimming`, docs/caching.md).
        trim_step: with ``"step"``, the share of history's room one step drops: kept history
            is between ``room - step - one exchange`` and ``room``.
        layouts: the rendering rules by format, shared between the assemblers of one counter
            (they cache each item's rendered text and cost, keyed by what it renders from, so
            a long-lived caller stops counting the same messages on every call).

    Raises:
        ConfigurationError: a negative ``min_exchanges``, an unknown ``history_trim``, a
            ``trim_step`` outside (0, 1), or ``layouts`` of another counter.

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
        history_trim: TrimMode = "message",
        trim_step: float = DEFAULT_TRIM_STEP,
        layouts: dict[str, Layout] | None = None,
    ) -> None:
        if counter is None:
            counter = TokenCounter.for_model(model or "gpt-4o")
        if layouts is not None and any(v.counter is not counter for v in layouts.values()):
            msg = "layouts: every layout must use this assembler's counter"
            raise ConfigurationError(msg)
        if summarizer is not None and not callable(getattr(summarizer, "summarize", None)):
            msg = (
                f"summarizer must have a summarize(texts, max_tokens) method returning a str "
                f"(a Summarizer, e.g. ExtractiveSummarizer), got {type(summarizer).__name__}"
            )
            raise ConfigurationTypeError(msg)
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
        self.history_trim, self.trim_step = check_trim(history_trim, trim_step)
        # One Layout per format; ``layouts`` shares them (and the costs they cache, keyed by
        # content) between the assemblers of one counter, as `ContextMemory` does.
        self._layouts: dict[str, Layout] = layouts if layouts is not None else {}

    def layout(self, fmt: Format) -> Layout:
        """The (cached) rendering rules of ``fmt`` for this assembler's counter."""
        layout = self._layouts.get(fmt) if isinstance(fmt, str) else None  # Layout checks it
        if layout is None:
            layout = self._layouts[fmt] = Layout(fmt, self.counter)
        return layout

    @assembly_span
    def assemble(
        self,
        items: Iterable[ContextItem],
        *,
        budget: Budget | int,
        format: Format = "messages",  # noqa: A002 - the public name the issue asks for
        previous: Previous | None = None,
    ) -> AssembledContext:
        """Choose, order and render ``items`` within ``budget``.

        ``previous`` is the previous call of the same session (its `AssembledContext`, the
        provider messages it sent, or its text): the result's ``prefix_tokens`` says how many
        of its leading tokens repeat it exactly (`ctxbudget.core.prefix`), and step trimming
        keeps history where that call started it when moving back would gain less than a step.

        Raises:
            InvalidBudgetError: the budget is zero, negative, or all reserve.
            BudgetExceededError: the never-pruned items alone do not fit.
            InvalidItemError: something other than a `ContextItem` was given.
            ConfigurationTypeError: ``previous`` is not one of the forms above.
        """
        start = perf_counter()
        budget = Budget.coerce(budget)
        layout = self.layout(format)
        offered = _checked(items)
        groups, duplicates, offered_per_tier = self._group(offered)

        pack = partial(
            pack_tiers,
            groups,
            budget,
            layout,
            min_exchanges=self.min_exchanges,
            exact_limit=self.exact_limit,
            summarizer=self.summarizer,
            truncate_min_tokens=self.truncate_min_tokens,
            history_trim=self.history_trim,
            trim_step=self.trim_step,
            previous_start=history_start(previous),
        )
        state = pack(replaced={})
        replaced = substitutions(groups, state)
        if replaced:
            state = pack(replaced=replaced)
            # A summary that did not fit after all must not take what it covers down with it.
            missed = {s.id for s in replaced.values() if s.id not in state.included_ids}
            if missed:
                replaced = {k: s for k, s in replaced.items() if s.id not in missed}
                state = pack(replaced=replaced)

        placed = _place(state, groups, offered)
        if state.sent:
            # Packed history is valid by construction (whole steps, from a user turn on);
            # merged with messages sent whatever happens, it is checked again.
            _drop_unsendable(state, placed, {id(it) for it in groups.get(None, ())})
        included = [it for s in SECTIONS for it in placed.get(s, ())]
        parts = layout.render_sections(placed)
        tokens_used = exact_tokens(layout, state, parts, verify=self.verify)
        if tokens_used > budget.available:
            # Only reachable with counters whose counts are not additive (Hugging Face,
            # approximate): drop the least valuable items until the exact count fits.
            included, parts, tokens_used = shrink_to_fit(layout, state, placed)
        if duplicates:
            state.pruned.extend(pruned_duplicates(duplicates, included, state.pruned, state.lazy))
        context = AssembledContext(
            layout=layout,
            parts=parts,
            included=included,
            pruned=state.pruned,
            pruned_lazy=state.lazy,
            budget=budget,
            tokens_used=tokens_used,
            tiers=tier_usage(offered_per_tier, state.included, state.tier_tokens),
            solvers=state.solvers,
            truncated=state.truncated,
            timing_ms=(perf_counter() - start) * 1000.0,
            packing_slack=max(0, state.used - tokens_used),
            trim=state.trim,
        )
        if previous is not None:
            context.prefix_tokens = shared_prefix_tokens(context, previous, layout.counter)
            context.timing_ms = (perf_counter() - start) * 1000.0
        return context

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
                groups[None].extend(with_partners(history))
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


def _place(
    state: PackState, groups: dict[int | None, list[ContextItem]], offered: Sequence[ContextItem]
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
            order = conversation_order(groups.get(_RECENT, []))
            members.sort(key=lambda it: order.get(id(it), -1))
    return placed


def _drop_unsendable(
    state: PackState, placed: dict[str, list[ContextItem]], required: set[int]
) -> None:
    """Take out of the history what no provider accepts (summaries or floors may leave it)."""
    kept, unsendable = sendable(placed["history"])
    if not unsendable:
        return
    if any(id(it) in required for it in unsendable.items()):  # with_partners prevents it
        msg = "a never-pruned history item could not be sent with its partners"
        raise InvalidItemError(msg)
    placed["history"] = kept
    dropped = {id(it) for it in unsendable.items()}
    state.included = [it for it in state.included if id(it) not in dropped]
    for found, reason, detail in unsendable_reasons(unsendable):
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
