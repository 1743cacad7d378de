"""Step trimming (``history_trim="step"``) and the prefix shared with the previous call.

The core's promises hold in step mode too (fits, exact count, partition, valid conversation);
appending turns one by one keeps history's start or moves it later, and while it stays the
next call repeats the previous one byte for byte; kept history is never below the room less a
step and one exchange; ``prefix_tokens`` is exactly what the definitions of
`ctxbudget.core.prefix` say, for every format.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.fidelity import check_sent
from core.strategies import budgets, conversations, hostile_item_sets, item_sets
from core.test_fidelity import assemble as fidelity_assemble
from core.test_invariants import COUNTERS, FORMATS, SETTINGS, assemble_or_none, exact_tokens
from ctxbudget import (
    AssembledContext,
    Budget,
    ConfigurationError,
    ConfigurationTypeError,
    ContextAssembler,
    ContextItem,
    ExtractiveSummarizer,
    Tier,
    TokenCounter,
)
from ctxbudget.core.history import Unsendable, iter_exchanges, sendable
from ctxbudget.core.prefix import (
    PreviousContexts,
    shared_message_tokens,
    shared_prefix_tokens,
    shared_text_tokens,
)
from ctxbudget.core.trimming import step_anchors, trim_options

COUNTER = COUNTERS["o200k_base"]
STEPS = st.sampled_from([0.05, 0.15, 0.3, 0.6])
SYSTEM = ContextItem("sys", "You are a terse assistant.", tier=Tier.SYSTEM)


def stepper(step: float = 0.15, **options: Any) -> ContextAssembler:
    return ContextAssembler(COUNTER, history_trim="step", trim_step=step, **options)


def history_of(ctx: AssembledContext) -> list[ContextItem]:
    return [it for it in ctx.included if it.tier == Tier.RECENT]


# -- the core's promises, in step mode -----------------------------------------------------------
@SETTINGS
@given(items=item_sets(), budget=st.integers(1, 700), fmt=FORMATS, step=STEPS)
def test_step_trimming_keeps_every_promise(
    items: list[ContextItem], budget: int, fmt: Any, step: float
) -> None:
    ctx = assemble_or_none(stepper(step), items, budget, fmt)
    if ctx is None:
        return
    assert ctx.tokens_used <= ctx.tokens_available == budget
    assert exact_tokens(ctx, COUNTER) == ctx.tokens_used
    included = ctx.included_ids
    assert len(included) == len(set(included))
    assert sorted(included + [p.item.id for p in ctx.pruned]) == sorted(it.id for it in items)
    kept, unsendable = sendable(history_of(ctx))
    assert not unsendable and len(kept) == len(history_of(ctx))
    # Same input, same output.
    again = stepper(step).assemble(list(items), budget=budget, format=fmt)
    assert again.render() == ctx.render() and again.to_messages() == ctx.to_messages()


@SETTINGS
@given(
    items=hostile_item_sets(),
    budget=budgets(),
    fmt=FORMATS,
    step=STEPS,
    summarize=st.booleans(),
    min_exchanges=st.integers(0, 2),
)
def test_what_is_sent_is_exactly_what_was_chosen_in_step_mode(
    items: list[ContextItem],
    budget: Budget,
    fmt: Any,
    step: float,
    summarize: bool,
    min_exchanges: int,
) -> None:
    """Agent histories, floors and caps, summaries: rendered == included, valid, a partition."""
    summarizer = ExtractiveSummarizer(COUNTER.count) if summarize else None
    ctx = fidelity_assemble(
        items,
        budget,
        fmt,
        history_trim="step",
        trim_step=step,
        summarizer=summarizer,
        min_exchanges=min_exchanges,
    )
    if ctx is None:
        return
    assert ctx.tokens_used <= ctx.tokens_available
    assert exact_tokens(ctx, COUNTER) == ctx.tokens_used
    check_sent(ctx, items)


@SETTINGS
@given(history=conversations(), fmt=FORMATS)
def test_when_everything_fits_step_and_message_trimming_agree(
    history: list[ContextItem], fmt: Any
) -> None:
    items = [SYSTEM, *history]
    plain = ContextAssembler(COUNTER).assemble(items, budget=100_000, format=fmt)
    stepped = stepper().assemble(items, budget=100_000, format=fmt)
    assert stepped.to_messages() == plain.to_messages()
    assert stepped.trim is not None and stepped.trim.first_kept == 0 or not history


# -- appending turns one by one -------------------------------------------------------------------
def exchange_costs(items: list[ContextItem], layout: Any) -> list[int]:
    exchanges = list(iter_exchanges(items, Unsendable()))
    return [layout.run_cost(ex.items(), "history") for ex in exchanges]


@SETTINGS
@given(history=conversations(), budget=st.integers(40, 400), step=STEPS, fmt=FORMATS)
def test_appending_turns_extends_history_or_moves_its_start_later(
    history: list[ContextItem], budget: int, step: float, fmt: Any
) -> None:
    assembler = stepper(step)
    layout = assembler.layout(fmt)
    position = {it.id: i for i, it in enumerate(history)}
    before: AssembledContext | None = None
    for count in range(1, len(history) + 1):
        offered = history[:count]
        ctx = assemble_or_none(assembler, [SYSTEM, *offered], budget, fmt)
        if ctx is None:
            before = None
            continue
        assert ctx.tokens_used <= budget  # never over budget
        kept = history_of(ctx)
        trim = ctx.trim
        if trim is not None and trim.anchored and trim.first_kept and fmt == "messages":
            # Kept history is at least the room less one step and one exchange.
            tokens = sum(layout.cost(it, "history") for it in kept)
            room = budget - (ctx.tokens_used - tokens)
            assert tokens > room - trim.step_tokens - max(exchange_costs(offered, layout))
        if before is not None and kept and history_of(before):
            start, earlier = position[kept[0].id], position[history_of(before)[0].id]
            assert start >= earlier  # the start never moves back
            previous = before.trim
            if start == earlier and trim and trim.anchored and previous and previous.anchored:
                # Same start: this call repeats the previous one, then appends to it.
                assert [it.id for it in kept[: len(history_of(before))]] == [
                    it.id for it in history_of(before)
                ]
                if fmt == "messages":
                    old = before.to_messages()
                    assert ctx.to_messages()[: len(old)] == old
                    expected = before.tokens_used - COUNTER.reply_priming
                else:
                    assert ctx.render().startswith(before.render())
                    expected = shared_text_tokens(before.render(), before.render(), COUNTER)
                again = assembler.assemble(
                    [SYSTEM, *offered], budget=budget, format=fmt, previous=before
                )
                assert again.prefix_tokens == expected
        before = ctx


def test_a_long_conversation_keeps_its_prefix_between_steps() -> None:
    rng = random.Random(3)
    words = "plan trip Lisbon coffee river weekend review draft the a of".split()
    history = [
        ContextItem(
            f"m{i}",
            " ".join(rng.choice(words) for _ in range(rng.randint(5, 40))),
            tier=Tier.RECENT,
            role="user" if i % 2 == 0 else "assistant",
        )
        for i in range(300)
    ]
    assembler = stepper(0.15)
    before = None
    shares, starts = [], []
    for count in range(1, 301, 2):
        ctx = assembler.assemble([SYSTEM, *history[:count]], budget=1500, previous=before)
        assert ctx.tokens_used <= 1500
        if before is not None:
            assert ctx.prefix_tokens is not None
            shares.append(ctx.prefix_tokens / ctx.tokens_used)
        starts.append(history_of(ctx)[0].id)
        before = ctx
    assert starts == sorted(starts, key=lambda s: int(s[1:]))
    # Far fewer distinct starts than calls: most calls append to the previous one.
    assert len(set(starts)) < len(starts) / 3
    assert sum(shares) / len(shares) > 0.7
    assert "history trimmed in steps of" in ctx.explain()
    assert "prefix shared with the previous call" in ctx.explain()


def test_message_trimming_moves_the_start_on_almost_every_call() -> None:
    history = [
        ContextItem(
            f"m{i}",
            f"message number {i} " * 5,
            tier=Tier.RECENT,
            role="user" if i % 2 == 0 else "assistant",
        )
        for i in range(120)
    ]
    plain, step = ContextAssembler(COUNTER), stepper(0.2)
    starts: dict[str, list[str]] = {"plain": [], "step": []}
    for count in range(60, 121, 2):
        for name, assembler in (("plain", plain), ("step", step)):
            ctx = assembler.assemble([SYSTEM, *history[:count]], budget=600)
            starts[name].append(history_of(ctx)[0].id)
    assert len(set(starts["step"])) < len(set(starts["plain"])) / 2


def test_previous_keeps_history_where_it_started_when_a_shorter_query_gives_room() -> None:
    history = [
        ContextItem(
            f"m{i}",
            f"turn {i} " + "words " * 20,
            tier=Tier.RECENT,
            role="user" if i % 2 == 0 else "assistant",
        )
        for i in range(80)
    ]
    assembler = stepper(0.15)
    # 70 tokens of query more: less than a step (178 tokens here), more than the margin left.
    long_query = ContextItem("q1", "why " * 70, tier=Tier.QUERY, role="user")
    short_query = ContextItem("q2", "why?", tier=Tier.QUERY, role="user")
    first = assembler.assemble([SYSTEM, *history, long_query], budget=1200)
    alone = assembler.assemble([SYSTEM, *history, short_query], budget=1200)
    held = assembler.assemble([SYSTEM, *history, short_query], budget=1200, previous=first)
    assert history_of(alone)[0].id != history_of(first)[0].id  # more room: starts earlier
    assert held.trim is not None and held.trim.held
    assert history_of(held)[0].id == history_of(first)[0].id
    assert "where the previous call started" in held.explain()
    # The messages up to the query are the previous call's, byte for byte.
    shared = first.to_messages()[:-1]
    assert held.to_messages()[: len(shared)] == shared
    assert held.prefix_tokens == shared_message_tokens(shared, shared, COUNTER)


# -- anchors and options ---------------------------------------------------------------------------
@given(costs=st.lists(st.integers(0, 300), max_size=40), step=st.integers(1, 500))
def test_anchors_are_where_the_running_total_crosses_a_new_step(
    costs: list[int], step: int
) -> None:
    anchors = step_anchors(costs, step)
    assert anchors[0] == 0 and anchors == sorted(set(anchors))
    totals = [sum(costs[:i]) for i in range(len(costs))]
    for earlier, later in zip(anchors, anchors[1:], strict=False):
        # The next anchor is the first boundary past the next multiple of the step.
        threshold = (totals[earlier] // step + 1) * step if earlier else step
        assert totals[later] >= threshold
        assert all(totals[i] < threshold for i in range(earlier + 1, later))
    # Appending never moves an anchor.
    assert step_anchors([*costs, 50, 70], step)[: len(anchors)] == anchors


@pytest.mark.parametrize(
    ("history_trim", "trim_step", "error"),
    [
        ("steps", 0.2, ConfigurationError),
        (None, 0.2, ConfigurationError),
        ("step", 0.0, ConfigurationError),
        ("step", 1.0, ConfigurationError),
        ("step", 1, ConfigurationTypeError),
        ("step", "0.2", ConfigurationTypeError),
        ("step", True, ConfigurationTypeError),
    ],
)
def test_bad_trimming_options_are_refused_with_what_to_pass(
    history_trim: Any, trim_step: Any, error: type[Exception]
) -> None:
    with pytest.raises(error, match="history_trim|trim_step"):
        ContextAssembler(COUNTER, history_trim=history_trim, trim_step=trim_step)


def test_the_default_of_the_core_is_message_trimming_and_adapters_choose() -> None:
    assembler = ContextAssembler(COUNTER)
    assert assembler.history_trim == "message"
    assert trim_options(None, 0.15) == {"history_trim": "step", "trim_step": 0.15}
    assert trim_options(None, 0.15, memories=True)["history_trim"] == "message"
    ctx = assembler.assemble(
        [SYSTEM, ContextItem("u", "hi", tier=Tier.RECENT, role="user")], budget=50
    )
    assert ctx.trim is None and ctx.prefix_tokens is None and ctx.summary()["prefix_tokens"] is None


# -- what the prefix is, per format ----------------------------------------------------------------
def brute_force(ctx: AssembledContext, previous: AssembledContext, counter: TokenCounter) -> int:
    if ctx.format == "messages":
        total = 0
        for now, before in zip(ctx.to_messages(), previous.to_messages(), strict=False):
            if now != before:
                break
            total += counter.count_messages([now]) - counter.reply_priming
        return total
    text, old = ctx.render(), previous.render()
    same = 0
    while same < min(len(text), len(old)) and text[same] == old[same]:
        same += 1
    cut = text.rfind("\n", 0, same) + 1
    return counter.count(text[:cut])


@SETTINGS
@given(
    first=item_sets(with_system=True),
    second=item_sets(with_system=True),
    budgets_=st.tuples(st.integers(50, 700), st.integers(50, 700)),
    fmt=FORMATS,
    mode=st.sampled_from(["step", "message"]),
)
def test_prefix_tokens_are_the_tokens_of_the_identical_start(
    first: list[ContextItem],
    second: list[ContextItem],
    budgets_: tuple[int, int],
    fmt: Any,
    mode: Any,
) -> None:
    assembler = ContextAssembler(COUNTER, history_trim=mode)
    before = assemble_or_none(assembler, first, budgets_[0], fmt)
    if before is None:
        return
    # Sometimes the same items again: the second call shares (almost) everything.
    items = first if budgets_[1] % 3 == 0 else second
    ctx = assemble_or_none(assembler, items, budgets_[1], fmt)
    if ctx is None:
        return
    ctx = assembler.assemble(items, budget=budgets_[1], format=fmt, previous=before)
    assert ctx.prefix_tokens == brute_force(ctx, before, COUNTER)
    assert 0 <= ctx.prefix_tokens <= ctx.tokens_used
    assert ctx.summary()["prefix_tokens"] == ctx.prefix_tokens
    # The previous call given as what it sent counts the same.
    sent: Any = before.to_messages() if fmt == "messages" else before.render()
    assert shared_prefix_tokens(ctx, sent, COUNTER) == ctx.prefix_tokens
    if fmt != "messages":
        assert shared_prefix_tokens(ctx, before.to_messages(), COUNTER) == ctx.prefix_tokens


def test_a_previous_call_of_another_kind_is_refused() -> None:
    items = [SYSTEM, ContextItem("u", "hi", tier=Tier.RECENT, role="user")]
    assembler = ContextAssembler(COUNTER)
    with pytest.raises(ConfigurationTypeError, match="previous"):
        assembler.assemble(items, budget=100, previous=42)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationTypeError, match="text"):
        assembler.assemble(items, budget=100, previous="You are a terse assistant.\n")
    text = assembler.assemble(items, budget=100, format="text", previous="You are a terse")
    assert text.prefix_tokens == 0  # no whole line in common


def test_previous_contexts_keep_the_newest_of_each_session_within_a_bound() -> None:
    kept = PreviousContexts(keep=2)
    contexts = [
        ContextAssembler(COUNTER).assemble([ContextItem(f"q{i}", "hi", tier=Tier.QUERY)], budget=20)
        for i in range(3)
    ]
    kept.put("a", contexts[0])
    kept.put("b", contexts[1])
    assert kept.get("a") is contexts[0]  # now the most recently used
    kept.put("c", contexts[2])
    assert kept.get("b") is None and kept.get("a") is contexts[0] and kept.get("c") is contexts[2]
    kept.put("a", contexts[1])
    assert kept.get("a") is contexts[1]
    with pytest.raises(ConfigurationError, match="keep"):
        PreviousContexts(keep=-1)
    none = PreviousContexts(keep=0)
    none.put("a", contexts[0])
    assert none.get("a") is None
