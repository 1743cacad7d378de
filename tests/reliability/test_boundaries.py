"""One boundary per kind of outside value: numbers, model names and the registry's windows.

Properties over Python, numpy and Decimal numbers, bools, NaN and the infinities, and strings:
what a count or a real accepts is the same everywhere it enters, and a refusal is a
`ConfigurationError` (or its documented leaf) naming the value and where it came from. Then
every argument of `ContextMemory`'s public calls against one class of hostile values (bools,
numeric strings, NaN, infinities, numpy numbers, 5,000-digit ints, lone surrogates, a list nested
10,000 deep): taken where its kind takes it, else a `CtxBudgetError` naming the argument.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nested_values import nested

from ctxbudget import (
    Budget,
    ConfigurationError,
    ContextItem,
    CtxBudgetError,
    InvalidBudgetError,
    InvalidItemError,
    MemoryConfig,
    UnknownModelError,
    lookup_model,
)
from ctxbudget.core import items as items_module
from ctxbudget.core.items import Shrink, Tier
from ctxbudget.core.numbers import MAX_COUNT, count, real
from ctxbudget.core.stored import stored_item, stored_items
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.policy.scoring import Scoring
from ctxbudget.store.chroma_store import ChromaStore
from ctxbudget.tokens.models import known_models
from ctxbudget.tokens.names import parse_model_name

INT_TYPES = [int, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32, np.uint64]
FLOAT_TYPES = [float, np.float16, np.float32, np.float64]

ints = st.integers(min_value=-(2**31), max_value=2**31)
wholes = st.one_of(
    ints,
    st.tuples(st.sampled_from(INT_TYPES), st.integers(min_value=0, max_value=100)).map(
        lambda p: p[0](p[1])
    ),
)
not_counts = st.one_of(
    st.booleans(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(FLOAT_TYPES).map(lambda t: t(2.0)),
    st.text(max_size=5),
    st.decimals(allow_nan=True),
    st.none(),
    st.just([3]),
)
finite_reals = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.tuples(st.sampled_from(FLOAT_TYPES), st.floats(-1e3, 1e3, width=16)).map(
        lambda p: p[0](p[1])
    ),
    st.decimals(min_value=-1000, max_value=1000, allow_nan=False, allow_infinity=False),
    st.fractions(max_denominator=100),
    ints,
)
not_finite = st.sampled_from(
    [
        math.nan,
        math.inf,
        -math.inf,
        np.float32("nan"),
        np.float64("inf"),
        Decimal("NaN"),
        Decimal("sNaN"),
        Decimal("Infinity"),
        Decimal("1e400"),
        10**400,
    ]
)
not_reals = st.one_of(st.booleans(), st.text(max_size=5), st.none(), st.just(complex(1, 1)))


# -- counts -------------------------------------------------------------------------------------
@given(value=wholes)
def test_any_integral_number_is_a_count_as_a_plain_int(value: object) -> None:
    number = int(value)  # type: ignore[call-overload]
    if number < 1:
        with pytest.raises(ConfigurationError, match=r"budget must be positive, got -?\d+"):
            count(value, "budget")
        return
    got = count(value, "budget")
    assert type(got) is int and got == number
    assert Budget.coerce(value).window == number  # type: ignore[arg-type]
    assert Budget(window=value).window == number  # type: ignore[arg-type]


@given(value=not_counts)
def test_anything_else_is_refused_as_a_count_naming_it_and_where(value: object) -> None:
    with pytest.raises(ConfigurationError) as caught:
        count(value, "CtxBudgetRetriever: k", least=0)
    text = str(caught.value)
    assert text.startswith("CtxBudgetRetriever: k must be an int")
    assert type(value).__name__ in text
    with pytest.raises(InvalidBudgetError):
        Budget.coerce(value)  # type: ignore[arg-type]


def test_counts_are_bounded_and_huge_ones_are_not_printed_whole() -> None:
    assert count(MAX_COUNT, "budget") == MAX_COUNT
    with pytest.raises(ConfigurationError, match=r"at most 10\*\*100, got a huge int"):
        count(10**5000, "budget")  # printing it whole would raise ValueError (4,300 digits)
    with pytest.raises(InvalidBudgetError, match="at most 10"):
        Budget(window=10**101)


# -- reals --------------------------------------------------------------------------------------
@given(value=finite_reals)
def test_any_finite_real_is_a_score_and_a_weight(value: object) -> None:
    expected = float(value)  # type: ignore[arg-type]
    got = real(value, "score")
    assert type(got) is float and got == expected
    item = ContextItem("a", "text", score=value)  # type: ignore[arg-type]
    assert item.score == expected
    if expected >= 0:
        assert Scoring(recency_weight=value).recency_weight == expected  # type: ignore[arg-type]


@given(value=st.one_of(not_finite, not_reals))
def test_nan_infinities_and_non_numbers_are_refused_where_they_enter(value: object) -> None:
    with pytest.raises(InvalidItemError, match="ContextItem 'a': score must be a"):
        ContextItem("a", "text", score=value)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"Scoring\.recency_weight must be a"):
        Scoring(recency_weight=value)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"Scoring\.half_life_days must be a"):
        Scoring(half_life_days=value)  # type: ignore[arg-type]


def test_nan_scoring_weights_are_refused_at_construction() -> None:
    # Before: accepted everywhere, failing later as an error about some item's score.
    for name in ("recency_weight", "half_life_days", "relevance_weight", "lexical_weight"):
        with pytest.raises(ConfigurationError, match=f"Scoring.{name} must be a finite number"):
            Scoring(**{name: math.nan})  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="MemoryConfig.episode_gap must be a finite"):
        MemoryConfig(episode_gap=math.nan)
    with pytest.raises(ConfigurationError, match="MemoryConfig.semantic_k must be an int"):
        MemoryConfig(semantic_k=2.0)  # type: ignore[arg-type]
    config = MemoryConfig(semantic_k=np.int64(12), scoring=Scoring(recency_weight=np.float32(0.5)))
    assert type(config.semantic_k) is int and config.scoring.recency_weight == 0.5


def test_numpy_tiers_and_scores_make_items() -> None:
    # Before: ContextItem(tier=np.int64(45)) and score=np.float32(0.7) were refused.
    item = ContextItem("a", "text", tier=np.int64(45), score=np.float32(0.75))
    assert (type(item.tier), item.tier, type(item.score), item.score) == (int, 45, float, 0.75)
    for bad in (2.0, "3", True):
        with pytest.raises(InvalidItemError, match="tier must be an int"):
            ContextItem("a", "text", tier=bad)  # type: ignore[arg-type]


def test_every_refusal_of_a_budget_is_a_configuration_error() -> None:
    assert issubclass(InvalidBudgetError, ConfigurationError)
    with pytest.raises(ConfigurationError):
        Budget(window=0)


# -- model names --------------------------------------------------------------------------------
SERVED = {
    "ollama:llama3.1:8b": "ollama",
    "ollama/llama3.1:8b": "ollama",
    "OLLAMA_CHAT/llama3.1:8b": "ollama",
    "vllm:Qwen/Qwen2.5-7B-Instruct": "vllm",
    "hosted_vllm/Qwen/Qwen2.5-7B-Instruct": "vllm",
    "lmstudio:qwen2.5-7b-instruct": "lmstudio",
    "lm_studio/qwen2.5-7b-instruct": "lmstudio",
}


@pytest.mark.parametrize(("name", "server"), SERVED.items())
def test_a_served_name_has_no_window_without_one_given_or_asked(name: str, server: str) -> None:
    # Before: lmstudio: and vllm: names silently got the registry's window.
    assert parse_model_name(name).server == server
    with pytest.raises(InvalidBudgetError, match="base_url=") as caught:
        Budget.for_model(name)
    assert repr(name) in str(caught.value)
    assert Budget.for_model(name, window=8192).window == 8192


@given(prefix=st.sampled_from(["", "openai:", "openai/", "anthropic:"]), name=st.text(max_size=20))
def test_the_name_parser_never_fails_on_text_and_keeps_the_name(prefix: str, name: str) -> None:
    given_name = prefix + name
    if not given_name.strip():
        with pytest.raises(ConfigurationError):
            parse_model_name(given_name)
        return
    parsed = parse_model_name(given_name)
    assert parsed.server is None or parsed.name
    assert parsed.given == given_name.strip()


@pytest.mark.parametrize("name", [None, "", "   ", 5, "x" * 600])
def test_a_model_name_that_is_not_one_is_refused(name: object) -> None:
    with pytest.raises(ConfigurationError, match="--model"):
        parse_model_name(name, what="--model")


# -- the registry -------------------------------------------------------------------------------
def test_every_registry_entry_names_where_its_window_comes_from() -> None:
    for name in known_models():
        info = lookup_model(name)
        assert isinstance(info.source, str) and len(info.source) > 10, name


@pytest.mark.parametrize(
    ("name", "window"),
    [
        ("mistral-large-2402", 32_768),
        ("mistral-medium-2312", 32_768),
        ("mistral/mistral-large-2402", 32_768),
        ("gpt-3.5-turbo-instruct", 4_096),
        ("gpt-3.5-turbo-instruct-0914", 4_096),
        ("gpt-3.5-turbo-0613", 4_096),
        ("mistral-large-2411", 131_072),
        ("mistral-large-latest", 131_072),
        ("gpt-3.5-turbo-0125", 16_385),
    ],
)
def test_dated_snapshots_get_the_window_they_served(name: str, window: int) -> None:
    # Before: matched by prefix, mistral-large-2402 got 131,072 and gpt-3.5-turbo-instruct 16,385.
    assert lookup_model(name).context_window == window
    assert Budget.for_model(name).window == window


def test_unknown_models_stay_unknown_errors() -> None:
    with pytest.raises(UnknownModelError):
        Budget.for_model("my-local-llama")
    assert Budget.for_model("my-local-llama", window=np.int64(2048)).window == 2048
    assert issubclass(UnknownModelError, CtxBudgetError)


@given(value=st.one_of(not_counts.filter(lambda v: v is not None), wholes, st.decimals()))
def test_budget_for_model_window_is_the_count_boundary(value: object) -> None:
    # (window=None means "the registry's": the one value not taken as a window.)
    try:
        expected: int | None = count(value, "window")
    except ConfigurationError:
        expected = None
    if expected is None:
        with pytest.raises(InvalidBudgetError):
            Budget.for_model("gpt-4o", window=value)  # type: ignore[arg-type]
        return
    try:
        budget = Budget.for_model("gpt-4o", window=value)  # type: ignore[arg-type]
    except InvalidBudgetError:
        return  # a window too small for the default reserve
    assert budget.window == expected


def test_decimal_and_fraction_scores_are_numbers_too() -> None:
    assert ContextItem("a", "t", score=Decimal("0.5")).score == 0.5  # type: ignore[arg-type]
    assert ContextItem("a", "t", score=Fraction(1, 4)).score == 0.25  # type: ignore[arg-type]


@pytest.mark.parametrize("share", [np.int64(300), np.int32(0), np.float32(0.5), np.float64(1.0)])
def test_budget_floors_and_caps_take_numpy_numbers(share: object) -> None:
    budget = Budget(window=8000, reserve=100, floors={np.int64(40): share}, caps={40: share})
    assert type(budget.floors[40]) in (int, float) and type(budget.caps[40]) in (int, float)


@pytest.mark.parametrize("share", [float("nan"), float("inf"), True, "300", np.float64("nan")])
def test_budget_floors_refuse_what_is_not_a_share(share: object) -> None:
    with pytest.raises(ConfigurationError, match=r"Budget\.floors\[RECENT\]"):
        Budget(window=8000, floors={40: share})


# -- items: the quick path for plain fields agrees with the full checks -------------------------
item_fields = st.fixed_dictionaries(
    {},
    optional={
        "id": st.one_of(st.just(""), st.just("m1"), st.none(), st.integers(0, 3)),
        "text": st.one_of(st.text(max_size=3), st.none(), st.just(b"x")),
        "tier": st.one_of(st.sampled_from(list(Tier)), ints, not_counts, wholes),
        "score": st.one_of(finite_reals, not_finite, not_reals),
        "timestamp": st.one_of(st.none(), finite_reals, not_finite, st.booleans()),
        "role": st.one_of(st.none(), st.sampled_from(["user", "assistant", "x", ""]), ints),
        "tokens": st.one_of(st.none(), ints, st.just(2.0), st.booleans()),
        "shrink": st.one_of(st.sampled_from(list(Shrink)), st.sampled_from(["drop", "never", 3])),
        "source": st.one_of(st.none(), st.text(max_size=2), ints),
        "name": st.one_of(st.none(), st.text(max_size=2), ints),
        "summary_of": st.one_of(
            st.tuples(), st.lists(st.text(max_size=2), max_size=2), st.just(("a", 1)), st.just("ab")
        ),
        "tool_calls": st.one_of(st.tuples(), st.tuples(st.text(max_size=2)), st.just([1])),
        "metadata": st.one_of(st.just({}), st.just({"k": 1}), st.just([1]), st.none()),
        "record_id": st.one_of(st.none(), st.just("r1"), ints),
        "scope": st.one_of(
            st.none(),
            st.tuples(st.sampled_from(["session", "user", "collection", "x"]), st.just("s")),
            st.just(["session", "s"]),
            st.just(("session",)),
        ),
    },
)


def _made(fields: dict[str, object]) -> object:
    given = {"id": "m1", "text": "t", **fields}
    try:
        item = ContextItem(**given)  # type: ignore[arg-type]
    except InvalidItemError as exc:
        return ("refused", str(exc))
    values = {f.name: getattr(item, f.name) for f in dataclasses.fields(item)}
    return ("made", {name: (type(v), repr(v)) for name, v in values.items()})


@given(fields=item_fields)
def test_the_quick_path_for_plain_items_agrees_with_the_full_checks(
    fields: dict[str, object],
) -> None:
    quick = _made(fields)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(items_module, "is_plain", lambda item: False)
        full = _made(fields)
    assert quick == full


STORED_FIELDS: dict[str, object] = {
    "id": "m1",
    "text": "t",
    "tier": Tier.RETRIEVED,
    "score": 1.0,
    "role": None,
    "timestamp": None,
    "summary_of": (),
    "source": None,
    "name": None,
    "record_id": None,
    "scope": None,
}
"""`stored_item`'s fields, plain (a row of `stored_items` in this order)."""


@given(fields=item_fields)
def test_an_item_built_at_search_speed_is_the_item_the_constructor_builds(
    fields: dict[str, object],
) -> None:
    # `stored_item` (retrieval's hundreds of items a call) sets the slots itself: for every
    # class of values, the same fields, types and reprs as `ContextItem(...)`, or its error.
    given_ = dict(STORED_FIELDS)
    given_.update((k, v) for k, v in fields.items() if k in given_)
    try:
        item = stored_item(**given_)  # type: ignore[arg-type]
    except InvalidItemError as exc:
        made: object = ("refused", str(exc))
    else:
        values = {f.name: getattr(item, f.name) for f in dataclasses.fields(item)}
        made = ("made", {name: (type(v), repr(v)) for name, v in values.items()})
    assert made == _made(given_)


@given(rows=st.lists(item_fields, min_size=1, max_size=4))
def test_items_built_in_one_loop_are_the_items_the_constructor_builds(
    rows: list[dict[str, object]],
) -> None:
    # `stored_items` sets a plain row's slots in its loop and sends any other row through
    # `stored_item`: each row, in order, the constructor's item or its error.
    base = STORED_FIELDS
    given_ = [{**base, **{k: v for k, v in row.items() if k in base}} for row in rows]
    expected = [_made(fields) for fields in given_]
    made: list[object] = []
    for fields in given_:  # one row at a time: a refused row refuses its whole call
        try:
            (item,) = stored_items([tuple(fields.values())])  # type: ignore[list-item]
        except InvalidItemError as exc:
            made.append(("refused", str(exc)))
            continue
        made.append(("made", _fields_of(item)))
    assert made == expected
    if all(m[0] == "made" for m in expected):  # and all at once, in order
        together = stored_items([tuple(f.values()) for f in given_])  # type: ignore[misc]
        assert [_fields_of(i) for i in together] == [m[1] for m in expected]


def _fields_of(item: ContextItem) -> dict[str, tuple[type, str]]:
    values = {f.name: getattr(item, f.name) for f in dataclasses.fields(item)}
    return {name: (type(v), repr(v)) for name, v in values.items()}


# -- ContextMemory's arguments: one class of bad values, one kind of refusal ------------------
HOSTILE: dict[str, object] = {
    "bool": True,
    "numeric text": "7",
    "nan": math.nan,
    "inf": math.inf,
    "-inf": -math.inf,
    "numpy int": np.int64(64),
    "numpy float": np.float64(2.5),
    "5,000 digits": 10**5000,
    "lone surrogate": "a\ud800b",
    "nested 10,000 deep": nested(),
}
COUNT_OK = {"numpy int"}  # what a count takes of HOSTILE
REAL_OK = {"numpy int", "numpy float"}  # what a timestamp takes
TEXT_OK = {"numeric text"}  # what a text takes
FLAG_OK = {"bool"}  # what an on/off setting takes
NAMES_OK = {"bool", "numeric text"}  # documents=, collections=: True, or a collection's name


@pytest.fixture(scope="module")
def swept(
    tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder
) -> Iterator[ContextMemory]:
    store = ChromaStore(tmp_path_factory.mktemp("sweep"), embedder=embedder)
    with ContextMemory(store=store, write_behind=False) as memory:
        memory.add_message("s1", "user", "I moved to Porto in May.", id="m1", user_id="u1")
        memory.add_documents([{"id": "d1", "text": "Porto is in the north of Portugal."}])
        yield memory


def _assemble(**given: object) -> Callable[[ContextMemory], object]:
    return lambda m: m.assemble(**{"session_id": "s1", "query": "Where?", **given})  # type: ignore[arg-type]


def _candidates(**given: object) -> Callable[[ContextMemory], object]:
    return lambda m: m.candidates(**{"session_id": "s1", "query": "Where?", **given})  # type: ignore[arg-type]


def _search(**given: object) -> Callable[[ContextMemory], object]:
    return lambda m: m.search(**{"query": "Porto", "session_id": "s1", **given})  # type: ignore[arg-type]


def _message(**given: object) -> Callable[[ContextMemory], object]:
    fields = {"session_id": "s2", "role": "user", "text": "Hello there", **given}
    return lambda m: m.add_message(**fields)  # type: ignore[arg-type]


def _messages(**given: object) -> Callable[[ContextMemory], object]:
    fields = {"session_id": "s2", "messages": [("user", "Hello again")], **given}
    return lambda m: m.add_messages(**fields)  # type: ignore[arg-type]


def _pin(**given: object) -> Callable[[ContextMemory], object]:
    return lambda m: m.pin(**{"session_id": "s3", "text": "Likes tea.", **given})  # type: ignore[arg-type]


def _documents(**given: object) -> Callable[[ContextMemory], object]:
    fields = {"documents": ["Lisbon is by the sea."], **given}  # an id from what it holds
    return lambda m: m.add_documents(**fields)  # type: ignore[arg-type]


# (where, argument, what it takes of HOSTILE, the call with that argument set)
ARGUMENTS: list[tuple[str, str, set[str], Callable[..., Callable[[ContextMemory], object]]]] = [
    *[
        ("assemble", arg, ok, _assemble)
        for arg, ok in [
            ("session_id", TEXT_OK),
            ("query", TEXT_OK),
            ("budget", COUNT_OK),
            ("model", set()),
            ("system", TEXT_OK),
            ("user_id", TEXT_OK),
            ("format", set()),
            ("tools", set()),
            ("documents", NAMES_OK),
            ("other_sessions", FLAG_OK),
            ("extra", set()),
            ("strategy", set()),
        ]
    ],
    *[
        ("candidates", arg, ok, _candidates)
        for arg, ok in [
            ("session_id", TEXT_OK),
            ("query", TEXT_OK),
            ("budget", COUNT_OK),
            ("user_id", TEXT_OK),
            ("documents", NAMES_OK),
            ("search_recent", FLAG_OK),
            ("wait", FLAG_OK),
        ]
    ],
    *[
        ("search", arg, ok, _search)
        for arg, ok in [
            ("query", TEXT_OK),
            ("k", COUNT_OK),
            ("kinds", set()),
            ("session_id", TEXT_OK),
            ("user_id", TEXT_OK),
            ("collections", NAMES_OK),
            ("vector", set()),
            ("strategy", set()),
        ]
    ],
    *[
        ("add_message", arg, ok, _message)
        for arg, ok in [
            ("session_id", TEXT_OK),
            ("role", set()),
            ("text", TEXT_OK),
            ("id", TEXT_OK),
            ("user_id", TEXT_OK),
            ("timestamp", REAL_OK),
            ("metadata", set()),
            ("name", TEXT_OK),
            ("tool_calls", set()),
            ("tool_call_id", TEXT_OK),
        ]
    ],
    *[
        ("add_messages", arg, ok, _messages)
        for arg, ok in [
            ("session_id", TEXT_OK),
            ("messages", set()),
            ("user_id", TEXT_OK),
            ("progress", FLAG_OK),
            ("batch_size", COUNT_OK),
        ]
    ],
    *[
        ("pin", arg, ok, _pin)
        for arg, ok in [
            ("session_id", TEXT_OK),
            ("text", TEXT_OK),
            ("user_id", TEXT_OK),
            ("id", TEXT_OK),
            ("metadata", set()),
        ]
    ],
    *[
        ("add_documents", arg, ok, _documents)
        for arg, ok in [
            ("documents", set()),
            ("collection", TEXT_OK),
            ("chunk_tokens", COUNT_OK),
            ("overlap", COUNT_OK),
            ("source", TEXT_OK),
            ("progress", FLAG_OK),
        ]
    ],
]


@pytest.mark.parametrize(
    ("where", "argument", "takes", "call"),
    ARGUMENTS,
    ids=[f"{where}-{argument}" for where, argument, _, _ in ARGUMENTS],
)
@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(kind=st.sampled_from(sorted(HOSTILE)))
def test_each_argument_takes_or_refuses_each_kind_of_value_naming_it(
    swept: ContextMemory,
    where: str,
    argument: str,
    takes: set[str],
    call: Callable[..., Callable[[ContextMemory], object]],
    kind: str,
) -> None:
    run = call(**{argument: HOSTILE[kind]})
    if kind in takes:
        run(swept)
        return
    with pytest.raises(CtxBudgetError) as refused:
        run(swept)
    message = str(refused.value)
    named = {
        "messages": ["message"],
        "documents": ["document"],
        "tools": ["tool"],
        "tool_calls": ["tool_calls", "tool call"],
    }
    names = named.get(argument, [argument, argument.replace("_", " ")])
    assert any(name in message for name in names), (where, argument, kind, message[:300])
    assert len(message) < 1_000
