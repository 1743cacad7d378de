"""Behaviour of the assembler on small, readable cases."""

from __future__ import annotations

import pytest

from ctxbudget import (
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

COUNTER = TokenCounter.from_encoding("o200k_base")


def reasons(ctx: object) -> dict[str, PruneReason]:
    return {p.item.id: p.reason for p in ctx.pruned}  # type: ignore[attr-defined]


def chat(n: int, words: int = 12) -> list[ContextItem]:
    out = []
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        text = f"turn {i} " + " ".join(["word"] * words)
        out.append(ContextItem(f"m{i}", text, tier=Tier.RECENT, role=role, timestamp=1.7e9 + i))
    return out


def test_never_pruned_items_that_do_not_fit_raise_with_numbers() -> None:
    items = [
        ContextItem("sys", "word " * 300, tier=Tier.SYSTEM),
        ContextItem("q", "hello", tier=Tier.QUERY),
    ]
    with pytest.raises(BudgetExceededError) as info:
        ContextAssembler(COUNTER).assemble(items, budget=Budget(window=200, reserve=50))
    message = str(info.value)
    assert "150 are available" in message and "window 200 - reserve 50" in message
    assert "system" in message and "shorten" in message
    assert info.value.available == 150 and info.value.required > 150


def test_history_is_kept_newest_first_as_whole_exchanges() -> None:
    items = chat(40)
    ctx = ContextAssembler(COUNTER).assemble(items, budget=300)
    kept = ctx.included_ids
    assert kept == [f"m{i}" for i in range(40 - len(kept), 40)]
    assert ctx.included[0].role == "user"
    assert all(r is PruneReason.OVER_BUDGET for r in reasons(ctx).values())


def test_pinned_facts_survive_a_long_history() -> None:
    items = [
        ContextItem("sys", "You are a helpful assistant.", tier=Tier.SYSTEM),
        ContextItem("fact", "The user is vegetarian.", tier=Tier.PINNED),
        *chat(500),
        ContextItem("q", "Where should we eat tonight?", tier=Tier.QUERY),
    ]
    ctx = ContextAssembler(COUNTER).assemble(items, budget=Budget(window=1024, reserve=256))
    assert "fact" in ctx.included_ids and ctx.tokens_used <= 768
    assert ctx.included_ids[-1] == "q"


def test_min_exchanges_beat_pinned_facts() -> None:
    pinned = [ContextItem(f"p{i}", f"pinned fact number {i}", tier=Tier.PINNED) for i in range(60)]
    items = [*pinned, *chat(6), ContextItem("q", "and?", tier=Tier.QUERY)]
    keep_one = ContextAssembler(COUNTER, min_exchanges=1).assemble(items, budget=200)
    assert {"m4", "m5"} <= set(keep_one.included_ids)
    strict = ContextAssembler(COUNTER, min_exchanges=0).assemble(items, budget=200)
    assert not {"m4", "m5"} & set(strict.included_ids)


def test_within_a_tier_the_best_total_score_wins() -> None:
    items = [
        ContextItem("big", "alpha " * 60, score=5.0),
        ContextItem("s1", "beta " * 28, score=3.0),
        ContextItem("s2", "gamma " * 28, score=3.0),
    ]
    ctx = ContextAssembler(COUNTER).assemble(items, budget=80, format="text")
    assert set(ctx.included_ids) == {"s1", "s2"}
    assert ctx.solvers[Tier.RETRIEVED].solver == "exact"


def test_caps_limit_a_tier_and_unused_share_flows_down() -> None:
    items = [
        *[ContextItem(f"r{i}", f"retrieved fact number {i}", score=1.0) for i in range(30)],
        *[ContextItem(f"e{i}", f"entity {i}", tier=Tier.ENTITY) for i in range(5)],
    ]
    budget = Budget(window=200, caps={Tier.RETRIEVED: 0.5})
    ctx = ContextAssembler(COUNTER).assemble(items, budget=budget, format="compact")
    assert ctx.tiers[Tier.RETRIEVED].tokens <= 100
    assert ctx.tiers[Tier.ENTITY].kept == 5
    assert PruneReason.TIER_CAP in reasons(ctx).values()


def test_floors_keep_room_for_a_lower_tier() -> None:
    items = [
        *[ContextItem(f"p{i}", f"pinned fact {i} " * 5, tier=Tier.PINNED) for i in range(40)],
        *[ContextItem(f"r{i}", f"retrieved {i}", score=1.0) for i in range(10)],
    ]
    budget = Budget(window=300, floors={Tier.RETRIEVED: 60})
    ctx = ContextAssembler(COUNTER).assemble(items, budget=budget)
    assert ctx.tiers[Tier.RETRIEVED].kept >= 5
    without = ContextAssembler(COUNTER).assemble(items, budget=300)
    assert Tier.RETRIEVED not in without.tiers or without.tiers[Tier.RETRIEVED].kept == 0


def test_duplicates_are_dropped_with_the_best_copy_kept() -> None:
    items = [
        ContextItem("a", "The user lives in Lisbon.", score=0.2),
        ContextItem("b", "the user  lives in lisbon.", score=0.9),
        ContextItem("c", "Completely different", score=0.1, embedding=[1.0, 0.0]),
        ContextItem("d", "Nearly the same meaning", score=0.5, embedding=[0.999, 0.01]),
        ContextItem("b", "same id again", tier=Tier.ENTITY),
    ]
    ctx = ContextAssembler(COUNTER).assemble(items, budget=500)
    assert set(ctx.included_ids) == {"b", "d"}
    assert reasons(ctx) == {
        "a": PruneReason.DUPLICATE,
        "c": PruneReason.DUPLICATE,
        "b": PruneReason.DUPLICATE,
    }


def test_repeated_history_turns_are_not_duplicates() -> None:
    items = [
        ContextItem("u1", "ok", tier=Tier.RECENT, role="user"),
        ContextItem("a1", "ok", tier=Tier.RECENT, role="assistant"),
        ContextItem("u2", "ok", tier=Tier.RECENT, role="user"),
    ]
    assert ContextAssembler(COUNTER).assemble(items, budget=500).included_ids == ["u1", "a1", "u2"]


def test_summary_replaces_the_cluster_that_does_not_fit() -> None:
    old = [
        ContextItem(f"d{i}", f"Long detail {i}. " + "blah " * 40, cluster_id="trip", score=1.0)
        for i in range(6)
    ]
    summary = ContextItem(
        "sum",
        "Summary: the trip to Lisbon in May.",
        tier=Tier.SUMMARY,
        summary_of=("d0", "d1", "d2", "d3", "d4", "d5"),
    )
    ctx = ContextAssembler(COUNTER).assemble([*old, summary], budget=120)
    assert "sum" in ctx.included_ids
    assert all(reasons(ctx)[f"d{i}"] is PruneReason.REPLACED_BY_SUMMARY for i in range(6))
    roomy = ContextAssembler(COUNTER).assemble([*old, summary], budget=5000)
    assert reasons(roomy) == {"sum": PruneReason.REDUNDANT_SUMMARY}


def test_truncation_cuts_at_a_sentence_boundary() -> None:
    doc = " ".join(f"Sentence number {i} is here." for i in range(50))
    item = ContextItem("doc", doc, shrink=Shrink.TRUNCATE)
    ctx = ContextAssembler(COUNTER).assemble([item], budget=80, format="text")
    assert ctx.truncated == ("doc",)
    kept = ctx.included[0].text
    assert kept.endswith("here. …") and kept.startswith("Sentence number 0")
    assert ctx.tokens_used <= 80


def test_summarize_on_the_fly_with_the_extractive_summarizer() -> None:
    notes = [
        ContextItem(
            f"n{i}",
            f"Note {i}: Lisbon trip planning, hotel near the river {i}.",
            shrink=Shrink.SUMMARIZE,
        )
        for i in range(30)
    ]
    assembler = ContextAssembler(COUNTER, summarizer=ExtractiveSummarizer(COUNTER.count))
    ctx = assembler.assemble(notes, budget=150, format="text")
    summaries = [it for it in ctx.included if it.id.startswith("ctxbudget:summary:")]
    assert len(summaries) == 1 and summaries[0].summary_of
    assert ctx.tokens_used <= 150
    assert PruneReason.REPLACED_BY_SUMMARY in reasons(ctx).values()


def test_orphan_tool_results_are_dropped() -> None:
    items = [
        ContextItem("t0", "result of nothing", tier=Tier.RECENT, role="tool", tool_call_id="zz"),
        ContextItem("u", "hi", tier=Tier.RECENT, role="user"),
    ]
    ctx = ContextAssembler(COUNTER).assemble(items, budget=200)
    assert ctx.included_ids == ["u"]
    assert reasons(ctx) == {"t0": PruneReason.ORPHAN_TOOL_RESULT}


def test_a_long_agent_turn_keeps_its_question_and_newest_steps() -> None:
    items = [ContextItem("u", "Do the big task", tier=Tier.RECENT, role="user")]
    for i in range(50):
        items.append(
            ContextItem(
                f"a{i}",
                f"calling tool {i}",
                tier=Tier.RECENT,
                role="assistant",
                tool_calls=(f"c{i}",),
            )
        )
        items.append(
            ContextItem(
                f"t{i}", f"result {i} " * 10, tier=Tier.RECENT, role="tool", tool_call_id=f"c{i}"
            )
        )
    ctx = ContextAssembler(COUNTER).assemble(items, budget=300)
    ids = ctx.included_ids
    assert ids[0] == "u" and ids[-1] == "t49" and ids[-2] == "a49"
    assert len(ids) < len(items)


def test_custom_integer_tiers_sit_between_the_named_ones() -> None:
    items = [
        ContextItem("mid", "between recent and retrieved " * 3, tier=45),
        ContextItem("low", "retrieved " * 9, tier=Tier.RETRIEVED),
    ]
    ctx = ContextAssembler(COUNTER).assemble(items, budget=30, format="text")
    assert ctx.included_ids == ["mid"]


def test_explain_shows_tiers_bar_and_cuts() -> None:
    items = [
        ContextItem("sys", "Be brief.", tier=Tier.SYSTEM),
        *chat(30),
        ContextItem("q", "?", tier=Tier.QUERY),
    ]
    text = ContextAssembler(COUNTER).assemble(items, budget=200).explain()
    assert "SYSTEM" in text and "RECENT" in text and "%" in text and "over_budget" in text
    assert "[" in text and "of 200 tokens" in text


def test_bad_items_get_a_clear_error() -> None:
    with pytest.raises(InvalidItemError, match="item 0 is a dict"):
        ContextAssembler(COUNTER).assemble([{"id": "x"}], budget=100)  # type: ignore[list-item]
    with pytest.raises(InvalidItemError, match="role must be one of"):
        ContextItem("x", "y", role="robot")
    with pytest.raises(InvalidItemError, match="non-empty"):
        ContextItem("", "y")
    with pytest.raises(InvalidItemError, match="finite"):
        ContextItem("x", "y", score=float("nan"))
    with pytest.raises(ValueError, match="format must be one of"):
        ContextAssembler(COUNTER).assemble([], budget=100, format="xml")  # type: ignore[arg-type]


def test_reassembling_only_tokenizes_what_is_new() -> None:
    counter = TokenCounter.from_encoding("o200k_base")
    items = chat(200)
    assembler = ContextAssembler(counter)
    assembler.assemble(items, budget=2000)
    before = counter.cache_info()
    assembler.assemble(
        [*items, ContextItem("new", "brand new words here", tier=Tier.RECENT, role="user")],
        budget=2000,
    )
    after = counter.cache_info()
    assert after.misses - before.misses <= 2


def test_system_texts_that_could_join_are_counted_whole() -> None:
    items = [
        ContextItem("s1", "Config: {}", tier=Tier.SYSTEM),
        ContextItem("s2", "//x and /no_think", tier=Tier.SYSTEM),
        ContextItem("q", "hi", tier=Tier.QUERY),
    ]
    for fmt in ("messages", "text", "compact"):
        ctx = ContextAssembler(COUNTER).assemble(items, budget=100, format=fmt)  # type: ignore[arg-type]
        assert COUNTER.count_messages(ctx.to_messages()) <= ctx.tokens_used <= 100


def test_a_summary_that_does_not_fit_does_not_take_what_it_covers_down() -> None:
    items = [
        ContextItem("a", "The train leaves at 09:39 from Santa Apolonia.", score=0.9),
        ContextItem("b", "Filler about the hotel. " * 40, score=0.1),
        ContextItem(
            "s",
            "Summary: " + "we talked about the trip, trains, hotels and budget. " * 6,
            tier=Tier.SUMMARY,
            summary_of=("a", "b"),
        ),
        ContextItem("q", "When does the train leave?", tier=Tier.QUERY),
    ]
    ctx = ContextAssembler(COUNTER).assemble(items, budget=80)
    assert "a" in ctx.included_ids


def test_the_memory_layer_imports_from_the_package_root() -> None:
    import ctxbudget

    assert ctxbudget.ContextMemory.__name__ == "ContextMemory"
    assert ctxbudget.MemoryConfig().recent_messages > 0


@pytest.mark.parametrize("budget", range(60, 260, 7))
def test_with_the_question_apart_history_is_whole_exchanges(budget: int) -> None:
    # The newest exchange of history was reduced to its user turn when its answer did not fit,
    # as an agent's turn still going on may be: with the question sent apart (a query), that
    # exchange is answered, and the model got two user turns in a row.
    items = [
        *chat(6, words=8),
        ContextItem("m6", "turn 6 " + "word " * 10, tier=Tier.RECENT, role="user"),
        ContextItem("m7", "turn 7 " + "word " * 40, tier=Tier.RECENT, role="assistant"),
        ContextItem("q", "and what now?", tier=Tier.QUERY),
    ]
    ctx = ContextAssembler(COUNTER, min_exchanges=0).assemble(items, budget=budget)
    history = [it for it in ctx.included if it.tier == Tier.RECENT]
    roles = [it.role for it in history]
    assert roles == ["user", "assistant"] * (len(roles) // 2)  # whole exchanges only
    assert ("m6" in ctx.included_ids) == ("m7" in ctx.included_ids)
