"""What a values search keeps: LangGraph's filter semantics and namespace match conditions.

`passes` is a search's ``filter``: each key names a field of the value; a plain filter value
must equal it (nested dicts field by field, lists element by element), and a dict of operators
compares it (``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``), as LangGraph's
``InMemoryStore`` and Postgres JSONB do. Order comparisons hold between numbers (bools aside)
and between strings; any other pair does not match (LangGraph's in-memory store raises there).
A filter's operands are read as values are stored (`check_filter`): numpy numbers, bools and
arrays become Python ones (so ``{"n": {"$gt": np.int64(2)}}`` compares), and NaN, which no
value equals or orders against, is refused.

`namespace_matches` is `list_value_namespaces`' prefix and suffix: ``"*"`` stands for any one
element.

>>> passes({"a": {"b": 2}, "n": 5}, {"a": {"b": 2}, "n": {"$gt": 3}})
True
>>> namespace_matches(("users", "a", "notes"), prefix=("users", "*"), suffix=("notes",))
True
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from decimal import Decimal
from numbers import Real
from typing import Any

import numpy as np

from ctxbudget.core.numbers import shown
from ctxbudget.errors import InvalidValueError

__all__ = ["OPERATORS", "check_filter", "namespace_matches", "passes"]

OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})


def check_filter(filter: object) -> dict[str, Any] | None:  # noqa: A002 - LangGraph's name
    """A search's filter (None: none), its operators checked, or `InvalidValueError`."""
    if filter is None:
        return None
    if not isinstance(filter, Mapping):
        msg = f"filter must be a dict of value fields, got {shown(filter)}"
        raise InvalidValueError(msg)
    for key, wanted in filter.items():  # a top-level key is a field's name, "$" or not
        if isinstance(wanted, Mapping):
            _check_operators(wanted, f"filter[{key!r}]")
    return {key: _operand(wanted, f"filter[{key!r}]") for key, wanted in filter.items()}


def _operand(wanted: Any, path: str) -> Any:
    """A filter operand as plain Python (numpy's numbers, bools and arrays converted)."""
    if isinstance(wanted, np.ndarray):
        wanted = wanted.tolist()
    elif isinstance(wanted, np.generic):
        wanted = wanted.item()
    if isinstance(wanted, bool) or wanted is None or isinstance(wanted, str | int):
        return wanted
    if isinstance(wanted, Real | Decimal):
        number = float(wanted)
        if math.isnan(number):
            msg = (
                f"{path} is NaN, which no value equals or orders against; give a number "
                "(or drop the condition)"
            )
            raise InvalidValueError(msg)
        return number
    if isinstance(wanted, Mapping):
        return {k: _operand(v, f"{path}[{k!r}]") for k, v in wanted.items()}
    if isinstance(wanted, list | tuple):
        return [_operand(v, f"{path}[{n}]") for n, v in enumerate(wanted)]
    return wanted


def _check_operators(spec: Mapping[Any, Any], path: str) -> None:
    """A field's condition: operators only (a key starting with "$"), or fields only."""
    operators = [k for k in spec if isinstance(k, str) and k.startswith("$")]
    if operators and len(operators) < len(spec):
        fields = [k for k in spec if k not in operators]
        msg = (
            f"{path} mixes operators ({', '.join(map(repr, operators))}) with fields "
            f"({', '.join(map(repr, fields))}); give a field either a dict of operators or a "
            "dict of its fields' values"
        )
        raise InvalidValueError(msg)
    for key, wanted in spec.items():
        if isinstance(key, str) and key.startswith("$") and key not in OPERATORS:
            msg = f"{path} uses the operator {key!r}; use one of {sorted(OPERATORS)}"
            raise InvalidValueError(msg)
        if isinstance(wanted, Mapping):
            _check_operators(wanted, f"{path}[{key!r}]")


def passes(value: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:  # noqa: A002
    """Whether ``value`` passes ``filter`` (None: every value does)."""
    if not filter:
        return True
    return all(_compare(value.get(key), wanted) for key, wanted in filter.items())


def _compare(found: Any, wanted: Any) -> bool:
    if isinstance(wanted, Mapping):
        if any(isinstance(k, str) and k.startswith("$") for k in wanted):
            return all(_apply(found, op, operand) for op, operand in wanted.items())
        if not isinstance(found, Mapping):
            return False
        return all(_compare(found.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list | tuple):
        return (
            isinstance(found, list | tuple)
            and len(found) == len(wanted)
            and all(_compare(f, w) for f, w in zip(found, wanted, strict=True))
        )
    return bool(found == wanted)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _apply(found: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return bool(found == operand)
    if op == "$ne":
        return bool(found != operand)
    comparable = (_number(found) and _number(operand)) or (
        isinstance(found, str) and isinstance(operand, str)
    )
    if not comparable:
        return False
    if op == "$gt":
        return bool(found > operand)
    if op == "$gte":
        return bool(found >= operand)
    if op == "$lt":
        return bool(found < operand)
    if op == "$lte":
        return bool(found <= operand)
    msg = f"unknown filter operator {op!r}; use one of {sorted(OPERATORS)}"
    raise InvalidValueError(msg)


def _conditions_match(space: tuple[str, ...], path: Sequence[str], *, suffix: bool) -> bool:
    if len(space) < len(path):
        return False
    ends = (space[len(space) - len(path) :], path) if suffix else (space[: len(path)], path)
    pairs = zip(*ends, strict=True)
    return all(want == "*" or have == want for have, want in pairs)


def namespace_matches(
    space: tuple[str, ...],
    *,
    prefix: Sequence[str] | None = None,
    suffix: Sequence[str] | None = None,
) -> bool:
    """Whether a namespace starts with ``prefix`` and ends with ``suffix`` (``"*"``: any one)."""
    return (prefix is None or _conditions_match(space, prefix, suffix=False)) and (
        suffix is None or _conditions_match(space, suffix, suffix=True)
    )
