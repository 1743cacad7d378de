"""Budget analytics over synthetic logs: counts add up, each pruned id once per record with its
reason, percentiles monotone; and the stored form of a record round-trips exactly.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget.core.items import Tier
from ctxbudget.core.report import PruneReason
from ctxbudget.errors import StoreError
from ctxbudget.memory.log.analytics import (
    access_counts,
    budget_stats,
    is_memory_tier,
    percentile,
    plot_budget_stats,
)
from ctxbudget.memory.log.entries import (
    ContextRecord,
    IncludedEntry,
    PrunedEntry,
    TierEntry,
    decode_record,
    encode_record,
)

TIERS = [int(t) for t in Tier] + [45]
ids = st.sampled_from([f"m{i}" for i in range(8)] + ["ctxbudget:query", "ctxbudget:system", "é✓"])
tiers = st.sampled_from(TIERS)
reasons = st.sampled_from([r.value for r in PruneReason])

tier_entries = st.builds(
    TierEntry,
    tier=tiers,
    offered=st.integers(0, 50),
    kept=st.integers(0, 50),
    pruned=st.integers(0, 50),
    tokens=st.integers(0, 5000),
    floor=st.integers(0, 2000),
    cap=st.none() | st.integers(0, 5000),
)


@st.composite
def records(draw: st.DrawFn) -> ContextRecord:
    error = draw(st.none() | st.text(min_size=1, max_size=30))
    available = draw(st.integers(1, 10_000))
    return ContextRecord(
        id=draw(st.text(min_size=1, max_size=12)),
        session_id=draw(st.sampled_from(["s1", "s2", "ß"])),
        user_id=draw(st.none() | st.sampled_from(["u1", "u2"])),
        time=draw(st.floats(0, 2e9)),
        model="gpt-4o",
        format=draw(st.sampled_from(["messages", "text", "compact"])),
        window=available + 10,
        reserve=10,
        safety=0,
        tokens_available=available,
        tokens_used=0 if error else draw(st.integers(0, available)),
        included=()
        if error
        else tuple(draw(st.lists(st.builds(IncludedEntry, ids, tiers, st.integers(0, 999))))),
        pruned=() if error else tuple(draw(st.lists(st.builds(PrunedEntry, ids, tiers, reasons)))),
        tiers=()
        if error
        else tuple(draw(st.lists(tier_entries, unique_by=lambda t: t.tier, max_size=5))),
        error=error,
        required=None if error is None else draw(st.integers(0, 10**6)),
    )


logs = st.lists(records(), max_size=25)


@given(records())
def test_a_record_round_trips_through_its_stored_form(record: ContextRecord) -> None:
    assert decode_record(encode_record(record)) == record


@pytest.mark.parametrize(
    "document",
    ["", "not json", "[]", '{"v": 99}', '{"v": 1}', '{"v": 1, "id": "x", "budget": [1]}'],
)
def test_a_document_that_is_not_a_record_is_refused_clearly(document: str) -> None:
    with pytest.raises(StoreError, match="context record"):
        decode_record(document)


@given(logs)
def test_assemblies_errors_and_reasons_add_up(log: list[ContextRecord]) -> None:
    stats = budget_stats(log, top=None)
    ok = [r for r in log if r.error is None]
    assert stats.assemblies == len(log)
    assert stats.errors == len(log) - len(ok)
    assert sum(n for _, n in stats.pruned_by_reason) == sum(len(r.pruned) for r in ok)
    for tier in stats.tiers:
        rows = [t for r in ok for t in r.tiers if t.tier == tier.tier and t.offered]
        assert tier.assemblies == len(rows)
        assert (tier.offered, tier.kept, tier.pruned) == (
            sum(t.offered for t in rows),
            sum(t.kept for t in rows),
            sum(t.pruned for t in rows),
        )
        assert 0 <= tier.cap_hits <= tier.assemblies and 0 <= tier.floor_hits <= tier.assemblies
    offered = {t.tier for r in ok for t in r.tiers if t.offered}
    assert {t.tier for t in stats.tiers} == offered


@given(logs)
def test_each_pruned_id_counts_once_per_record_with_its_reason(log: list[ContextRecord]) -> None:
    stats = budget_stats(log, top=None)
    expected: dict[str, Counter[str]] = {}
    for record in log:
        if record.error is None:
            first: dict[str, str] = {}
            for entry in record.pruned:
                first.setdefault(entry.id, entry.reason)
            for item, reason in first.items():
                expected.setdefault(item, Counter())[reason] += 1
    assert {p.id for p in stats.most_pruned} == set(expected)
    for p in stats.most_pruned:
        assert p.count == sum(expected[p.id].values()) == sum(n for _, n in p.reasons)
        assert dict(p.reasons) == dict(expected[p.id])
        assert expected[p.id][p.reason] == max(expected[p.id].values())
    counts = [p.count for p in stats.most_pruned]
    assert counts == sorted(counts, reverse=True)
    top = budget_stats(log, top=3).most_pruned
    assert top == stats.most_pruned[:3]


@given(logs)
def test_percentiles_are_monotone(log: list[ContextRecord]) -> None:
    stats = budget_stats(log)
    assert stats.tokens_used_p50 <= stats.tokens_used_p90 <= stats.tokens_used_max
    assert stats.used_share_p50 <= stats.used_share_p90 <= stats.used_share_max
    for t in stats.tiers:
        assert t.tokens_p50 <= t.tokens_p90 <= t.tokens_max
        assert t.share_p50 <= t.share_p90 <= t.share_max


@given(st.lists(st.floats(-1e6, 1e6), min_size=1), st.floats(0, 100), st.floats(0, 100))
def test_percentile_is_a_value_that_occurred_and_grows_with_q(
    values: list[float], q1: float, q2: float
) -> None:
    low, high = sorted((q1, q2))
    assert percentile(values, low) <= percentile(values, high)
    assert percentile(values, low) in values
    assert percentile(values, 100) == max(values) and percentile(values, 0) == min(values)
    assert percentile([], 50) == 0


@given(logs)
def test_access_counts_count_each_memory_once_per_record(log: list[ContextRecord]) -> None:
    counts = access_counts(log)
    for item, n in counts.items():
        assert n == sum(
            any(e.id == item and is_memory_tier(e.tier) for e in r.included) for r in log
        )
    for record in log:
        for entry in record.included:
            if is_memory_tier(entry.tier):
                assert counts[entry.id] >= 1
    assert not is_memory_tier(Tier.QUERY) and is_memory_tier(Tier.RETRIEVED)


def test_cap_and_floor_hits_follow_their_definitions() -> None:
    def record(tier: TierEntry, *cut: str) -> ContextRecord:
        pruned = tuple(PrunedEntry(f"x{i}", tier.tier, r) for i, r in enumerate(cut))
        return ContextRecord(
            "k", "s", None, 0.0, "gpt-4o", "messages", 1000, 0, 0, 1000, 900, (), pruned, (tier,)
        )

    capped = TierEntry(int(Tier.RECENT), 5, 3, 2, 400, cap=400)
    under_cap = TierEntry(int(Tier.RECENT), 5, 3, 2, 300, cap=400)
    at_floor = TierEntry(int(Tier.RETRIEVED), 9, 2, 7, 200, floor=250)
    above_floor = TierEntry(int(Tier.RETRIEVED), 9, 5, 4, 300, floor=250)
    stats = budget_stats(
        [
            record(capped),  # reached its cap
            record(under_cap, "tier_cap"),  # an item cut for its cap
            record(under_cap, "over_budget"),
            record(at_floor, "over_budget"),  # cut for budget, at most its floor
            record(above_floor, "over_budget"),
            record(at_floor),  # nothing cut: the floor held nothing back
        ]
    )
    recent, retrieved = stats.tiers
    assert (recent.cap_hits, recent.floor_hits) == (2, 0)
    assert (retrieved.cap_hits, retrieved.floor_hits) == (0, 1)


@settings(max_examples=5, deadline=None)
@given(logs)
def test_the_plot_is_a_png(
    tmp_path_factory: pytest.TempPathFactory, log: list[ContextRecord]
) -> None:
    pytest.importorskip("matplotlib")
    out: Path = tmp_path_factory.mktemp("plot") / "budget.png"
    assert plot_budget_stats(budget_stats(log), out) == out
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
