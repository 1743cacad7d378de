r"""Keyed values: `StoredValue`, `ValuePut`, `ValueQuery`, and how a value is checked and embedded.

A value is a JSON object (a ``Mapping`` with str keys) kept under a namespace tuple and a key,
as LangGraph's ``BaseStore`` keeps them. It is checked before anything is written (`json_text`):
str (valid Unicode: no lone surrogate), bool, int, finite float (NaN and infinities are refused,
as Postgres JSONB refuses them), None, lists and dicts with str keys; numpy scalars and arrays
become Python numbers and lists; at most `MAX_DEPTH` levels and `MAX_BYTES` of JSON. It is
stored as JSON text and read back with ``json.loads``: ints stay ints, floats floats.

What is embedded (`index_text`): the whole value (``index=None``: its JSON, keys sorted), the
texts at some paths joined by newlines (``index=["text", "a.b", "list[*].x", "list[0]"]``, with
LangGraph's path rules: `texts_at`), or nothing (``index=False``).

>>> json_text({"note": "café", "n": 1}, ("users", "a"), "k")
'{"note": "café", "n": 1}'
>>> texts_at({"items": [{"x": "a"}, {"x": "b"}]}, "items[*].x")
['a', 'b']
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from ctxbudget.core.numbers import count, real, shown
from ctxbudget.core.unicode import lone_surrogate
from ctxbudget.errors import InvalidValueError

__all__ = [
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_TTL_MINUTES",
    "StoredValue",
    "ValuePut",
    "ValueQuery",
    "check_key",
    "check_namespace",
    "check_prefix",
    "expiry",
    "index_arg",
    "index_text",
    "json_text",
    "now_micros",
    "page_args",
    "texts_at",
    "ttl_arg",
    "utc",
]

MAX_DEPTH = 100
"""How deeply lists and dicts may nest in a value."""

MAX_BYTES = 1_000_000
"""The largest value, as UTF-8 JSON text."""

MAX_TTL_MINUTES = 1_000_000_000
"""The longest ttl (about 1,900 years): a later expiry could not be dated (year 9999 at most)."""


@dataclass(frozen=True, slots=True)
class StoredValue:
    """A value as stored: a fresh copy of what was put, with its times.

    Attributes:
        namespace: the namespace tuple it is kept under.
        key: its key in the namespace.
        value: the value (a fresh copy: a JSON round trip of what was put).
        created_at: when its key was first put (UTC; later puts keep it).
        updated_at: when it was last put (UTC).
        score: its relevance in [0, 1] in a search with a query (None otherwise, and for
            values put with ``index=False``).
        expires_at: when it expires (UTC; None: no ttl).
    """

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    score: float | None = None
    expires_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class ValuePut:
    """One put of a batch (`ContextMemory.put_values`); ``value`` None deletes the key.

    ``index`` and ``ttl`` as in `ContextMemory.put_value`.
    """

    namespace: tuple[str, ...]
    key: str
    value: Mapping[str, Any] | None
    index: Sequence[str] | bool | None = None
    ttl: float | None = None


@dataclass(frozen=True, slots=True)
class ValueQuery:
    """The values `ContextMemory.candidates` offers (``values=``): up to ``k`` under a prefix.

    Attributes:
        namespace: the namespace prefix searched (e.g. ``("memories", "alice")``).
        user_id: whose values (None: the shared ones).
        k: how many values at most (the best for the call's query).
        filter: a LangGraph filter on the values (`ctxbudget.memory.values.matching`).
    """

    namespace: tuple[str, ...]
    user_id: str | None = None
    k: int = 5
    filter: Mapping[str, Any] | None = field(default=None, hash=False)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def utc(micros: int) -> datetime:
    """Epoch microseconds as an aware UTC datetime (exact)."""
    return _EPOCH + timedelta(microseconds=micros)


def expiry(micros: int | None) -> datetime | None:
    """A stored expiry as a datetime; None for none, or one past what a datetime holds.

    `ttl_arg` refuses such a ttl now, but a value stored before may carry one: it never
    expires, and reading it must not fail.
    """
    if micros is None:
        return None
    try:
        return utc(micros)
    except (OverflowError, ValueError):
        return None


clock = time.time_ns
"""Where values' times come from (epoch nanoseconds): a test replaces it to move time."""


def now_micros() -> int:
    """The time now in epoch microseconds (from `clock`)."""
    return clock() // 1000


def _where(namespace: Sequence[str], key: str | None) -> str:
    return f"namespace {tuple(namespace)!r}" + ("" if key is None else f", key {key!r}")


def _labels(namespace: object, what: str, *, empty: bool) -> tuple[str, ...]:
    if isinstance(namespace, str) or not isinstance(namespace, Sequence):
        msg = f"{what} must be a tuple of str labels, got {shown(namespace)}; e.g. ('users', 'a')"
        raise InvalidValueError(msg)
    labels = tuple(namespace)
    if not labels and not empty:
        msg = f"{what} cannot be empty; give at least one label, e.g. ('memories',)"
        raise InvalidValueError(msg)
    for label in labels:
        problem = None
        if not isinstance(label, str):
            problem = f"labels must be strings, but got {type(label).__name__}"
        elif not label:
            problem = "labels cannot be empty strings"
        elif "." in label:
            problem = "labels cannot contain periods ('.')"
        elif "\x00" in label:
            problem = "labels cannot contain NUL characters"
        elif (bad := lone_surrogate(label)) is not None:
            problem = f"the label {bad}"
        if problem is not None:
            msg = f"invalid namespace label {shown(label)} in {what} {labels!r}: {problem}"
            raise InvalidValueError(msg)
    return labels


def check_namespace(namespace: object) -> tuple[str, ...]:
    """A value's namespace as a tuple, or `InvalidValueError` (LangGraph's rules, and Unicode)."""
    return _labels(namespace, "namespace", empty=False)


def check_prefix(prefix: object, what: str = "prefix") -> tuple[str, ...]:
    """A search's namespace prefix (may be empty: every value)."""
    return _labels(prefix, what, empty=True)


def check_key(key: object, namespace: Sequence[str]) -> str:
    """A value's key, or `InvalidValueError`."""
    if not isinstance(key, str):
        msg = f"key must be a str, got {shown(key)} in namespace {tuple(namespace)!r}"
        raise InvalidValueError(msg)
    if (bad := lone_surrogate(key)) is not None:
        msg = f"key {bad} (in namespace {tuple(namespace)!r})"
        raise InvalidValueError(msg)
    return key


def ttl_arg(ttl: object, where: str = "") -> float | None:
    """A ttl in minutes (a finite number > 0, at most `MAX_TTL_MINUTES`) or None."""
    if ttl is None:
        return None
    what = f"ttl (minutes) of {where}" if where else "ttl (minutes)"
    minutes = real(ttl, what, above=0, error=InvalidValueError, hint="or None for no expiry")
    if minutes > MAX_TTL_MINUTES:
        msg = (
            f"{what} is {shown(ttl)}, more than {MAX_TTL_MINUTES:,} (about 1,900 years: a later "
            "expiry cannot be dated); pass ttl=None for a value that never expires"
        )
        raise InvalidValueError(msg)
    return minutes


def _plain(value: Any, path: str, where: str, depth: int) -> Any:
    """``value`` as plain JSON types (numpy ones converted), or `InvalidValueError`."""
    if depth > MAX_DEPTH:
        msg = f"value of {where} nests deeper than {MAX_DEPTH} levels at {path}; flatten it"
        raise InvalidValueError(msg)
    if value is None or isinstance(value, bool | np.bool_):
        return None if value is None else bool(value)
    if isinstance(value, str):
        if (bad := lone_surrogate(value)) is not None:
            msg = f"value of {where}: the str at {path} {bad}"
            raise InvalidValueError(msg)
        return value
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        number = float(value)
        if not math.isfinite(number):
            msg = (
                f"value of {where}: {path} is {number}, which JSON cannot hold (as in Postgres "
                "JSONB); store None or a string instead"
            )
            raise InvalidValueError(msg)
        return number
    if isinstance(value, np.ndarray):
        return _plain(value.tolist(), path, where, depth)
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                msg = f"value of {where}: the key {shown(k)} at {path} is not a str; use str keys"
                raise InvalidValueError(msg)
            if (bad := lone_surrogate(k)) is not None:
                msg = f"value of {where}: a key at {path} {bad}"
                raise InvalidValueError(msg)
            out[k] = _plain(v, f"{path}.{k}", where, depth + 1)
        return out
    if isinstance(value, list | tuple):
        return [_plain(v, f"{path}[{n}]", where, depth + 1) for n, v in enumerate(value)]
    msg = (
        f"value of {where}: {path} is a {type(value).__name__} ({shown(value)}), which is not "
        "JSON; store str, int, float, bool, None, lists or dicts"
    )
    raise InvalidValueError(msg)


def json_text(value: object, namespace: Sequence[str], key: str) -> str:
    """The JSON text a value is stored as, after checking it (see the module docstring)."""
    where = _where(namespace, key)
    if not isinstance(value, Mapping):
        msg = f"value of {where} must be a dict (a JSON object), got {shown(value)}"
        raise InvalidValueError(msg)
    text = json.dumps(_plain(value, "$", where, 0), ensure_ascii=False, sort_keys=False)
    size = len(text.encode("utf-8"))
    if size > MAX_BYTES:
        msg = f"value of {where} is {size:,} bytes as JSON, more than {MAX_BYTES:,}; split it"
        raise InvalidValueError(msg)
    return text


def index_arg(index: object, where: str) -> list[str] | None:
    """The paths a value's text comes from: None for the whole value, [] for none (False)."""
    if index is None or index is True:
        return None
    if index is False:
        return []
    if isinstance(index, str) or not isinstance(index, Sequence):
        msg = f"index of {where} must be a list of paths, None or False, got {shown(index)}"
        raise InvalidValueError(msg)
    paths = list(index)
    for path in paths:
        if not isinstance(path, str) or not path:
            msg = f"index of {where}: each path must be a non-empty str, got {shown(path)}"
            raise InvalidValueError(msg)
    return paths


def index_text(value: Any, paths: list[str] | None) -> str | None:
    """What is embedded for a value (None: nothing) given `index_arg`'s paths."""
    if paths is None:
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    if not paths:
        return None
    texts = [text for path in paths for text in texts_at(value, path)]
    return "\n".join(texts) if texts else None


def _scalar_text(obj: Any) -> list[str]:
    if isinstance(obj, str | int | float | bool):
        return [str(obj)]
    if isinstance(obj, list | dict):
        return [json.dumps(obj, sort_keys=True, ensure_ascii=False)]
    return []


def tokenize_path(path: str) -> list[str]:
    """A path's tokens: fields, ``[n]``/``[*]`` indexes, ``*`` and ``{a,b.c}`` selections."""
    tokens: list[str] = []
    current: list[str] = []
    i = 0
    while i < len(path):
        char = path[i]
        if char in "[{":
            if current:
                tokens.append("".join(current))
                current = []
            close = "]" if char == "[" else "}"
            depth, chars = 1, [char]
            i += 1
            while i < len(path) and depth > 0:
                depth += (path[i] == char) - (path[i] == close)
                chars.append(path[i])
                i += 1
            tokens.append("".join(chars))
            continue
        if char == ".":
            if current:
                tokens.append("".join(current))
                current = []
        else:
            current.append(char)
        i += 1
    if current:
        tokens.append("".join(current))
    return tokens


def texts_at(obj: Any, path: str) -> list[str]:
    """The texts at ``path`` in ``obj``, as LangGraph's ``get_text_at_path`` finds them."""
    if not path or path == "$":
        return [json.dumps(obj, sort_keys=True, ensure_ascii=False)]
    return _extract(obj, tokenize_path(path), 0)


def _extract(obj: Any, tokens: list[str], pos: int) -> list[str]:
    if pos >= len(tokens):
        return _scalar_text(obj)
    token = tokens[pos]
    out: list[str] = []
    if token.startswith("[") and token.endswith("]"):
        if not isinstance(obj, list):
            return []
        index = token[1:-1]
        if index == "*":
            for item in obj:
                out.extend(_extract(item, tokens, pos + 1))
            return out
        try:
            n = int(index)
        except ValueError:
            return []
        n = len(obj) + n if n < 0 else n
        return _extract(obj[n], tokens, pos + 1) if 0 <= n < len(obj) else []
    if token.startswith("{") and token.endswith("}"):
        if not isinstance(obj, dict):
            return []
        for name in (f.strip() for f in token[1:-1].split(",")):
            parts = tokenize_path(name)
            current: Any = obj if parts else None
            for part in parts:
                current = current.get(part) if isinstance(current, dict) else None
                if current is None:
                    break
            if current is not None:
                out.extend(_scalar_text(current))
        return out
    if token == "*":
        items = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, list) else []
        for item in items:
            out.extend(_extract(item, tokens, pos + 1))
        return out
    if isinstance(obj, dict) and token in obj:
        return _extract(obj[token], tokens, pos + 1)
    return []


def page_args(limit: object, offset: object, *, most: int = 10_000) -> tuple[int, int]:
    """A search's ``limit`` (1..most) and ``offset`` (>= 0), checked."""
    return (
        count(limit, "limit", least=1, most=most, error=InvalidValueError),
        count(offset, "offset", least=0, error=InvalidValueError),
    )
