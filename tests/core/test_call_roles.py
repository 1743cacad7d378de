"""Only an assistant turn calls tools: no door sends calls in a user, tool or system turn.

Providers refuse tool calls anywhere else (tests/conformance/conversation.py). The core's item
refuses them, the memory refuses to store them, and a turn stored before that rule is sent
without them (its calls were never valid); a model's arguments holding numpy's numbers are
written as JSON's.

Arguments are strict JSON, as providers read them: NaN or an infinity given in a mapping is
refused, and text holding a bare ``NaN``, ``Infinity`` or ``-Infinity`` (or ``1e999``) is not a
JSON object, kept as the model produced it like any malformed arguments: `parse_arguments`
never returns NaN or an infinity (until 2026-12-02 it did, and the LangChain adapter, which
refuses them, refused a history read back from such a record).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget import ContextAssembler, ContextItem, ContextMemory, TokenCounter
from ctxbudget.core.items import Tier
from ctxbudget.core.toolcalls import (
    canonical_arguments,
    normalize_tool_calls,
    parse_arguments,
    tool_call,
)
from ctxbudget.errors import InvalidItemError, StoreInputError
from ctxbudget.memory.reading.record_items import history_item
from ctxbudget.store.records import Record

CALL = {"id": "c1", "name": "lookup", "args": {"topic": "x"}}


@pytest.mark.parametrize("role", ["user", "tool", "system"])
def test_an_item_of_another_role_with_calls_is_refused(role: str) -> None:
    with pytest.raises(InvalidItemError, match=f"only an assistant item calls tools.*{role}"):
        ContextItem("m1", "hi", tier=Tier.RECENT, role=role, tool_calls=["c1"])


def test_an_assistant_item_and_an_item_without_role_keep_their_calls() -> None:
    assert ContextItem("a", "", role="assistant", tool_calls=["c1"]).tool_calls == ("c1",)
    assert ContextItem("b", "x", tool_calls=["c1"]).tool_calls == ("c1",)


@pytest.mark.parametrize("role", ["user", "tool", "system"])
def test_the_memory_refuses_to_store_calls_in_another_turn(tmp_path: Path, role: str) -> None:
    memory = ContextMemory(tmp_path / "mem", write_behind=False)
    try:
        memory.add_message("s1", "user", "first", id="m0")
        with pytest.raises(StoreInputError, match=f"only an assistant message.*{role} message"):
            memory.add_message("s1", role, "hi", id="m1", tool_calls=[CALL])
        assert [r.id for r in memory.history("s1")] == ["m0"]  # nothing else was written
    finally:
        memory.close()


def test_a_user_turn_stored_with_calls_before_the_rule_is_sent_without_them() -> None:
    record = Record(
        id="m1", kind="message", text="hi", role="user", session_id="s1", seq=0,
        tool_calls=("c1",),
    )  # fmt: skip
    item = history_item(record)
    assert item.tool_calls == () and "tool_calls" not in item.metadata
    counter = TokenCounter.for_model("gpt-4o")
    query = ContextItem("q", "and now?", tier=Tier.QUERY, role="user")
    sent = ContextAssembler(counter).assemble([item, query], budget=500).to_messages()
    assert sent == [{"role": "user", "content": "hi"}, {"role": "user", "content": "and now?"}]


@pytest.mark.parametrize(
    "value",
    [float("nan"), float("inf"), -float("inf"), np.float32("nan"), np.float64("inf"),
     [1.0, float("nan")], {"deep": {"deeper": np.array([np.nan])}}],
    ids=["nan", "inf", "-inf", "np32-nan", "np64-inf", "in-a-list", "nested-array"],
)  # fmt: skip
def test_nan_or_infinity_in_arguments_is_refused_naming_the_call(value: object) -> None:
    # JSON has no NaN: json.dumps wrote a bare NaN, which a provider's JSON parser refuses.
    calls = [{"id": "c1", "name": "f", "args": {"x": value}}]
    with pytest.raises(InvalidItemError, match=r"message 3, tool call 0 \(id 'c1'\): .*NaN or"):
        normalize_tool_calls(calls, "message 3")
    # The text a model produced stays as it is (an invalid call is the model's own).
    raw = [{"id": "c1", "function": {"name": "f", "arguments": '{"x": NaN}'}}]
    assert normalize_tool_calls(raw, "m")[0]["function"]["arguments"] == '{"x": NaN}'


def test_numpy_numbers_in_arguments_are_written_as_json() -> None:
    call = tool_call("c1", "f", {"a": np.float32(1.5), "b": np.arange(2), "c": np.int64(3)})
    assert call["function"]["arguments"] == '{"a": 1.5, "b": [0, 1], "c": 3}'
    with pytest.raises(InvalidItemError, match="cannot be written as JSON"):
        tool_call("c1", "f", {"a": object()})


NOT_JSON_NUMBERS = ["NaN", "Infinity", "-Infinity", "1e999", "-1E400"]


@pytest.mark.parametrize("token", NOT_JSON_NUMBERS)
def test_arguments_text_holding_nan_or_infinity_is_kept_but_is_not_json(token: str) -> None:
    text = f'{{"q": "lisbon", "x": {token}}}'
    given = [{"id": "c1", "function": {"name": "f", "arguments": text}}]
    assert normalize_tool_calls(given, "m")[0]["function"]["arguments"] == text  # as produced
    assert tool_call("c1", "f", text)["function"]["arguments"] == text
    assert parse_arguments(text) is None  # as for '{"q": ' (was {'q': 'lisbon', 'x': nan})
    assert parse_arguments(f'{{"x": [1, {{"y": {token}}}]}}') is None  # nested too
    assert canonical_arguments(text) == text  # shown as the text it is, not re-encoded
    assert parse_arguments(f'{{"x": "{token}"}}') == {"x": token}  # a string is JSON
    assert parse_arguments('{"x": 1e308, "y": -0.5}') == {"x": 1e308, "y": -0.5}


def test_arguments_text_nested_too_deep_is_not_json_and_raises_nothing() -> None:
    for text in ("[" * 100_000, '{"a": ' * 100_000, "[" * 100_000 + "]" * 100_000):
        assert parse_arguments(text) is None  # was a RecursionError


def finite(value: object) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(finite(v) for v in value.values())
    if isinstance(value, list):
        return all(finite(v) for v in value)
    return True


floats = st.floats() | st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -0.0])
values = st.recursive(
    floats | st.integers() | st.text("ab", max_size=2),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text("xy", max_size=2), inner),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None)
@given(args=st.dictionaries(st.text("abc", min_size=1, max_size=3), values, max_size=3))
def test_float_arguments_given_as_a_mapping_or_as_text_agree(args: dict[str, object]) -> None:
    # Python's json writes NaN and the infinities bare: the text a careless writer produces.
    text = json.dumps(args)
    parsed = parse_arguments(text)
    assert tool_call("c1", "f", text)["function"]["arguments"] == text  # text: always kept
    if finite(args):
        assert parsed == args
        assert parse_arguments(tool_call("c1", "f", args)["function"]["arguments"]) == args
    else:
        assert parsed is None  # not JSON, as a provider reads it: an invalid call
        with pytest.raises(InvalidItemError, match=r"tool call 'f' hold NaN or infinity.*null"):
            tool_call("c1", "f", args)
    if parsed is not None:  # what every adapter accepts: its check is exactly this
        assert finite(parsed)
        json.dumps(parsed, allow_nan=False)
