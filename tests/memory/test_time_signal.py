"""Time as a signal (`ctxbudget.memory.reading.timeref`, ``Scoring.time_weight``).

Properties: any text is read without an error; a query's interval is an interval; a turn speaks
of its own day and of the past it refers to, resolved against its own date (never the day it
was stored). Then the retrieval that uses it, on a real store and embedder: a query naming a
date lifts the turns that speak of that date; a query naming none, or a store without dates,
scores exactly as with the signal off.
"""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget.errors import ConfigurationError
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.memory.policy.scoring import Scoring
from ctxbudget.memory.reading.lexical import lexical_terms
from ctxbudget.memory.reading.session_index import Query, SessionIndex
from ctxbudget.memory.reading.timeref import overlaps, query_span, turn_spans
from ctxbudget.store.chroma_store import ChromaStore
from ctxbudget.store.records import Record

DAY = 86_400.0
FAST = settings(max_examples=300, deadline=None, derandomize=True)

phrases = st.sampled_from(
    [
        "yesterday",
        "last week",
        "last weekend",
        "two weekends ago",
        "a few days ago",
        "3 days ago",
        "last Friday",
        "last month",
        "last year",
        "recently",
        "today",
        "on 25 May, 2022",
        "in July 2022",
        "between August 11 and August 15 2023",
        "in 2023",
        "31 February, 2023",
        "in 1899",
    ]
)
texts = st.lists(st.one_of(phrases, st.text(max_size=30)), max_size=6).map(" ".join)


def _day(year: int, month: int, day: int) -> float:
    return datetime(year, month, day, tzinfo=UTC).timestamp()


# -- the readers ---------------------------------------------------------------------------------


def test_query_span_reads_days_months_years_and_ranges() -> None:
    start, end = query_span("What did Nate do for Joanna on 25 May, 2022?") or (0, 0)
    assert start < _day(2022, 5, 25) < end <= _day(2022, 5, 27)
    start, end = query_span("Where did Joanna travel to in July 2022?") or (0, 0)
    assert start < _day(2022, 7, 1) and _day(2022, 7, 31) < end < _day(2022, 8, 3)
    start, end = query_span("Where was John between August 11 and August 15 2023?") or (0, 0)
    assert start < _day(2023, 8, 11) and _day(2023, 8, 15) < end < _day(2023, 8, 18)
    assert query_span("What happened in 2023?") is not None
    assert query_span("What does Melanie like?") is None
    assert query_span("What did we do on 31 February, 2023?") is None  # no such day


def test_turn_spans_resolve_relative_dates_against_the_turns_own_date() -> None:
    said = _day(2023, 8, 21)
    spans = turn_spans("Last week I was in Chicago for a conference.", said)
    asked = query_span("Where was John between August 11 and August 15 2023?")
    assert asked is not None and overlaps(spans, asked)
    assert not overlaps(turn_spans("I was in Chicago.", said), asked)  # only its own day
    assert turn_spans("Last week.", None) == []  # no date, no time


@FAST
@given(text=texts)
def test_any_query_is_read_and_gives_an_interval_or_none(text: str) -> None:
    span = query_span(text)
    assert span is None or span[0] < span[1]


@FAST
@given(text=texts, said=st.floats(0.0, 4e9))
def test_a_turn_speaks_of_its_own_day_and_of_the_past(text: str, said: float) -> None:
    spans = turn_spans(text, said)
    assert spans[0] == (said - DAY, said + DAY)  # its own day, first
    for start, end in spans:
        assert start < end <= said + DAY  # what it refers to was before it was said


def test_time_weight_is_checked() -> None:
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(ConfigurationError, match="time_weight"):
            Scoring(time_weight=bad)
    assert Scoring().time_weight == 0.5


# -- the session index: what the signal does to relevance, whatever the session -----------------

WORDS = ["camping", "lake", "paint", "kids", "museum", "trip", "conference", "Chicago", "dog"]
said_texts = st.lists(st.one_of(phrases, st.sampled_from(WORDS)), min_size=1, max_size=5).map(
    " ".join
)
asked_dates = st.sampled_from(
    [
        "on 25 May, 2022",
        "in July 2022",
        "between August 11 and August 15 2023",
        "in 2023",
        "on 3 June, 2023",
    ]
)
stamps = st.one_of(st.none(), st.floats(_day(2022, 1, 1), _day(2024, 1, 1)))


def session_of(turns: list[tuple[str, float | None]], vectors: np.ndarray) -> SessionIndex:
    index = SessionIndex(3600.0, "o200k_base")
    records = [
        Record(
            id=f"m{seq}",
            kind="message",
            text=text,
            role="user" if seq % 2 == 0 else "assistant",
            seq=seq,
            timestamp=stamp,
        )
        for seq, (text, stamp) in enumerate(turns)
    ]
    index.extend(zip(records, vectors, strict=True))
    return index


def relevance_of(index: SessionIndex, query: str, vector: np.ndarray, weight: float) -> np.ndarray:
    found = index.nearest(vector.tolist(), len(index))
    asked = Query(1.0, query, lexical_terms(query), None, found)
    return index.relevance([asked], Scoring(time_weight=weight), 2, set(), query)[0]


@FAST
@given(
    turns=st.lists(st.tuples(said_texts, stamps), min_size=1, max_size=20),
    words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join),
    date=st.one_of(st.none(), asked_dates),
    weight=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**32 - 1),
)
def test_the_signal_only_scales_the_messages_of_another_time(
    turns: list[tuple[str, float | None]],
    words: str,
    date: str | None,
    weight: float,
    seed: int,
) -> None:
    """With the signal on, relevance is the relevance without it times the time prior, scaled
    so the best is 1: messages of the time asked keep their order among themselves, the others
    count ``1 - time_weight``; a query without a date, or a date no message speaks of, changes
    nothing, and a message without a timestamp never speaks of a date."""
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(len(turns), 8))
    index = session_of(turns, vectors)
    query = f"What about {words}" + (f" {date}?" if date else "?")
    vector = rng.normal(size=8)
    off = relevance_of(index, query, vector, 0.0)
    on = relevance_of(index, query, vector, weight)
    prior = index.time_prior(query, weight, len(index))
    if date is None or weight == 0.0:
        assert prior is None
    if prior is None:
        assert np.array_equal(on, off)
        return
    span = query_span(query)
    assert span is not None
    for (_, stamp), spans, factor in zip(turns, index.spans(), prior, strict=True):
        inside = overlaps(spans, span)
        assert stamp is not None or not inside  # no timestamp: no time
        assert factor == (1.0 if inside else 1.0 - weight)
    expected = off * prior
    if expected.max() > 0:
        expected = expected / expected.max()
    assert np.allclose(on, expected)


# -- retrieval -----------------------------------------------------------------------------------

FILLER = [
    "We should water the plants more often.",
    "The new bakery opened near the station.",
    "My sister called about the holidays.",
    "I finally fixed the bike's front brake.",
]


def _memory(store: ChromaStore, time_weight: float) -> ContextMemory:
    config = MemoryConfig(recent_messages=2, scoring=Scoring(time_weight=time_weight))
    return ContextMemory(store=store, config=config, inclusion_log=False, write_behind=False)


def _scores(memory: ContextMemory, query: str) -> dict[str, float]:
    found = memory.candidates("s", query, budget=4000)
    return {it.id: it.score for it in found.retrieved}


def _store_dated(memory: ContextMemory) -> None:
    messages = [
        {
            "id": "told-after",
            "role": "user",
            "content": "Last week I was in Chicago for a conference.",
            "timestamp": "2023-08-21T10:00:00Z",
        },
        {
            "id": "told-before",
            "role": "user",
            "content": "I was in Chicago for a conference.",
            "timestamp": "2023-06-01T10:00:00Z",
        },
    ]
    for n, text in enumerate(FILLER * 3):
        messages.append(
            {
                "id": f"f{n}",
                "role": "assistant" if n % 2 else "user",
                "content": text,
                "timestamp": f"2023-09-{n + 1:02d}T10:00:00Z",
            }
        )
    memory.add_messages("s", messages, progress=False)


def test_a_date_in_the_query_lifts_the_turns_that_speak_of_it(store: ChromaStore) -> None:
    asked = "Where was I between August 11 and August 15 2023?"
    with_time = _memory(store, 0.5)
    _store_dated(with_time)
    on = _scores(with_time, asked)
    off = _scores(_memory(store, 0.0), asked)
    # "last week", said on 21 August, is the week asked about; the same words said in June
    # are not. Without the signal the two are near equals (the shorter text matches as well).
    assert on["told-after"] > on["told-before"]
    assert on["told-before"] / on["told-after"] < off["told-before"] / off["told-after"]


@pytest.mark.parametrize(
    "query",
    ["Where was I for the conference?", "What about the bakery?", "Tell me about brakes."],
)
def test_a_query_without_a_date_scores_as_with_the_signal_off(
    store: ChromaStore, query: str
) -> None:
    with_time = _memory(store, 0.9)
    _store_dated(with_time)
    assert _scores(with_time, query) == _scores(_memory(store, 0.0), query)
