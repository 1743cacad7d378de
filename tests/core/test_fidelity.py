"""What is sent is exactly what was chosen: properties over agent histories, and one
regression test for each class of input that once broke it."""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.fidelity import check_sent
from core.strategies import budgets, call_payload, hostile_item_sets
from ctxbudget import (
    AssembledContext,
    Budget,
    BudgetExceededError,
    ContextAssembler,
    ContextItem,
    ExtractiveSummarizer,
    InvalidItemError,
    PruneReason,
    Shrink,
    Tier,
    TokenCounter,
)
from ctxbudget.core.readback import parse_rendered

COUNTER = TokenCounter.from_encoding("o200k_base")
FORMATS = st.sampled_from(["messages", "text", "compact"])
# 1,000 examples each in CI (CI=true), 300 locally; CTXBUDGET_EXAMPLES sets it (3,000 for a
# thorough run: docs/reliability.md).
EXAMPLES = os.environ.get("CTXBUDGET_EXAMPLES", "1000" if os.environ.get("CI") else "300")
SETTINGS = settings(
    max_examples=int(EXAMPLES),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def exact_tokens(ctx: AssembledContext) -> int:
    as_messages = COUNTER.count_messages(ctx.to_messages())
    if ctx.format == "messages":
        return as_messages
    return max(as_messages, COUNTER.count(ctx.render()))


def assemble(
    items: list[ContextItem], budget: Budget | int, fmt: Any, **options: Any
) -> AssembledContext | None:
    """Assemble, or None for the two clear errors a caller may get from such input."""
    try:
        return ContextAssembler(COUNTER, **options).assemble(items, budget=budget, format=fmt)
    except BudgetExceededError:
        return None
    except InvalidItemError as exc:
        # Only never-pruned items are refused: one that cannot be sent with its partners, or
        # two different ones under one id.
        assert "is never pruned" in str(exc) or "never-pruned items share the id" in str(exc)
        assert any(f"{it.id!r}" in str(exc) and it.never_pruned for it in items), exc
        return None


@SETTINGS
@given(
    items=hostile_item_sets(),
    budget=budgets(),
    fmt=FORMATS,
    summarize=st.booleans(),
    min_exchanges=st.integers(0, 2),
)
def test_what_is_sent_is_exactly_what_was_chosen(
    items: list[ContextItem], budget: Budget, fmt: Any, summarize: bool, min_exchanges: int
) -> None:
    summarizer = ExtractiveSummarizer(COUNTER.count) if summarize else None
    ctx = assemble(items, budget, fmt, summarizer=summarizer, min_exchanges=min_exchanges)
    if ctx is None:
        return
    assert ctx.tokens_used <= ctx.tokens_available
    assert exact_tokens(ctx) == ctx.tokens_used
    check_sent(ctx, items)
    assert [p.item.id for p in ctx.pruned] == [p.item.id for p in ctx.pruned]  # stable
    assert set(ctx.included_ids).isdisjoint(
        p.item.id for p in ctx.pruned if p.reason is not PruneReason.DUPLICATE
    )


@SETTINGS
@given(items=hostile_item_sets(never=False), fmt=FORMATS)
def test_with_room_for_everything_all_that_can_be_sent_is_sent(
    items: list[ContextItem], fmt: Any
) -> None:
    ctx = assemble(items, 1_000_000, fmt)
    assert ctx is not None
    check_sent(ctx, items)
    allowed = {
        PruneReason.DUPLICATE,
        PruneReason.ORPHAN_TOOL_RESULT,
        PruneReason.ORPHAN_TOOL_CALL,
        PruneReason.NO_USER_TURN,
        PruneReason.REDUNDANT_SUMMARY,
    }
    assert {p.reason for p in ctx.pruned} <= allowed


# -- one regression test per class ----------------------------------------------------------
def _agent_turns() -> list[ContextItem]:
    """Two tool-call-only turns with the same (empty) text, role and no timestamps."""
    return [
        ContextItem("u", "weather in Lisbon and Porto?", tier=Tier.RECENT, role="user"),
        ContextItem(
            "a1",
            "",
            tier=Tier.RECENT,
            role="assistant",
            tool_calls=("c1",),
            metadata={"tool_calls": [call_payload("c1", "weather", {"city": "Lisbon"})]},
        ),
        ContextItem("t1", "18C", tier=Tier.RECENT, role="tool", tool_call_id="c1"),
        ContextItem(
            "a2",
            "",
            tier=Tier.RECENT,
            role="assistant",
            tool_calls=("c2",),
            metadata={"tool_calls": [call_payload("c2", "weather", {"city": "Porto"})]},
        ),
        ContextItem("t2", "15C", tier=Tier.RECENT, role="tool", tool_call_id="c2"),
    ]


@pytest.mark.parametrize("fmt", ["text", "compact"])
def test_equal_turns_each_show_their_own_tool_calls(fmt: Any) -> None:
    ctx = ContextAssembler(COUNTER).assemble(_agent_turns(), budget=2_000, format=fmt)
    rows = parse_rendered(ctx.render(), fmt)
    calls = [(r.role, [(c.id, c.arguments) for c in r.tool_calls], r.tool_call_id) for r in rows]
    assert calls == [
        ("user", [], None),
        ("assistant", [("c1", '{"city": "Lisbon"}')], None),
        ("tool", [], "c1"),
        ("assistant", [("c2", '{"city": "Porto"}')], None),
        ("tool", [], "c2"),
    ]
    check_sent(ctx, _agent_turns())


def test_items_taken_back_after_the_floors_are_not_also_pruned() -> None:
    items = [
        ContextItem("q", "question", tier=Tier.QUERY),
        *[ContextItem(f"r{i}", f"retrieved fact number {i}", score=i) for i in range(8)],
        *[ContextItem(f"e{i}", f"entity note {i}", tier=Tier.ENTITY) for i in range(8)],
    ]
    budget = Budget(window=120, floors={int(Tier.ENTITY): 0.5})
    ctx = ContextAssembler(COUNTER).assemble(items, budget=budget)
    check_sent(ctx, items)


def test_a_summary_never_leaves_half_a_tool_pair_or_an_assistant_first() -> None:
    turns = _agent_turns()
    items = [
        *turns,
        ContextItem("u2", "and Faro?", tier=Tier.RECENT, role="user"),
        ContextItem("a3", "Faro is 20C.", tier=Tier.RECENT, role="assistant"),
        # Covers the user turn and one tool result only.
        ContextItem("s", "Asked for the weather.", tier=Tier.SUMMARY, summary_of=("u", "t1")),
    ]
    for fmt in ("messages", "text", "compact"):
        for window in range(40, 200, 7):
            ctx = ContextAssembler(COUNTER).assemble(items, budget=window, format=fmt)
            check_sent(ctx, items)


def test_never_pruned_tool_messages_bring_their_partners_or_fail_clearly() -> None:
    turns = _agent_turns()
    never_result = [
        ContextItem(
            it.id,
            it.text,
            tier=it.tier,
            role=it.role,
            tool_call_id=it.tool_call_id,
            shrink=Shrink.NEVER,
        )
        if it.id == "t1"
        else it
        for it in turns
    ]
    ctx = ContextAssembler(COUNTER, min_exchanges=0).assemble(never_result, budget=60)
    assert {"u", "a1", "t1"} <= set(ctx.included_ids)
    check_sent(ctx, never_result)
    alone = [never_result[0], never_result[2]]  # the result without its call
    with pytest.raises(InvalidItemError, match="'t1' is never pruned"):
        ContextAssembler(COUNTER).assemble(alone, budget=500)


@pytest.mark.parametrize("fmt", ["text", "compact"])
def test_several_queries_are_sent_apart_and_counted(fmt: Any) -> None:
    items = [
        ContextItem("q1", "What is X?", tier=Tier.QUERY),
        ContextItem("q2", "/and Y?", tier=Tier.QUERY),
        ContextItem("q3", "", tier=Tier.QUERY),
        ContextItem("q4", "Z.", tier=Tier.QUERY),
    ]
    ctx = ContextAssembler(COUNTER).assemble(items, budget=500, format=fmt)
    assert [r.text for r in parse_rendered(ctx.render(), fmt)] == [
        "What is X?",
        "/and Y?",
        "",
        "Z.",
    ]
    assert ctx.tokens_used == exact_tokens(ctx)
    assert [m["role"] for m in ctx.to_messages()] == ["system", "user"]
    check_sent(ctx, items)
