"""Scores at once (`Scoring.combine_many`, `record_scores`) equal one by one, bit for bit.

`retrieve` scores the session's matches together; documents, other sessions and the rest of the
code score one record at a time. A candidate's score must not depend on which path took it:
the ranking, packing's ties and LoCoMo's figures rest on the exact floats.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget.memory.policy.scoring import Scoring
from ctxbudget.memory.reading.lexical import record_score, record_scores
from ctxbudget.store.records import Record

_ANY = st.floats(allow_nan=True, allow_infinity=True)
_WEIGHT = st.one_of(st.sampled_from([0.0, 0.2, 1.0, 2.0, 3.0]), st.floats(0.0, 8.0))
_SCORING = st.builds(
    Scoring,
    relevance_weight=_WEIGHT,
    recency_weight=_WEIGHT,
    salience_weight=_WEIGHT,
    half_life_days=st.one_of(st.just(365.0), st.floats(1e-3, 1e4)),
)


def _bits(value: float) -> bytes:
    return struct.pack("<d", value)


def _one_by_one(scoring: Scoring, rows: list[tuple[float, float, float]]) -> Any:
    try:
        return [scoring.combine(relevance=r, age_seconds=a, salience=s) for r, a, s in rows]
    except ArithmeticError as exc:
        return type(exc)


def _at_once(scoring: Scoring, rows: list[tuple[float, float, float]]) -> Any:
    try:
        return scoring.combine_many(
            [r for r, _, _ in rows], [a for _, a, _ in rows], [s for _, _, s in rows]
        )
    except ArithmeticError as exc:
        return type(exc)


@settings(max_examples=300, deadline=None)
@given(
    scoring=_SCORING,
    rows=st.lists(
        st.tuples(
            st.one_of(_ANY, st.floats(0.0, 1.0)),
            st.one_of(_ANY, st.floats(0.0, 1e9)),
            st.one_of(_ANY, st.floats(0.0, 3.0)),
        ),
        max_size=30,
    ),
)
def test_combine_many_is_combine_of_each(scoring: Scoring, rows: list[tuple[float, ...]]) -> None:
    one = _one_by_one(scoring, rows)  # type: ignore[arg-type]
    many = _at_once(scoring, rows)  # type: ignore[arg-type]
    if isinstance(one, type):
        assert many is one  # the same error (a power that overflows)
        return
    assert not isinstance(many, type)
    assert all(type(v) is float for v in many)
    assert [_bits(v) for v in many] == [_bits(v) for v in one]


_SALIENCE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=3),
    st.just(np.float64(0.5)),
)


@st.composite
def _records(draw: st.DrawFn) -> Record:
    metadata: dict[str, Any] = {}
    salience = draw(_SALIENCE)
    if salience is not None:
        metadata["salience"] = salience
    return Record(
        id=f"m{draw(st.integers(0, 10**6))}",
        kind="message",
        text="hello",
        session_id=draw(st.sampled_from(["s1", "s2", None])),
        role="user",
        timestamp=draw(st.one_of(st.none(), st.floats(0, 2e9))),
        metadata=metadata,
    )


@settings(max_examples=200, deadline=None)
@given(
    scoring=_SCORING,
    records=st.lists(_records(), max_size=20),
    newest=st.one_of(st.none(), st.floats(0, 2e9)),
    session=st.sampled_from(["s1", "s2", None]),
    data=st.data(),
)
def test_record_scores_is_record_score_of_each(
    scoring: Scoring,
    records: list[Record],
    newest: float | None,
    session: str | None,
    data: st.DataObject,
) -> None:
    relevance = [data.draw(st.floats(0.0, 1.0)) for _ in records]
    pairs = zip(records, relevance, strict=True)
    try:
        one: Any = [record_score(scoring, r, m, newest, session) for r, m in pairs]
    except ArithmeticError as exc:  # a salience whose power overflows
        one = type(exc)
    try:
        many: Any = record_scores(scoring, records, relevance, newest, session)
    except ArithmeticError as exc:
        many = type(exc)
    if isinstance(one, type):
        assert many is one
        return
    assert [_bits(v) for v in many] == [_bits(v) for v in one]
