"""Strategies and presets: merging, validation, user presets, and assembling with each preset.

The merge properties run on generated strategies (hypothesis); the assembly tests use a real
embedded Chroma and the real embedding model, with a session, another session of the same
user, a pinned fact and documents, so every tier a preset shapes has candidates.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxbudget import Budget, ConfigurationError, InvalidBudgetError, Tier
from ctxbudget.core.report import AssembledContext, PruneReason
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.errors import ConfigurationTypeError
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.memory.policy.floors import retrieved_floor
from ctxbudget.memory.policy.plan import plan_for
from ctxbudget.memory.policy.presets import (
    BUILTIN_PRESETS,
    PRESETS,
    as_strategy,
    preset,
    register_preset,
)
from ctxbudget.memory.policy.strategy import STRATEGY_FIELDS, Strategy, merge_strategies
from ctxbudget.store.chroma_store import ChromaStore

SHARED = ("floors", "caps", "scoring")
NAMED = ("chat", "agent", "coding", "rag")
PROPS = settings(max_examples=200, deadline=None, derandomize=True)
SLOW = settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# -- generated strategies ----------------------------------------------------------------------

tiers = st.sampled_from([Tier.RECENT, Tier.RETRIEVED, Tier.ENTITY, Tier.SUMMARY, 55])
fractions = st.floats(0.01, 1.0, allow_nan=False)
shares = st.one_of(fractions, st.integers(0, 3000))
share_maps = st.dictionaries(tiers, shares, max_size=3)
weights = st.dictionaries(
    st.sampled_from(["relevance_weight", "recency_weight", "half_life_days", "lexical_weight"]),
    st.floats(0.05, 1.0),
    max_size=3,
)
pairs = st.tuples(st.floats(0, 1), st.floats(0, 1)).map(lambda p: (min(p), max(p)))
raw_strategies = st.fixed_dictionaries(
    {},
    optional={
        "name": st.sampled_from(["a", "b", "c"]),
        "floors": share_maps,
        "caps": share_maps,
        "scoring": weights,
        "recent_share": pairs,
        "recent_messages": st.integers(0, 100),
        "min_exchanges": st.integers(0, 3),
        "document_k": st.integers(0, 30),
        "other_sessions": st.booleans(),
    },
)


def build(raw: dict[str, Any]) -> Strategy | None:
    try:
        return Strategy(**raw)
    except ConfigurationError:
        return None


valid = raw_strategies.map(build).filter(lambda s: s is not None)


def fraction_total(strategy: Strategy) -> float:
    return sum(s for s in (strategy.floors or {}).values() if isinstance(s, float))


def attempt(*layers: Strategy) -> Strategy | ConfigurationError:
    try:
        return merge_strategies(*layers)
    except ConfigurationError as exc:
        return exc


# -- merging -------------------------------------------------------------------------------------


@PROPS
@given(a=valid, b=valid)
def test_override_wins_where_set_and_none_inherits(a: Strategy, b: Strategy) -> None:
    merged = attempt(a, b)
    if isinstance(merged, ConfigurationError):
        # Only the combination can be invalid: floors adding up to more than 1, or one layer's
        # floor above the other's cap; the message says which.
        assert "add up to" in str(merged) or "larger than cap" in str(merged)
        return
    for name in STRATEGY_FIELDS:
        mine, theirs, got = getattr(a, name), getattr(b, name), getattr(merged, name)
        if name in SHARED:
            if mine is None and theirs is None:
                assert got is None
            else:
                assert dict(got) == {**(mine or {}), **(theirs or {})}
        elif name == "name":
            assert got == ("+".join(n for n in (mine, theirs) if n) or None)
        else:
            assert got == (mine if theirs is None else theirs)


@PROPS
@given(a=valid, b=valid, c=valid)
def test_merging_is_associative(a: Strategy, b: Strategy, c: Strategy) -> None:
    whole = attempt(a, b, c)
    ab, bc = attempt(a, b), attempt(b, c)
    left = ab if isinstance(ab, ConfigurationError) else attempt(ab, c)
    right = bc if isinstance(bc, ConfigurationError) else attempt(a, bc)
    for grouped in (left, right):
        if isinstance(grouped, Strategy):
            assert grouped == whole  # the same fields whatever the grouping
    if isinstance(whole, ConfigurationError):  # the final fields are refused by every grouping
        assert isinstance(left, ConfigurationError)
        assert isinstance(right, ConfigurationError)


@PROPS
@given(raw=raw_strategies)
def test_floors_add_up_to_at_most_the_budget_or_a_clear_error(raw: dict[str, Any]) -> None:
    floors = raw.get("floors", {})
    total = sum(s for s in floors.values() if isinstance(s, float))
    try:
        built = Strategy(**raw)
    except ConfigurationError as exc:
        text = str(exc)
        if total > 1.0 + 1e-9:
            assert "add up to" in text
            for tier, share in floors.items():
                if isinstance(share, float):
                    assert (Tier(tier).name if tier != 55 else "tier 55") in text
        else:
            assert "larger than cap" in text
        return
    assert fraction_total(built) <= 1.0 + 1e-9


@PROPS
@given(a=valid, b=valid, window=st.integers(1, 50_000))
def test_the_merged_budget_is_valid_or_a_clear_error(a: Strategy, b: Strategy, window: int) -> None:
    try:
        plan = plan_for(MemoryConfig(), a, b)
    except ConfigurationError as exc:
        assert "add up to" in str(exc) or "larger than cap" in str(exc)
        return
    try:
        budget = plan.budget(window)
    except InvalidBudgetError as exc:
        assert "strategy" in str(exc) and f"{window:,}" in str(exc)
        return
    assert sum(budget.floor_tokens(t) for t in budget.floors) <= budget.available
    assert dict(budget.floors) == dict(plan.floors)
    assert dict(budget.caps) == dict(plan.caps)


@PROPS
@given(strategy=valid)
def test_as_dict_round_trips(strategy: Strategy) -> None:
    assert as_strategy(strategy.as_dict()) == strategy


# -- the presets ---------------------------------------------------------------------------------


def test_the_default_preset_is_exactly_the_current_defaults() -> None:
    default = preset("default")
    assert default.apply(MemoryConfig()) == MemoryConfig()
    assert dataclasses.replace(Strategy.from_config(MemoryConfig()), name="default") == default
    for window in (1, 64, 1000, 4096, 128_000):
        assert plan_for(MemoryConfig(), None, "default").budget(window) == retrieved_floor(
            window, MemoryConfig().retrieved_floor
        )
    # With no strategy at all, nothing changes: a Budget is used as given.
    given = Budget(window=8192, reserve=1024)
    assert plan_for(MemoryConfig()).budget(given) is given
    assert plan_for(MemoryConfig()).budget(4096) == retrieved_floor(4096, 0.35)
    assert plan_for(None).budget(4096) == Budget(window=4096)  # no memory: no retrieved floor


@pytest.mark.parametrize("name", BUILTIN_PRESETS)
def test_every_preset_is_valid_and_applies(name: str) -> None:
    chosen = preset(name)
    assert chosen.name == name
    assert fraction_total(chosen) <= 1.0
    config = chosen.apply(MemoryConfig())
    for field in ("recent_share", "min_exchanges", "document_k", "recent_messages"):
        value = getattr(chosen, field)
        assert getattr(config, field) == (
            getattr(MemoryConfig(), field) if value is None else value
        )
    for weight, value in (chosen.scoring or {}).items():
        assert getattr(config.scoring, weight) == value
    budget = plan_for(MemoryConfig(), None, name).budget(4096)
    for tier, floor in (chosen.floors or {}).items():
        assert budget.floors[tier] == floor
    for tier, cap in (chosen.caps or {}).items():
        assert budget.caps[tier] == cap


def test_presets_differ_where_their_apps_differ() -> None:
    chat, agent, coding, rag = (preset(n).apply(MemoryConfig()) for n in NAMED)
    assert rag.document_k > MemoryConfig().document_k > chat.document_k
    assert rag.retrieved_floor > chat.retrieved_floor > agent.retrieved_floor
    assert coding.recent_share[0] > agent.recent_share[0] > chat.recent_share[0]
    assert (
        chat.scoring.half_life_days > agent.scoring.half_life_days > coding.scoring.half_life_days
    )
    assert agent.min_exchanges == coding.min_exchanges == 2
    assert coding.scoring.lexical_weight > MemoryConfig().scoring.lexical_weight


def test_unknown_preset_lists_the_known_ones() -> None:
    with pytest.raises(ConfigurationError) as caught:
        preset("companion")
    for name in BUILTIN_PRESETS:
        assert name in str(caught.value)
    assert preset("  RAG ") is PRESETS["rag"]


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        (
            {"floors": {Tier.RETRIEVED: 0.7, Tier.RECENT: 0.5}},
            "add up to 1.2 of the budget (RECENT",
        ),
        ({"floors": {Tier.RETRIEVED: 1.5}}, "floors[RETRIEVED] = 1.5"),
        ({"caps": {Tier.RECENT: -3}}, "caps[RECENT] = -3"),
        ({"floors": {Tier.SYSTEM: 0.1}}, "SYSTEM is never pruned"),
        ({"caps": {Tier.QUERY: 100}}, "QUERY is never pruned"),
        ({"floors": {"retreived": 0.1}}, "unknown tier 'retreived'"),
        ({"floors": {Tier.RETRIEVED: 0.5}, "caps": {Tier.RETRIEVED: 0.2}}, "floor 0.5 is larger"),
        ({"scoring": {"half_life": 3}}, "unknown weight 'half_life'; known: relevance_weight"),
        ({"scoring": {"half_life_days": 0}}, "half_life_days must be positive"),
        ({"recent_share": (0.6, 0.2)}, "recent_share = (0.6, 0.2)"),
        ({"document_k": -1}, "document_k must be an int of 0 or more, got -1"),
        ({"other_sessions": "yes"}, "other_sessions must be True or False"),
        ({"name": ""}, "non-empty text"),
    ],
)
def test_bad_strategies_say_what_where_and_the_numbers(fields: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        Strategy(name=fields.pop("name", "mine"), **fields)
    assert says in str(caught.value)


def test_wrong_types_and_unknown_fields_are_refused() -> None:
    with pytest.raises(ConfigurationTypeError, match="a preset name"):
        as_strategy(3)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="unknown field.*'doc_k'"):
        as_strategy({"doc_k": 3})
    with pytest.raises(ConfigurationTypeError, match="floors must be a mapping"):
        Strategy(floors=0.3)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationTypeError, match="recent_share must be a pair"):
        Strategy(recent_share=(0.1,))  # type: ignore[arg-type]


def test_merged_floors_name_the_memory_retrieved_floor() -> None:
    with pytest.raises(ConfigurationError, match="RECENT 0.8 \\+ RETRIEVED 0.35.*retrieved_floor"):
        plan_for(MemoryConfig(), None, {"floors": {"RECENT": 0.8}})
    # Setting the retrieved floor itself (0: none) makes room.
    plan = plan_for(MemoryConfig(), None, {"floors": {"RECENT": 0.8, "RETRIEVED": 0}})
    assert plan.budget(1000).floor_tokens(Tier.RECENT) == 800


def test_a_budget_keeps_its_own_shares_tier_by_tier() -> None:
    plan = plan_for(MemoryConfig(), None, "agent")
    own = Budget(window=8192, reserve=1024, floors={Tier.RETRIEVED: 0.05})
    shaped = plan.budget(own)
    assert shaped.floors == {Tier.RETRIEVED: 0.05}  # its own floor, and no cap from the strategy
    assert shaped.caps == {}
    plain = plan.budget(Budget(window=8192, reserve=1024))
    assert (plain.reserve, plain.floors, plain.caps) == (1024, {50: 0.15}, {50: 0.35})
    tokens = plan_for(MemoryConfig(), None, {"floors": {"RECENT": 5000}})
    with pytest.raises(InvalidBudgetError, match="on a budget of 1,000 available tokens"):
        tokens.budget(1000)


# -- user presets --------------------------------------------------------------------------------


def test_user_presets_register_and_resolve_everywhere() -> None:
    name = f"support-{uuid.uuid4().hex[:8]}"
    made = register_preset(name, preset("rag").merge(Strategy(document_k=6)))
    assert made.name == name and made.document_k == 6 and made.floors == preset("rag").floors
    assert preset(name.upper()) == made and PRESETS[name] == made
    assert plan_for(MemoryConfig(), None, name).config.document_k == 6
    with pytest.raises(ConfigurationError, match="already registered; pass replace=True"):
        register_preset(name, Strategy(document_k=1))
    assert register_preset(name, {"document_k": 1}, replace=True).document_k == 1
    with pytest.raises(ConfigurationError, match="built-in preset and cannot be replaced"):
        register_preset("Chat", Strategy(), replace=True)
    with pytest.raises(ConfigurationError, match="floors add up"):
        register_preset(f"bad-{name}", {"floors": {"RECENT": 0.9, "RETRIEVED": 0.9}})
    assert f"bad-{name}" not in PRESETS


def test_strategy_modules_import_without_chroma() -> None:
    code = (
        "import sys; sys.modules['chromadb'] = None; "
        "from ctxbudget.memory.policy.plan import plan_for; "
        "print(plan_for(None, None, 'coding').caps)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "{50: 0.3}"


# -- assembling with each preset (real Chroma, real embedder) -------------------------------------

TOPICS = ("the weather", "groceries", "a football match", "houseplants", "coffee beans")


@pytest.fixture(scope="module")
def store(
    tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder
) -> Iterator[ChromaStore]:
    folder: Path = tmp_path_factory.mktemp("strategy")
    store = ChromaStore(folder / "db", embedder=embedder)
    memory = ContextMemory(store=store, write_behind=False)
    turns = [
        {
            "id": f"m{n:03d}",
            "role": "user" if n % 2 == 0 else "assistant",
            "text": f"Turn {n}: small talk about {TOPICS[n % len(TOPICS)]}. " * (1 + n % 3),
            "timestamp": 1_700_000_000 + n * 3600,
        }
        for n in range(60)
    ]
    turns[10]["text"] = "My sister Ines lives in Porto and she paints sunsets."
    memory.add_messages("s1", turns, user_id="u1", progress=False)
    memory.add_messages(
        "s0", [("user", "I adopted a beagle called Rex last spring.")], user_id="u1", progress=False
    )
    memory.pin("s1", "The user is vegetarian.")
    memory.add_documents(
        [
            (
                f"doc{n}",
                f"Porto guide part {n}: the Ribeira, port cellars and painting classes. " * 4,
            )
            for n in range(30)
        ],
        source="guide",
        progress=False,
    )
    yield store
    store.close()


@pytest.fixture(scope="module")
def memory(store: ChromaStore) -> ContextMemory:
    return ContextMemory(store=store, write_behind=False)


def check(memory: ContextMemory, ctx: AssembledContext, budget: int) -> None:
    """The product's promises: fits, exact count, a valid conversation, a partition."""
    assert ctx.tokens_used <= budget == ctx.tokens_available
    assert memory.counter.count_messages(ctx.to_messages()) == ctx.tokens_used
    roles = [m["role"] for m in ctx.to_messages() if m["role"] != "system"]
    assert roles and roles[0] == "user"
    kept = {it.id for it in ctx.included}
    for entry in ctx.pruned:
        assert entry.reason is PruneReason.DUPLICATE or entry.item.id not in kept
    for tier in ctx.budget.caps:
        if tier in ctx.tiers:
            cap = ctx.budget.cap_tokens(tier)
            assert cap is not None and ctx.tiers[tier].tokens <= cap


questions = st.sampled_from(
    [
        "Where does my sister live?",
        "What did we say about coffee beans?",
        "Tell me about painting classes in Porto",
        "What is my dog called?",
    ]
)


@SLOW
@given(name=st.sampled_from(BUILTIN_PRESETS), query=questions, budget=st.integers(120, 3000))
def test_assembling_with_every_preset_fits_and_keeps_the_promises(
    memory: ContextMemory, name: str, query: str, budget: int
) -> None:
    ctx = memory.assemble("s1", query, budget=budget, strategy=name, system="Be kind.")
    check(memory, ctx, budget)
    expected = plan_for(memory.config, None, name).budget(budget)
    assert (ctx.budget.floors, ctx.budget.caps) == (expected.floors, expected.caps)


@pytest.mark.parametrize("budget", [150, 600, 2500])
@pytest.mark.parametrize("query", ["Where does my sister live?", "Painting classes in Porto?"])
def test_the_default_preset_assembles_exactly_as_no_strategy(
    store: ChromaStore, memory: ContextMemory, budget: int, query: str
) -> None:
    named = ContextMemory(store=store, write_behind=False, strategy="default")
    assert named.config == memory.config
    plain = memory.assemble("s1", query, budget=budget, format="compact")
    same = named.assemble("s1", query, budget=budget, format="compact")
    per_call = memory.assemble("s1", query, budget=budget, format="compact", strategy="default")
    for ctx in (same, per_call):
        assert ctx.included_ids == plain.included_ids
        assert ctx.render() == plain.render()
        assert ctx.tokens_used == plain.tokens_used


def documents_in(items: list[Any]) -> set[str]:
    return {it.id for it in items if it.source == "guide"}


def test_a_call_strategy_merges_over_the_memory_one(store: ChromaStore) -> None:
    chat = ContextMemory(store=store, write_behind=False, strategy="chat")
    query = "Painting classes in Porto?"
    few = documents_in(chat.candidates("s1", query, budget=4000).items)
    many = documents_in(chat.candidates("s1", query, budget=4000, strategy="rag").items)
    none = documents_in(chat.candidates("s1", query, budget=4000, strategy={"document_k": 0}).items)
    assert len(few) < len(many) and not none
    ctx = chat.assemble("s1", query, budget=2000, strategy={"caps": {"RETRIEVED": 0.5}})
    # chat's floors (retrieved 0.5, summaries 0.05) stay; the call adds its cap.
    assert ctx.budget.floors == {Tier.RETRIEVED: 0.5, Tier.SUMMARY: 0.05}
    assert ctx.budget.caps == {Tier.RETRIEVED: 0.5}
    check(chat, ctx, 2000)
    both = chat.assemble("s1", query, budget=2000, strategy="rag")
    assert both.budget.floors == {Tier.RETRIEVED: 0.6, Tier.SUMMARY: 0.05}  # tier by tier
    with pytest.raises(ConfigurationError, match="strategy 'chat': RETRIEVED: floor 0.5 is larger"):
        chat.assemble("s1", query, budget=2000, strategy={"caps": {"RETRIEVED": 0.1}})
    with pytest.raises(
        InvalidBudgetError, match="strategy 'chat'.*floor 0.5 is larger than cap 300"
    ):
        chat.assemble("s1", query, budget=2000, strategy={"caps": {"RETRIEVED": 300}})
    with pytest.raises(ConfigurationError, match="known presets: agent, chat"):
        ContextMemory(store=store, write_behind=False, strategy="nope")


def test_search_takes_the_strategy_scoring(memory: ContextMemory) -> None:
    query = "Porto painting"
    sharp = {s.hit.record.id: s.score for s in memory.search(query, k=10)}
    flat = {
        s.hit.record.id: s.score
        for s in memory.search(query, k=10, strategy={"scoring": {"relevance_weight": 1.0}})
    }
    assert sharp.keys() == flat.keys()
    # relevance in [0, 1]: relevance ** 1 >= relevance ** 3, the other factors unchanged.
    assert all(flat[k] >= sharp[k] - 1e-12 for k in sharp)
    assert any(flat[k] > sharp[k] for k in sharp)
