"""Checking what callers give `ContextMemory`: timestamps, documents, metadata, collections.

Every problem is a `StoreInputError` (writes) or `InvalidItemError` (reads) that names the
input and says what to pass instead; nothing is written before these checks pass.
"""

from __future__ import annotations

import calendar
import json
import math
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime
from decimal import Decimal
from numbers import Integral, Real
from typing import Any

import numpy as np

from ctxbudget.core.ids import check_caller_id
from ctxbudget.core.items import ContextItem
from ctxbudget.core.numbers import MAX_COUNT, shown
from ctxbudget.core.toolcalls import normalize_tool_calls
from ctxbudget.errors import InvalidItemError, StoreInputError
from ctxbudget.store.records import MetadataValue, first_surrogate, require_name
from ctxbudget.tokens.backends import check_text

__all__ = [
    "check_batch_size",
    "check_message_id",
    "check_query",
    "document_parts",
    "documents_arg",
    "extra_items",
    "given_id",
    "message_calls",
    "to_timestamp",
    "user_metadata",
]

_UNWRITTEN = "; nothing was written"


def check_query(query: object) -> str:
    """``query`` if it can be searched for and sent to a model: a str of valid Unicode.

    The check every door makes of a query (`ContextMemory.search`, the adapters' retrievers,
    compressor and postprocessor), before it is embedded, logged or put in a span.

    Raises:
        InvalidItemError: not a str, or a lone surrogate (``"query: text has a lone surrogate
            ..."``).
    """
    if not isinstance(query, str):
        msg = f"query must be a str (the text to search for), got {shown(query)}"
        raise InvalidItemError(msg)
    try:
        check_text(query)
    except InvalidItemError as exc:
        msg = f"query: {exc}"
        raise InvalidItemError(msg) from exc
    return query


def to_timestamp(value: float | int | datetime | str | None) -> float | None:
    """Seconds since the epoch from a number, a datetime (naive means UTC) or ISO-8601 text.

    Any number but a bool is taken (numpy's too); one too large for a float is not a date.
    A numpy ``datetime64`` is the moment it holds (UTC), a ``date`` its midnight UTC.
    """
    if value is None:
        return None
    if isinstance(value, np.datetime64):
        moment: object = value.astype("datetime64[us]").item()  # None for NaT
        if not isinstance(moment, datetime):
            msg = f"timestamp {shown(value)} is not a date (NaT, or out of datetime's years)"
            raise InvalidItemError(msg)
        value = moment
    elif isinstance(value, date) and not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day, tzinfo=UTC)
    if isinstance(value, bool):
        msg = f"timestamp must be a number, a datetime or ISO-8601 text, got {value!r}"
        raise InvalidItemError(msg)
    try:
        if isinstance(value, Real | Decimal):
            return float(value)
        if isinstance(value, datetime):
            moment = value if value.tzinfo else value.replace(tzinfo=UTC)
            return moment.timestamp()
    except (OverflowError, ValueError, OSError) as exc:
        msg = f"timestamp {shown(value)} is not a date ({exc}); pass seconds since 1970-01-01 UTC"
        raise InvalidItemError(msg) from exc
    if isinstance(value, str):
        try:
            return to_timestamp(datetime.fromisoformat(value.replace("Z", "+00:00")))
        except ValueError as exc:
            raise InvalidItemError(_not_a_moment(value, exc)) from exc
    msg = (
        f"timestamp must be a number (seconds since 1970-01-01 UTC), a datetime or ISO-8601 "
        f"text, got {type(value).__name__} ({shown(value)}); convert it to one of those "
        "(nothing was written)"
    )
    raise InvalidItemError(msg)


_ISO_DATE = re.compile(r"(\d{4})-?(\d{2})-?(\d{2})")
_MONTHS = "January February March April May June July August September October November December"


def _not_a_moment(text: str, exc: ValueError) -> str:
    """Why ISO-8601 parsing refused ``text``: not that form, or a field out of range."""
    if str(exc).startswith("Invalid isoformat string"):  # CPython's words for the wrong form
        return f"timestamp {shown(text)} is not ISO-8601 (e.g. 2026-03-02T09:14:00Z)"
    found = _ISO_DATE.match(text)
    if found and str(exc).startswith("day is out of range"):
        year, month, day = (int(part) for part in found.groups())
        if 1 <= year and 1 <= month <= 12:
            last = calendar.monthrange(year, month)[1]
            return (
                f"timestamp {shown(text)} is not a date: day {day} is out of range for "
                f"{_MONTHS.split()[month - 1]} {year}, which has {last} days; pass a day from "
                f"1 to {last} (e.g. {year:04d}-{month:02d}-{last:02d})"
            )
    return (
        f"timestamp {shown(text)} has the form of ISO-8601 but is not a real date or time "
        f"({exc}); correct that field (e.g. 2026-03-02T09:14:00Z)"
    )


def documents_arg(documents: object) -> bool | str | Sequence[str]:
    """``documents`` as `ContextMemory.assemble` takes it (an empty list: no documents)."""
    if isinstance(documents, bool):
        return documents
    if isinstance(documents, str) and documents and first_surrogate(documents) is None:
        return documents
    if isinstance(documents, Sequence) and not isinstance(documents, str):
        names = list(documents)
        if all(isinstance(name, str) and name and first_surrogate(name) is None for name in names):
            return names if names else False
    msg = (
        "documents must be True (all collections), False (none), a collection name or a list "
        f"of them, got {shown(documents)}"
    )
    raise InvalidItemError(msg)


def document_parts(
    index: int, document: object
) -> tuple[str | None, str, str | None, dict[str, Any]]:
    metadata: dict[str, Any]
    if isinstance(document, str):
        doc_id, text, source, metadata = None, document, None, {}
    elif isinstance(document, tuple) and len(document) == 2:
        doc_id, text, source, metadata = document[0], document[1], None, {}
    elif isinstance(document, Mapping):
        doc_id = document.get("id")
        text = document.get("text", document.get("page_content"))
        source = document.get("source")
        reserved = frozenset({"doc_namespace", "doc_id"})
        metadata = dict(user_metadata(f"document {index}", document.get("metadata"), reserved))
    else:
        msg = (
            f"document {index} is a {type(document).__name__}; pass a str, an (id, text) pair "
            "or a dict with 'text'"
        )
        raise StoreInputError(msg)
    if not isinstance(text, str) or not text.strip():
        msg = f"document {index} has no text"
        raise StoreInputError(msg)
    problem = first_surrogate(text)
    if problem is not None:  # before it is cut into chunks: counting it would fail
        msg = f"document {index}: text {problem}"
        raise StoreInputError(msg)
    if source is not None and source != "":
        source = require_name(f"document {index}: source", source)
    source = source or None
    return (
        given_id(f"document {index}", doc_id, "None for one from its text"),
        text,
        source,
        metadata,
    )


def check_batch_size(value: object) -> int:
    """``batch_size`` of `ContextMemory.add_messages`: a positive int (numpy's too)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, Integral)
        or not 1 <= int(value) <= MAX_COUNT
    ):
        msg = f"batch_size must be a positive int, got {shown(value)}"
        raise StoreInputError(msg)
    return int(value)


def given_id(what: str, given: object, otherwise: str) -> str | None:
    """A caller's id of a message or document as a str (an int too); None when not given."""
    if given is None or given == "":
        return None
    if isinstance(given, str) or (
        isinstance(given, int) and not isinstance(given, bool) and abs(given) < 10**30
    ):  # str() of a 4,300-digit int fails
        check_message_id(str(given), what)
        return str(given)
    msg = f"{what}: id must be a str (or {otherwise}), got {shown(given)}"
    raise StoreInputError(msg)


def user_metadata(
    what: str, raw: object, reserved: frozenset[str] = frozenset()
) -> dict[str, MetadataValue]:
    """A caller's metadata, refusing the keys ctxbudget keeps its own fields under.

    numpy scalars become the Python values they hold (``float32`` a float, ``int64`` an int,
    ``bool_`` a bool), as numbers are taken everywhere else; the store then checks them.
    """
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        msg = f"{what}: metadata must be a dict, got {type(raw).__name__}"
        raise StoreInputError(msg)
    metadata: dict[str, MetadataValue] = {
        key: value.item() if isinstance(value, np.generic) else value for key, value in raw.items()
    }
    for key, value in metadata.items():
        if isinstance(key, str) and (key.startswith("_") or key in reserved):
            names = "keys starting with '_'" + "".join(f", {n!r}" for n in sorted(reserved))
            msg = f"{what}: metadata key {key!r} is reserved ({names} are ctxbudget's); rename it"
            raise StoreInputError(msg)
        if key == "salience" and (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or value < 0
        ):
            msg = (
                f"{what}: metadata['salience'] multiplies the item's score, so it must be a "
                f"number >= 0 (1 is neutral), got {value!r}"
            )
            raise StoreInputError(msg)
    return metadata


def check_message_id(given: str, where: str) -> None:
    """Refuse a caller's id in ctxbudget's own id space, before anything is written."""
    try:
        check_caller_id(given, where)
    except InvalidItemError as exc:
        msg = f"{exc}{_UNWRITTEN}"
        raise StoreInputError(msg) from exc


def message_calls(index: int, raw: object, metadata: dict[str, MetadataValue]) -> tuple[str, ...]:
    """A message's tool-call ids; full calls go to ``metadata["_tool_calls"]``, canonical.

    Calls are given as dicts (OpenAI's or LangChain's form, see `ctxbudget.core.toolcalls`), kept
    with their arguments as text, valid JSON or not; or as plain ids, for callers that only
    have those (then no ``_tool_calls`` is stored).
    """
    if raw is None or (isinstance(raw, list | tuple) and not raw):
        return ()
    where = f"message {index}"
    if isinstance(raw, str | bytes) or not isinstance(raw, list | tuple):
        msg = (
            f"{where}: tool_calls must be a list of call ids or call dicts, "
            f"got {type(raw).__name__}"
        )
        raise StoreInputError(msg)
    if all(isinstance(c, str) for c in raw):
        return tuple(raw)
    if any(not isinstance(c, Mapping) for c in raw):
        msg = (
            f"{where}: each tool call must be an id (str) or a dict with an 'id', not a mix; "
            f"got {[type(c).__name__ for c in raw]}"
        )
        raise StoreInputError(msg)
    try:
        calls = normalize_tool_calls(raw, where)
    except InvalidItemError as exc:
        msg = f"{exc}{_UNWRITTEN}"
        raise StoreInputError(msg) from exc
    metadata["_tool_calls"] = json.dumps(calls, ensure_ascii=False)
    return tuple(str(c["id"]) for c in calls)


def extra_items(extra: Sequence[ContextItem]) -> list[ContextItem]:
    """``extra`` checked: ContextItems whose ids are the caller's, not ctxbudget's own."""
    given: object = extra
    if isinstance(given, str | bytes | Mapping) or not isinstance(given, Sequence):
        msg = f"extra must be a list of ContextItem, got {type(given).__name__}"
        raise InvalidItemError(msg)
    items: list[ContextItem] = []
    for position, item in enumerate(extra):
        if not isinstance(item, ContextItem):
            msg = f"extra[{position}] must be a ContextItem, got {type(item).__name__}"
            raise InvalidItemError(msg)
        check_caller_id(item.id, f"extra[{position}]")
        items.append(item)
    return items
