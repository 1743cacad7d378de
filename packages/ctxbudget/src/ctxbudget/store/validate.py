"""Checking what callers give the store: records, names and counts, and what is new.

A refused record raises `StoreInputError` and nothing is written. `same_write` says when a
record given for a stored id writes nothing new (a retry), rather than conflicting with it.
"""

from __future__ import annotations

import dataclasses
import math

from ctxbudget.core.items import ROLES
from ctxbudget.core.numbers import shown
from ctxbudget.errors import StoreInputError
from ctxbudget.store.records import (
    INT64_RANGE,
    KINDS,
    TIMESTAMP_RANGE,
    Record,
    first_surrogate,
    may_be_empty,
    same_content,
)

__all__ = [
    "bad_record",
    "check_record",
    "same_write",
]


def same_write(new: Record, stored: Record) -> bool:
    """Whether writing ``new`` over ``stored`` (same scope and id) is the same write again.

    The same content (`same_content`), or the same message with another timestamp: a message
    sent again by a retry or by a framework that stamps it when it stores it (same role, text,
    name, tool calls and metadata). The first stored timestamp stays; anything else that
    differs is other content.

    >>> from ctxbudget.store.records import Record
    >>> first = Record("m1", "message", "Hi", "ns", session_id="s", role="user", timestamp=1.0)
    >>> same_write(dataclasses.replace(first, timestamp=2.0), first)
    True
    >>> same_write(dataclasses.replace(first, text="Hello"), first)
    False
    """
    if same_content(new, stored):
        return True
    if new.kind != "message" or stored.kind != "message" or new.timestamp == stored.timestamp:
        return False
    return same_content(dataclasses.replace(new, timestamp=stored.timestamp), stored)


def bad_record(index: int, record: object, problem: str) -> StoreInputError:
    """The `StoreInputError` for record `index`: its id, the problem, nothing written."""
    rid = getattr(record, "id", None)
    msg = f"record {index} (id {rid!r}): {problem}; nothing was written"
    return StoreInputError(msg)


def _check_unicode(index: int, record: object, name: str, value: object) -> None:
    if isinstance(value, str) and (problem := first_surrogate(value)) is not None:
        raise bad_record(index, record, f"{name} {problem}")


def _optional_str(index: int, record: object, name: str, value: object) -> None:
    if value is not None and (not isinstance(value, str) or not value):
        raise bad_record(
            index, record, f"{name} must be a non-empty str or None, got {shown(value)}"
        )
    _check_unicode(index, record, name, value)


def check_record(index: int, record: object) -> None:
    """Refuse a record the store cannot keep faithfully (`StoreInputError`, nothing written)."""
    if not isinstance(record, Record):
        msg = f"record {index} is a {type(record).__name__}, not a ctxbudget Record"
        raise StoreInputError(msg + "; nothing was written")
    rid: object = record.id
    if not isinstance(rid, str) or not rid:
        raise bad_record(index, record, "id must be a non-empty str")
    _check_unicode(index, record, "id", rid)
    kind: object = record.kind
    if not isinstance(kind, str) or kind not in KINDS:
        raise bad_record(index, record, f"kind must be one of {sorted(KINDS)}, got {kind!r}")
    text: object = record.text
    if not isinstance(text, str):
        raise bad_record(index, record, f"text must be a str, got {type(text).__name__}")
    if not text.strip() and not (kind == "message" and may_be_empty(record)):
        problem = "text is empty; store only records with content (or tool calls, or results)"
        raise bad_record(index, record, problem)
    _check_unicode(index, record, "text", text)
    namespace: object = record.namespace
    if not isinstance(namespace, str) or not namespace:
        raise bad_record(index, record, f"namespace must be a non-empty str, got {namespace!r}")
    _check_unicode(index, record, "namespace", namespace)
    for name in ("session_id", "user_id", "tool_call_id", "source"):
        _optional_str(index, record, name, getattr(record, name))
    role: object = record.role
    if role is not None and (not isinstance(role, str) or role not in ROLES):
        raise bad_record(
            index, record, f"role must be one of {sorted(ROLES)} or None, got {role!r}"
        )
    if kind == "message" and record.session_id is None:
        raise bad_record(
            index, record, "a message needs a session_id (its seq is counted per session)"
        )
    seq: object = record.seq
    if seq is not None and (isinstance(seq, bool) or not isinstance(seq, int) or seq < 0):
        raise bad_record(index, record, f"seq must be None or a non-negative int, got {seq!r}")
    timestamp: object = record.timestamp
    if timestamp is not None and (
        isinstance(timestamp, bool)
        or not isinstance(timestamp, int | float)
        or not math.isfinite(timestamp)
    ):
        raise bad_record(
            index, record, f"timestamp must be a finite number or None, got {timestamp!r}"
        )
    if timestamp is not None and not TIMESTAMP_RANGE[0] <= timestamp <= TIMESTAMP_RANGE[1]:
        problem = (
            f"timestamp {timestamp!r} is not a date between years 1 and 9999 (seconds since "
            "1970-01-01 UTC are expected; milliseconds? divide by 1000)"
        )
        raise bad_record(index, record, problem)
    for name in ("tool_calls", "summary_of"):
        value: object = getattr(record, name)
        if not isinstance(value, tuple) or not all(isinstance(v, str) and v for v in value):
            raise bad_record(
                index, record, f"{name} must be a tuple of non-empty str, got {value!r}"
            )
        for position, item in enumerate(value):
            _check_unicode(index, record, f"{name}[{position}]", item)
    metadata: object = record.metadata
    if not isinstance(metadata, dict):
        raise bad_record(index, record, f"metadata must be a dict, got {type(metadata).__name__}")
    for key, value in metadata.items():
        if not isinstance(key, str) or not key:
            raise bad_record(index, record, f"metadata key {key!r} must be a non-empty str")
        if key.startswith("$"):
            problem = f"metadata key {key!r} starts with '$', which filters read as an operator"
            raise bad_record(index, record, problem + "; rename it")
        _check_unicode(index, record, "metadata key", key)
        _check_metadata_value(index, record, key, value)
        _check_unicode(index, record, f"metadata[{key!r}]", value)
    tokens: object = record.tokens
    if not isinstance(tokens, dict):
        raise bad_record(index, record, f"tokens must be a dict, got {type(tokens).__name__}")
    for key, value in tokens.items():
        if (
            not isinstance(key, str)
            or isinstance(value, bool)
            or not isinstance(value, int)
            or value < 0
        ):
            raise bad_record(
                index, record, f"tokens[{key!r}] must be a non-negative int, got {value!r}"
            )


def _check_metadata_value(index: int, record: object, key: str, value: object) -> None:
    if isinstance(value, bool | str):
        return
    if isinstance(value, int):
        if not INT64_RANGE[0] <= value <= INT64_RANGE[1]:
            raise bad_record(index, record, f"metadata[{key!r}] = {value} does not fit in 64 bits")
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise bad_record(index, record, f"metadata[{key!r}] = {value} is not finite")
        return
    problem = (
        f"metadata[{key!r}] is a {type(value).__name__} ({shown(value)}); a metadata value "
        "must be a str, an int, a float or a bool (encode anything else, e.g. a date as an "
        "ISO-8601 str or a JSON string)"
    )
    raise bad_record(index, record, problem)
