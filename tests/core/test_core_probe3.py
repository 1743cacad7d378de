"""The core on input it once took at its word, each a regression test of a bug found by probing.

- ``ContextItem(tokens=True)`` was taken as a 1-token hint, ``tokens=np.int64(3)`` refused;
  numpy timestamps were refused while numpy scores and tiers were taken.
- Embeddings holding NaN, an infinity or an int no float holds made numpy warn (an error
  under ``-W error``) or raised an OverflowError from the duplicate check.
- A summarizer that returned None (or was not one) failed with an AttributeError.
- ``ctxbudget.tokens``: a negative ``per_message`` was taken (counts below what is sent) and
  numpy's ints refused; an image of 10**400 px raised an OverflowError, and one scaled to a
  sliver cost no tile at all.
- ``ctx.explain(width=2.5)`` or ``show_pruned=None`` were TypeErrors; ``width=10**6`` drew a bar
  of a million characters, ``show_pruned=-1`` listed all pruned items but one.
- A name or text the tokenizer refuses (a lone surrogate) was said as "message 0:
  text holds ...", naming neither the item nor the field.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxbudget import (
    ConfigurationError,
    ConfigurationTypeError,
    ContextAssembler,
    ContextItem,
    InvalidItemError,
    Tier,
    TokenCounter,
)
from ctxbudget.tokens.images import IMAGE_TOKENS_MAX, image_tokens

COUNTER = TokenCounter.from_encoding("o200k_base")
R = Tier.RECENT
SETTINGS = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# -- numbers where the core takes numbers ----------------------------------------------------


def test_a_token_hint_is_a_count_bool_refused_numpy_taken() -> None:
    with pytest.raises(InvalidItemError, match=r"'a': tokens must be an int .* got True \(bool\)"):
        ContextItem("a", "three tokens here", tokens=True)
    item = ContextItem("a", "three tokens here", tokens=np.int64(3))
    assert item.tokens == 3 and type(item.tokens) is int
    with pytest.raises(InvalidItemError, match="'a': tokens must be 0 or more"):
        ContextItem("a", "x", tokens=np.int64(-1))


@pytest.mark.parametrize("stamp", [np.int64(1_700_000_000), np.float32(1.7e9), np.int32(0)])
def test_numpy_timestamps_are_the_floats_they_hold(stamp: Any) -> None:
    item = ContextItem("a", "x", timestamp=stamp)
    assert item.timestamp == float(stamp) and type(item.timestamp) is float
    ctx = ContextAssembler(COUNTER).assemble([item], budget=100, format="compact")
    assert ctx.included_ids == ["a"]


@pytest.mark.parametrize(
    "vector",
    [[float("nan"), 1.0], [float("inf"), 1.0], [10**400, 1], [], [0.0, 0.0]],
    ids=["nan", "inf", "huge-int", "empty", "zero"],
)
def test_embeddings_that_cannot_be_compared_are_compared_by_content_only(vector: Any) -> None:
    items = [
        ContextItem("q", "question", tier=Tier.QUERY),
        ContextItem("a", "one fact", embedding=vector),
        ContextItem("b", "another fact", embedding=vector),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ctx = ContextAssembler(COUNTER).assemble(items, budget=200)
    assert sorted(ctx.included_ids) == ["a", "b", "q"]
    assert ctx.pruned == []


def test_huge_equal_embeddings_are_still_duplicates() -> None:
    items = [
        ContextItem("a", "one fact", embedding=[1e300, 1e300]),
        ContextItem("b", "another fact", embedding=[1e300, 1e300]),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ctx = ContextAssembler(COUNTER).assemble(items, budget=200)
    assert ctx.included_ids == ["a"]
    assert [p.item.id for p in ctx.pruned] == ["b"]


# -- text the tokenizer refuses, said where it is ---------------------------------------------


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"name": "An\ud800a"}, "name holds a lone surrogate U+D800 at index 2"),
        ({"text": "ok \udc80"}, "text holds a lone surrogate U+DC80 at index 3"),
    ],
    ids=["name", "text"],
)
def test_a_lone_surrogate_is_said_with_the_item_and_its_field(
    fields: dict[str, Any], said: str
) -> None:
    options: dict[str, Any] = {"text": "hello", "role": "user", **fields}
    items = [
        ContextItem("u0", "before", tier=R, role="user"),
        ContextItem("m7", tier=R, **options),
        ContextItem("q", "question", tier=Tier.QUERY),
    ]
    with pytest.raises(InvalidItemError) as raised:
        ContextAssembler(COUNTER).assemble(items, budget=500)
    assert str(raised.value).startswith(f"ContextItem 'm7': {said}"), raised.value


# -- a summarizer that is not one, or returns what is not text --------------------------------


class Returns:
    def __init__(self, made: object) -> None:
        self.made = made

    def summarize(self, texts: Any, max_tokens: int) -> Any:
        return self.made


SUMMARIZABLE = [
    ContextItem("q", "question", tier=Tier.QUERY),
    *[
        ContextItem(
            f"r{i}", f"A long passage number {i} about Lisbon food. " * 5, shrink="summarize"
        )
        for i in range(6)
    ],
]


@pytest.mark.parametrize("made", [None, 5, b"text"], ids=["None", "int", "bytes"])
def test_a_summary_that_is_not_text_is_a_configuration_type_error(made: object) -> None:
    # Before: AttributeError: 'NoneType' object has no attribute 'strip'.
    assembler = ContextAssembler(COUNTER, summarizer=Returns(made))  # type: ignore[arg-type]
    with pytest.raises(ConfigurationTypeError, match=r"Returns.summarize returned \w+, not a str"):
        assembler.assemble(SUMMARIZABLE, budget=120)


def test_a_summary_with_a_lone_surrogate_names_the_summarizer() -> None:
    assembler = ContextAssembler(COUNTER, summarizer=Returns("ok \ud800"))
    with pytest.raises(InvalidItemError, match="the summary Returns.summarize made holds a lone"):
        assembler.assemble(SUMMARIZABLE, budget=120)


@pytest.mark.parametrize("given", ["extractive", len], ids=["a-str", "a-function"])
def test_a_summarizer_without_summarize_is_refused_when_given(given: object) -> None:
    # Before: accepted, then AttributeError at the first assembly that needed a summary.
    with pytest.raises(ConfigurationTypeError, match="summarizer must have a summarize"):
        ContextAssembler(COUNTER, summarizer=given)  # type: ignore[arg-type]


# -- ctxbudget.tokens ------------------------------------------------------------------------


def test_message_overheads_are_counts_negative_refused_numpy_taken() -> None:
    # Before: per_message=-100 was taken (a message then counted -95 tokens: less than sent),
    # and np.int64(3) refused.
    with pytest.raises(InvalidItemError, match="per_message must be 0 or more, got -100"):
        TokenCounter.from_encoding("o200k_base", per_message=-100)
    with pytest.raises(InvalidItemError, match="reply_priming must be an int"):
        TokenCounter.from_encoding("o200k_base", reply_priming=True)
    counter = TokenCounter.from_encoding("o200k_base", per_message=np.int64(3))
    assert counter.count_messages([{"role": "user", "content": "x"}]) == COUNTER.count_messages(
        [{"role": "user", "content": "x"}]
    )


def test_an_image_of_any_size_costs_at_least_a_tile_and_never_overflows() -> None:
    # Before: 10**400 px was an OverflowError; a sliver (10**12 x 1 px) cost 85, no tile at all.
    assert image_tokens(2 * 10**400, 10**400) == image_tokens(2000, 1000) == 1105
    assert image_tokens(10**12, 1) == image_tokens(10**400, 10) == 765  # 4 tiles by 1
    part = {"type": "image_url", "image_url": {"url": "https://x/y.png"}, "width": 10**400}
    assert COUNTER.count_message("user", [{**part, "height": 5}]) > 765


@SETTINGS
@given(
    width=st.integers(1, 10**500) | st.integers(1, 5000),
    height=st.integers(1, 10**500) | st.integers(1, 5000),
)
def test_any_image_size_costs_between_one_tile_and_the_most_an_image_can(
    width: int, height: int
) -> None:
    assert 85 + 170 <= image_tokens(width, height, detail="high") <= IMAGE_TOKENS_MAX


@SETTINGS
@given(value=st.integers(-3, 10**6), kind=st.sampled_from([np.int64, np.int32, np.uint32, int]))
def test_a_token_hint_of_any_integral_type_is_the_int_it_holds(value: int, kind: Any) -> None:
    if value < 0 and kind is np.uint32:
        return
    given_hint = kind(value)
    if value < 0:
        with pytest.raises(InvalidItemError, match="tokens must be 0 or more"):
            ContextItem("a", "x", tokens=given_hint)
        return
    assert ContextItem("a", "x", tokens=given_hint).tokens == value


def test_a_lone_surrogate_in_a_messages_name_is_said_as_the_names() -> None:
    with pytest.raises(InvalidItemError, match=r"^message 1: name holds a lone surrogate U\+DC00"):
        COUNTER.count_messages(
            [{"role": "user", "content": "hi"}, {"role": "user", "content": "x", "name": "\udc00"}]
        )


# -- the report -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"width": 2.5}, r"explain\(width=\) must be an int"),
        ({"width": None}, r"explain\(width=\) must be an int"),
        ({"width": 0}, r"explain\(width=\) must be positive"),
        ({"width": 10**6}, r"explain\(width=\) must be at most 1,000"),
        ({"show_pruned": -1}, r"explain\(show_pruned=\) must be 0 or more"),
        ({"show_pruned": True}, r"explain\(show_pruned=\) must be an int"),
    ],
)
def test_explain_options_are_checked(options: dict[str, Any], said: str) -> None:
    # Before: TypeErrors from slicing, a bar of a million characters, -1 listing all but one.
    items = [
        ContextItem("q", "q", tier=Tier.QUERY),
        *[ContextItem(f"r{i}", "x " * 40) for i in range(5)],
    ]
    ctx = ContextAssembler(COUNTER).assemble(items, budget=60)
    with pytest.raises(ConfigurationError, match=said):
        ctx.explain(**options)
    assert ctx.explain(width=np.int64(20), show_pruned=np.int64(1)).count("\n") > 3
