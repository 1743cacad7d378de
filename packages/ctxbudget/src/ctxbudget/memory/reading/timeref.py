"""Time as a signal: the dates a query asks about, and the dates a stored turn speaks of.

A query that names a date (``on 3 June, 2023``, ``in January 2022``, ``in 2023``, ``between
August 11 and August 15 2023``) asks about what happened then. A turn speaks of its own date
(its timestamp) and of the dates its relative expressions point to, resolved against the turn's
own date, not the day it was stored: ``yesterday``, ``last week``, ``two weekends ago``,
``last Friday``, ``last month``, ``a few days ago``. `query_span` reads the query's interval
(None: it names no date); `turn_spans` the intervals a turn speaks of; `SessionIndex.relevance`
lowers the turns that speak of no time in the query's interval (``Scoring.time_weight``).

Times are seconds since the epoch, read as UTC (as the timestamps are stored); an interval is
widened by a day on each side for time zones.

>>> import datetime as dt
>>> start, end = query_span("What did Nate do on 25 May, 2022?")
>>> dt.datetime.fromtimestamp(start, dt.UTC).date(), dt.datetime.fromtimestamp(end, dt.UTC).date()
(datetime.date(2022, 5, 24), datetime.date(2022, 5, 27))
>>> query_span("What does Melanie like?") is None
True
"""

from __future__ import annotations

import calendar
import re
from datetime import UTC, datetime

__all__ = ["overlaps", "query_span", "turn_spans"]

_DAY = 86_400.0
# Months by their first three letters (a query's month is looked up by its first three).
_MONTHS = {m: n for n, m in enumerate("jan feb mar apr may jun jul aug sep oct nov dec".split(), 1)}
_MONTH = (
    r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_YEAR = r"((?:19|20)\d\d)"
_DAYNUM = r"(\d{1,2})(?:st|nd|rd|th)?"
# "25 May, 2022", "May 25, 2022", "May 25 2022"
_DAY_MONTH_YEAR = re.compile(rf"\b{_DAYNUM}\s+(?:of\s+)?{_MONTH}\.?,?\s+{_YEAR}\b", re.I)
_MONTH_DAY_YEAR = re.compile(rf"\b{_MONTH}\.?\s+{_DAYNUM},?\s+{_YEAR}\b", re.I)
_MONTH_YEAR = re.compile(rf"\b{_MONTH}\.?,?\s+(?:of\s+)?{_YEAR}\b", re.I)
_BETWEEN = re.compile(
    rf"\bbetween\s+{_MONTH}\s+{_DAYNUM}\s+and\s+(?:{_MONTH}\s+)?{_DAYNUM},?\s+{_YEAR}\b", re.I
)
_YEAR_ONLY = re.compile(rf"\b(?:in|during|of|since)\s+{_YEAR}\b", re.I)

_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "a couple of": 2,
    "a couple": 2,
    "couple of": 2,
    "a few": 3,
    "few": 3,
    "several": 4,
}
_COUNT = (
    r"(\d+|a couple of|a couple|couple of|a few|few|several|an?|one|two|three|four|five|"
    r"six|seven|eight|nine|ten)"
)
_UNIT_DAYS = {"day": 1.0, "week": 7.0, "weekend": 7.0, "month": 30.0, "year": 365.0}
_AGO = re.compile(rf"\b{_COUNT}\s+(day|week|weekend|month|year)s?\s+ago\b", re.I)
_LAST = re.compile(
    r"\b(yesterday|last night|the other day|last (week|weekend|month|year|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|fri|sat|sun|mon|tue|wed|thu)|"
    r"(?:this|that) (?:past )?(week|weekend|morning|month)|"
    r"past (week|weekend|month)|today|tonight|this morning|recently|lately)\b",
    re.I,
)


def _stamp(year: int, month: int, day: int) -> float:
    return datetime(year, month, day, tzinfo=UTC).timestamp()


def _month_span(year: int, month: int) -> tuple[float, float]:
    last = calendar.monthrange(year, month)[1]
    return _stamp(year, month, 1), _stamp(year, month, last) + _DAY


def query_span(query: str) -> tuple[float, float] | None:
    """The interval of time ``query`` asks about (widened by a day each side), or None.

    The first date expression found counts: a day, a range of days, a month, a year.
    """
    try:
        found = _BETWEEN.search(query)
        if found:
            first = _MONTHS[found.group(1).casefold()[:3]]
            second = _MONTHS[found.group(3).casefold()[:3]] if found.group(3) else first
            year = int(found.group(5))
            start = _stamp(year, first, int(found.group(2)))
            end = _stamp(year, second, int(found.group(4))) + _DAY
            return start - _DAY, end + _DAY
        found = _DAY_MONTH_YEAR.search(query)
        if found:
            start = _stamp(
                int(found.group(3)), _MONTHS[found.group(2).casefold()[:3]], int(found.group(1))
            )
            return start - _DAY, start + 2 * _DAY
        found = _MONTH_DAY_YEAR.search(query)
        if found:
            start = _stamp(
                int(found.group(3)), _MONTHS[found.group(1).casefold()[:3]], int(found.group(2))
            )
            return start - _DAY, start + 2 * _DAY
        found = _MONTH_YEAR.search(query)
        if found:
            start, end = _month_span(int(found.group(2)), _MONTHS[found.group(1).casefold()[:3]])
            return start - _DAY, end + _DAY
        found = _YEAR_ONLY.search(query)
        if found:
            year = int(found.group(1))
            return _stamp(year, 1, 1) - _DAY, _stamp(year + 1, 1, 1) + _DAY
    except (ValueError, KeyError, OverflowError):  # "31 February", a year out of range
        return None
    return None


def turn_spans(text: str, timestamp: float | None) -> list[tuple[float, float]]:
    """The intervals a turn dated ``timestamp`` speaks of: its own day and what it refers to.

    Relative expressions are resolved against ``timestamp`` (``last week``: 4 to 10 days
    before, ``3 days ago``: 2 to 4 days before...). No timestamp: none.

    >>> own, told = turn_spans("We went camping two weeks ago.", 1e9)
    >>> days = lambda t: round((t - 1e9) / 86400)
    >>> days(own[0]), days(told[0]), days(told[1])
    (-1, -18, -10)
    """
    if timestamp is None:
        return []
    spans = [(timestamp - _DAY, timestamp + _DAY)]
    for found in _AGO.finditer(text):
        count = _NUMBERS.get(found.group(1).casefold())
        if count is None:
            try:
                count = int(found.group(1))
            except ValueError:
                continue
        days = count * _UNIT_DAYS[found.group(2).casefold()]
        slack = max(1.0, 0.3 * days)
        spans.append((timestamp - (days + slack) * _DAY, timestamp - (days - slack) * _DAY))
    for found in _LAST.finditer(text):
        phrase = found.group(0).casefold()
        if phrase in ("today", "tonight", "this morning"):
            continue  # the turn's own day
        if phrase in ("yesterday", "last night", "the other day"):
            spans.append((timestamp - 3 * _DAY, timestamp))
        elif "month" in phrase:
            spans.append((timestamp - 45 * _DAY, timestamp))
        elif "year" in phrase:
            spans.append((timestamp - 540 * _DAY, timestamp - 180 * _DAY))
        elif phrase in ("recently", "lately"):
            spans.append((timestamp - 21 * _DAY, timestamp))
        else:  # a week, a weekend, a weekday
            spans.append((timestamp - 11 * _DAY, timestamp))
    return spans


def overlaps(spans: list[tuple[float, float]], span: tuple[float, float]) -> bool:
    """Whether one of ``spans`` meets ``span``."""
    start, end = span
    return any(a < end and b > start for a, b in spans)
