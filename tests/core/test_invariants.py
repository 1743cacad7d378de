"""The promises of the core, stated as properties over random inputs (real tiktoken)."""

from __future__ import annotations

import os
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.strategies import item_sets
from ctxbudget import (
    AssembledContext,
    BudgetExceededError,
    ContextAssembler,
    ContextItem,
    PruneReason,
    Tier,
    TokenCounter,
)
from ctxbudget.core.dedupe import normalize
from ctxbudget.core.render import Layout
from ctxbudget.errors import ConfigurationError

COUNTERS = {name: TokenCounter.from_encoding(name) for name in ("o200k_base", "cl100k_base")}
FORMATS = st.sampled_from(["messages", "text", "compact"])
BUDGETS = st.integers(min_value=1, max_value=700)
# CTXBUDGET_EXAMPLES=3000 for a thorough run; 150 keeps `make test` quick.
SETTINGS = settings(
    max_examples=int(os.environ.get("CTXBUDGET_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def exact_tokens(ctx: AssembledContext, counter: TokenCounter) -> int:
    """Count the output the way it will be sent, from scratch."""
    as_messages = counter.count_messages(ctx.to_messages())
    if ctx.format == "messages":
        return as_messages
    return max(as_messages, counter.count(ctx.render()))


def assemble_or_none(
    assembler: ContextAssembler, items: list[ContextItem], budget: int, fmt: Any
) -> AssembledContext | None:
    try:
        return assembler.assemble(items, budget=budget, format=fmt)
    except BudgetExceededError as exc:
        # A clear error, and only when the never-pruned items really do not fit.
        assert exc.required > exc.available == budget
        assert "never pruned" in str(exc) and f"{budget:,}" in str(exc)
        required = [it for it in items if it.never_pruned]
        alone = ContextAssembler(assembler.counter, min_exchanges=0)
        with pytest.raises(BudgetExceededError):
            alone.assemble(required, budget=budget, format=fmt)
        return None


@SETTINGS
@given(items=item_sets(), budget=BUDGETS, fmt=FORMATS, encoding=st.sampled_from(list(COUNTERS)))
def test_rendered_tokens_never_exceed_the_budget(
    items: list[ContextItem], budget: int, fmt: Any, encoding: str
) -> None:
    counter = COUNTERS[encoding]
    ctx = assemble_or_none(ContextAssembler(counter), items, budget, fmt)
    if ctx is None:
        return
    assert ctx.tokens_used <= ctx.tokens_available == budget
    # The reported figure is the exact count of what is sent, not an estimate.
    assert exact_tokens(ctx, counter) == ctx.tokens_used


@SETTINGS
@given(items=item_sets(), budget=BUDGETS, fmt=FORMATS)
def test_never_pruned_items_are_present(items: list[ContextItem], budget: int, fmt: Any) -> None:
    ctx = assemble_or_none(ContextAssembler(COUNTERS["o200k_base"]), items, budget, fmt)
    if ctx is None:
        return
    required = {it.id for it in items if it.never_pruned}
    # ... unless it says what an included item says (a fact pinned twice is sent once).
    twins = {p.item.id: p for p in ctx.pruned if p.reason is PruneReason.DUPLICATE}
    for missing in required - set(ctx.included_ids):
        twin = twins[missing].item
        assert twin.tier not in (Tier.SYSTEM, Tier.QUERY)
        kept = {normalize(it.text) for it in ctx.included}
        assert normalize(twin.text) in kept


@SETTINGS
@given(items=item_sets(), budget=BUDGETS, fmt=FORMATS)
def test_the_summary_counts_what_the_report_lists(
    items: list[ContextItem], budget: int, fmt: Any
) -> None:
    ctx = assemble_or_none(ContextAssembler(COUNTERS["o200k_base"]), items, budget, fmt)
    if ctx is None:
        return
    summary = ctx.summary()  # before the list is built: counted from packing's own records
    listed = Counter(p.reason.value for p in ctx.pruned)
    assert summary["pruned_by_reason"] == dict(listed)
    assert summary["pruned"] == len(ctx.pruned)
    assert summary["included"] == len(ctx.included)
    assert ctx.summary() == summary


@SETTINGS
@given(items=item_sets(), budget=BUDGETS, fmt=FORMATS)
def test_every_item_is_either_included_or_pruned_with_a_reason(
    items: list[ContextItem], budget: int, fmt: Any
) -> None:
    ctx = assemble_or_none(ContextAssembler(COUNTERS["o200k_base"]), items, budget, fmt)
    if ctx is None:
        return
    included = ctx.included_ids
    pruned = [p.item.id for p in ctx.pruned]
    assert len(included) == len(set(included))
    assert sorted(included + pruned) == sorted(it.id for it in items)


@SETTINGS
@given(items=item_sets(), budget=BUDGETS, fmt=FORMATS, first=st.booleans())
def test_the_pruned_list_built_later_is_the_pruned_list(
    items: list[ContextItem], budget: int, fmt: Any, first: bool
) -> None:
    """`pruned_later` (the inclusion log's, built in its writer thread) lists what `pruned` does.

    Asked for before or after `pruned` was read, and in another thread: the same items, with
    the same reasons and details, in the same order; the report's own list is untouched.
    """
    ctx = assemble_or_none(ContextAssembler(COUNTERS["o200k_base"]), items, budget, fmt)
    if ctx is None:
        return
    later = ctx.pruned_later() if first else None
    with ThreadPoolExecutor(1) as pool:
        built = pool.submit(later) if later is not None else None
        listed = [(id(p.item), p.reason, p.detail) for p in ctx.pruned]
        after = ctx.pruned_later()
        for made in (built.result() if built is not None else None, after()):
            if made is not None:
                assert [(id(p.item), p.reason, p.detail) for p in made] == listed
    assert [(id(p.item), p.reason, p.detail) for p in ctx.pruned] == listed


@SETTINGS
@given(items=item_sets(), budget=BUDGETS, fmt=FORMATS)
def test_tiers_are_strict(items: list[ContextItem], budget: int, fmt: Any) -> None:
    """A left-out item could not have fit even if every lower-tier item were removed."""
    assembler = ContextAssembler(COUNTERS["o200k_base"], min_exchanges=0)
    ctx = assemble_or_none(assembler, items, budget, fmt)
    if ctx is None:
        return
    layout = assembler.layout(fmt)
    free = ctx.tokens_available - ctx.tokens_used - ctx.packing_slack
    for p in ctx.pruned:
        if p.reason is not PruneReason.OVER_BUDGET or p.item.tier == Tier.RECENT:
            continue
        # Headers paid by lower tiers would go with them: only higher tiers' count as open.
        above = [it for it in ctx.included if it.tier <= p.item.tier]
        open_sections = {Layout.section_of(it) for it in above}
        open_groups = {layout.group_of(s) for s in open_sections}
        section = Layout.section_of(p.item)
        cost = layout.cost(p.item, section)
        date = layout.date_of(p.item, section)
        if date and not any(
            Layout.section_of(it) == section and layout.date_of(it, section) == date for it in above
        ):
            cost += COUNTERS["o200k_base"].count(layout.date_line(date))
        if section not in open_sections:
            cost += layout.open_cost(section)
        if layout.group_of(section) not in open_groups:
            cost += layout.group_open_cost(layout.group_of(section))
        lower = sum(u.tokens for t, u in ctx.tiers.items() if t > p.item.tier)
        assert cost > free + lower, (p, cost, free, lower)


@SETTINGS
@given(items=item_sets(), budget=BUDGETS, fmt=FORMATS)
def test_history_has_no_orphans_and_starts_with_its_user_turn(
    items: list[ContextItem], budget: int, fmt: Any
) -> None:
    ctx = assemble_or_none(ContextAssembler(COUNTERS["o200k_base"]), items, budget, fmt)
    if ctx is None:
        return
    history = [it for it in ctx.included if Layout.section_of(it) == "history"]
    offered = [it for it in items if it.tier == Tier.RECENT]
    called: set[str] = set()
    for item in history:
        if item.role == "tool":
            assert item.tool_call_id in called, "tool result without its call"
        called.update(item.tool_calls)
    if history:
        first = history[0]
        earlier = offered[: offered.index(next(it for it in offered if it.id == first.id))]
        # It is a user turn, or nothing of the conversation before it was cut.
        assert first.role == "user" or not any(it.role == "user" for it in earlier)
        assert first.role != "tool"
    for message in ctx.to_messages():
        if message["role"] == "tool":
            assert message["tool_call_id"] in called


@SETTINGS
@given(items=item_sets(), budget=BUDGETS, fmt=FORMATS)
def test_same_input_same_output(items: list[ContextItem], budget: int, fmt: Any) -> None:
    first = assemble_or_none(ContextAssembler(COUNTERS["o200k_base"]), items, budget, fmt)
    if first is not None:
        assert_same_as_fresh(first, items, budget, fmt)


def assert_same_as_fresh(
    first: AssembledContext, items: list[ContextItem], budget: int, fmt: Any
) -> None:
    """``first`` is what a new assembler with a new counter makes of the same input."""
    second = ContextAssembler(TokenCounter.from_encoding("o200k_base")).assemble(
        list(items), budget=budget, format=fmt
    )
    assert first.render() == second.render()
    assert first.to_messages() == second.to_messages()
    assert first.included_ids == second.included_ids
    assert first.tokens_used == second.tokens_used
    assert [(p.item.id, p.reason) for p in first.pruned] == [
        (p.item.id, p.reason) for p in second.pruned
    ]


SHARED: dict[str, Layout] = {}  # one counter's layouts, warmed by every example before


@SETTINGS
@given(items=item_sets(), other=item_sets(), budget=BUDGETS, fmt=FORMATS)
def test_shared_layouts_give_what_fresh_ones_give(
    items: list[ContextItem], other: list[ContextItem], budget: int, fmt: Any
) -> None:
    # `ContextMemory` shares an assembler's layouts (and the rendered texts and costs they
    # cache) between calls: what earlier calls cached never changes a later call's output.
    counter = COUNTERS["o200k_base"]
    shared = ContextAssembler(counter, layouts=SHARED)
    assemble_or_none(shared, other, budget, fmt)
    first = assemble_or_none(shared, items, budget, fmt)
    if first is not None:
        assert_same_as_fresh(first, items, budget, fmt)


def test_shared_layouts_must_be_of_the_assemblers_counter() -> None:
    layouts = {"compact": Layout("compact", COUNTERS["cl100k_base"])}
    with pytest.raises(ConfigurationError, match="counter"):
        ContextAssembler(COUNTERS["o200k_base"], layouts=layouts)


@SETTINGS
@given(items=item_sets(with_system=True), budget=st.integers(200, 900))
def test_stable_prefix_is_byte_identical_across_turns(
    items: list[ContextItem], budget: int
) -> None:
    """Adding a turn changes the tail, never the system message that starts the prompt."""
    assembler = ContextAssembler(COUNTERS["o200k_base"])
    before = assemble_or_none(assembler, items, budget, "messages")
    after_items = [*items, ContextItem("new", "and one more thing", tier=Tier.RECENT, role="user")]
    after = assemble_or_none(assembler, after_items, budget, "messages")
    if before is None or after is None:
        return
    pinned_before = [
        it.id for it in before.included if it.tier in (Tier.SYSTEM, Tier.PINNED, Tier.TOOLS)
    ]
    pinned_after = [
        it.id for it in after.included if it.tier in (Tier.SYSTEM, Tier.PINNED, Tier.TOOLS)
    ]
    if pinned_before == pinned_after and pinned_before:
        assert before.to_messages()[0] == after.to_messages()[0]
