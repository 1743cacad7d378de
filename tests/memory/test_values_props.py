"""Properties of keyed values: JSON round trip, filters, namespace matches and index paths.

The references for filters, namespace conditions and index paths are LangGraph's own (its
``InMemoryStore`` helpers): the core must answer as they do without importing LangGraph.
"""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.base import MatchCondition
from langgraph.store.base.embed import get_text_at_path
from langgraph.store.memory import _compare_values, _does_match

from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.memory import ContextMemory
from ctxbudget.memory.values.matching import namespace_matches, passes
from ctxbudget.memory.values.model import texts_at

PROPS = settings(max_examples=300, deadline=None, derandomize=True)
STORED = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

text = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | text
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=12,
)
objects = st.dictionaries(text, json_values, max_size=5)


@pytest.fixture(scope="module")
def shared_mem(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder) -> Iterator[Any]:
    folder = Path(tmp_path_factory.mktemp("values-props"))
    memory = ContextMemory(path=folder, embedder=embedder, write_behind=False, inclusion_log=False)
    yield memory
    memory.close()
    shutil.rmtree(folder, ignore_errors=True)


_keys = itertools.count()


def _same_json(a: Any, b: Any) -> bool:
    # Equal and of the same JSON types all the way down (1 is not 1.0, True is not 1).
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same_json(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


@STORED
@given(value=objects, indexed=st.booleans())
def test_json_values_round_trip_exactly(
    shared_mem: ContextMemory, value: Any, indexed: bool
) -> None:
    key = f"k{next(_keys)}"
    put = shared_mem.put_value(("rt", "ü"), key, value, index=None if indexed else False)
    got = shared_mem.get_value(("rt", "ü"), key)
    assert got is not None
    assert _same_json(got.value, value) and _same_json(put.value, value)
    assert got.created_at == put.created_at and got.updated_at == put.updated_at


filter_scalars = st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(["a", "b"])
filter_values = st.recursive(
    filter_scalars,
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.sampled_from("xy"), inner, max_size=2)
    ),
    max_leaves=5,
)
operators = st.dictionaries(
    st.sampled_from(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte"]),
    st.integers(-3, 3) | st.floats(-3, 3, allow_nan=False),
    min_size=1,
    max_size=2,
)
numbers = st.integers(-3, 3) | st.floats(-3, 3, allow_nan=False)


@PROPS
@given(
    value=st.dictionaries(st.sampled_from("abc"), filter_values, max_size=3),
    wanted=st.dictionaries(st.sampled_from("abc"), filter_values, max_size=2),
)
def test_equality_filters_answer_as_langgraph(
    value: dict[str, Any], wanted: dict[str, Any]
) -> None:
    reference = all(_compare_values(value.get(k), v) for k, v in wanted.items())
    assert passes(value, wanted) == reference


@PROPS
@given(
    value=st.dictionaries(st.sampled_from("ab"), numbers, max_size=2),
    wanted=st.dictionaries(st.sampled_from("ab"), operators, max_size=2),
)
def test_operator_filters_answer_as_langgraph(
    value: dict[str, Any], wanted: dict[str, Any]
) -> None:
    present = {k: v for k, v in wanted.items() if k in value}  # LangGraph raises on a missing one
    reference = all(_compare_values(value.get(k), v) for k, v in present.items())
    assert passes(value, present) == reference


labels = st.sampled_from(["a", "b", "c"])
spaces = st.lists(labels, min_size=1, max_size=4).map(tuple)
conditions = st.lists(labels | st.just("*"), max_size=3).map(tuple)


@PROPS
@given(space=spaces, prefix=conditions, suffix=conditions)
def test_namespace_conditions_answer_as_langgraph(
    space: tuple[str, ...], prefix: tuple[str, ...], suffix: tuple[str, ...]
) -> None:
    reference = _does_match(MatchCondition("prefix", prefix), space) and _does_match(
        MatchCondition("suffix", suffix), space
    )
    assert namespace_matches(space, prefix=prefix, suffix=suffix) == reference


paths = st.lists(
    st.sampled_from(["a", "b", "x", "[0]", "[-1]", "[*]", "*", "{a,b}", "{x, a.b}"]),
    min_size=1,
    max_size=3,
).map(lambda parts: ".".join(parts).replace(".[", "["))


@PROPS
@given(value=st.dictionaries(st.sampled_from("abx"), json_values, max_size=3), path=paths)
def test_index_paths_find_langgraphs_texts(value: dict[str, Any], path: str) -> None:
    assert texts_at(value, path) == get_text_at_path(value, path)
