"""The inclusion log's record says what the report says, whatever was assembled (property)."""

from __future__ import annotations

from collections import Counter

from core.strategies import item_sets
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxbudget import BudgetExceededError, ContextAssembler, TokenCounter
from ctxbudget.memory.log.entries import decode_record, encode_record, success_record

COUNTER = TokenCounter.for_model("gpt-4o")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    items=item_sets(),
    available=st.integers(min_value=60, max_value=3000),
    fmt=st.sampled_from(["messages", "text", "compact"]),
)
def test_a_record_lists_the_included_and_each_pruned_item_once_as_the_report(
    items: list, available: int, fmt: str
) -> None:
    try:
        ctx = ContextAssembler(COUNTER).assemble(items, budget=available, format=fmt)  # type: ignore[arg-type]
    except BudgetExceededError:
        return
    record = success_record(
        key="k",
        session_id="s",
        user_id=None,
        time=0.0,
        model="gpt-4o",
        format=ctx.format,
        budget=ctx.budget,
        tokens_used=ctx.tokens_used,
        included=tuple(ctx.included),
        pruned=tuple(ctx.pruned),
        tiers=dict(ctx.tiers),
        counter=COUNTER,
    )
    assert [entry.id for entry in record.included] == ctx.included_ids
    assert Counter((p.id, p.reason) for p in record.pruned) == Counter(
        (p.item.id, p.reason.value) for p in ctx.pruned
    )
    assert {p.id for p in record.pruned}.isdisjoint(ctx.included_ids)
    assert record.tokens_used == ctx.tokens_used <= record.tokens_available
    assert decode_record(encode_record(record)) == record
