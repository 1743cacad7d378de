"""The boundary every number from outside passes: counts and budgets, scores and weights.

One rule for every place a caller, a framework, numpy or a reranker hands ctxbudget a number:

* **A count** (a budget, a window, ``k``, a token limit, a tier): any `numbers.Integral` but
  ``bool`` (Python ints, numpy's ``int64``/``int32``/``uint8``...), within its bounds (most
  counts at least 1) and at most `MAX_COUNT`. Floats (even ``2.0``), strings (``"3"``),
  ``Decimal``, ``True`` and ``None`` are refused: a count that was computed as a float or parsed
  from text by accident should say so, not be rounded silently.
* **A flag** (a setting that is on or off): ``True``, ``False`` or numpy's bool. Ints (``1``),
  strings (``"false"``, which Python would read as true) and ``None`` are refused.
* **A real** (a score, a weight, a half-life): any `numbers.Real` but ``bool`` (Python and
  numpy floats, ``float32`` from a reranker, ints, ``Fraction``) and ``Decimal``, when finite
  and within its bounds. NaN and the infinities are refused where they enter, not later as
  an error about some item.

A refusal is the error class the caller names (`ConfigurationError` unless the domain has its
own leaf, e.g. `InvalidBudgetError` for budgets, `InvalidItemError` for an item's fields), with
a message that names the value, where it came from and what to pass instead.

>>> count(3, "k", least=0)
3
>>> real(0.5, "recency_weight")
0.5
"""

from __future__ import annotations

import itertools
import math
import reprlib
from decimal import Decimal
from numbers import Integral, Real

import numpy as np

from ctxbudget.errors import ConfigurationError, CtxBudgetError

__all__ = ["MAX_COUNT", "count", "flag", "from_numpy", "real", "shown"]

MAX_COUNT = 10**100
"""The largest count accepted anywhere (a googol): far above any window or budget, and small
enough that printing it in a message stays cheap (Python refuses to print ints of more than
4,300 digits)."""


_SHOWN = 80  # characters of a value a message shows
_DEPTH = 4  # levels of a nested value a message shows


def from_numpy(value: object) -> object:
    """A numpy number or array as the Python value it holds (``int64(3)`` is 3, an array a list).

    Anything else comes back as it is (the same object: ``from_numpy(v) is v`` says it was not
    numpy's).

    >>> from_numpy(np.float32(1.5)), from_numpy(np.arange(2)), from_numpy("x")
    (1.5, [0, 1], 'x')
    """
    if isinstance(value, np.ndarray | np.generic):
        plain: object = value.tolist()
        return plain
    return value


def _short_repr() -> reprlib.Repr:
    short = reprlib.Repr()
    short.maxlevel = _DEPTH  # deeper levels are shown as "...": no recursion past them
    short.maxstring = short.maxother = short.maxlong = _SHOWN
    return short


_SHORT = _short_repr()


def _depth(value: object, limit: int) -> int:
    """How deep ``value``'s lists, tuples and dicts nest, counted up to ``limit`` (a loop)."""
    level, layer = 0, [value]
    while layer and level < limit:
        nested: list[object] = []
        for each in layer:
            if isinstance(each, list | tuple):
                nested.extend(each[:8])
            elif isinstance(each, dict):
                nested.extend(itertools.islice(each.values(), 8))
        if not nested and not any(isinstance(e, list | tuple | dict) for e in layer):
            break
        level += 1
        layer = nested
    return level


def shown(value: object) -> str:
    """``value`` as an error message shows it: at most 80 characters, whatever it holds.

    A huge int, a value nested thousands of levels deep or holding millions of items costs no
    more to show than a small one (Python's ``repr`` would fail on the first two).

    >>> shown([[[[[[1]]]]]])
    'a list nested deeper than 4 levels'
    >>> shown(10**5000)
    'a huge int'
    """
    if isinstance(value, Integral) and not isinstance(value, bool) and abs(int(value)) >= 10**30:
        return "a huge int"
    if isinstance(value, list | tuple | dict) and _depth(value, _DEPTH + 1) > _DEPTH:
        return f"a {type(value).__name__} nested deeper than {_DEPTH} levels"
    try:
        text = repr(value) if isinstance(value, str) else _SHORT.repr(value)
    except (RecursionError, ValueError):  # an object whose own repr recurses or fails
        text = f"a {type(value).__name__} that cannot be shown"
    return text if len(text) <= _SHOWN else f"{text[: _SHOWN - 3]}..."


def count(
    value: object,
    what: str,
    *,
    least: int | None = 1,
    most: int | None = MAX_COUNT,
    error: type[CtxBudgetError] = ConfigurationError,
    hint: str = "",
) -> int:
    """``value`` as a plain ``int``, or ``error`` saying why it is not a count.

    Args:
        value: what the caller gave.
        what: where it came from, as the caller wrote it (``"CtxBudgetRetriever(k=)"``).
        least: the smallest value allowed (None: no lower bound).
        most: the largest value allowed (None: no upper bound).
        error: the error class to raise (a `CtxBudgetError` taking one message).
        hint: what to do, appended to the message (``"e.g. budget=4096"``).

    Raises:
        CtxBudgetError: ``error``, naming ``what`` and the value.

    >>> count(4096, "budget")
    4096
    """
    suffix = f"; {hint}" if hint else ""
    if isinstance(value, bool) or not isinstance(value, Integral):
        kind = type(value).__name__
        msg = (
            f"{what} must be an int (any integral type, numpy's too), got {shown(value)} "
            f"({kind}){suffix}"
        )
        raise error(msg)
    number = int(value)
    if least is not None and number < least:
        bound = {0: "0 or more", 1: "positive"}.get(least, f"at least {least:,}")
        msg = f"{what} must be {bound}, got {shown(number)}{suffix}"
        raise error(msg)
    if most is not None and number > most:
        limit = "10**100" if most == MAX_COUNT else f"{most:,}"
        msg = f"{what} must be at most {limit}, got {shown(number)}{suffix}"
        raise error(msg)
    return number


def real(
    value: object,
    what: str,
    *,
    least: float | None = None,
    most: float | None = None,
    above: float | None = None,
    error: type[CtxBudgetError] = ConfigurationError,
    hint: str = "",
) -> float:
    """``value`` as a finite ``float``, or ``error`` saying why it is not one.

    Args:
        value: what the caller gave (a Python, numpy or ``Decimal`` number).
        what: where it came from (``"Scoring(recency_weight=)"``).
        least: the smallest value allowed.
        most: the largest value allowed.
        above: a bound the value must exceed (``above=0``: strictly positive).
        error: the error class to raise.
        hint: what to do, appended to the message.

    Raises:
        CtxBudgetError: ``error``, naming ``what`` and the value.

    >>> real(3, "half_life_days", above=0)
    3.0
    """
    suffix = f"; {hint}" if hint else ""
    if isinstance(value, bool) or not isinstance(value, Real | Decimal):
        kind = type(value).__name__
        msg = f"{what} must be a number, got {shown(value)} ({kind}){suffix}"
        raise error(msg)
    try:
        number = float(value)
    except (OverflowError, ValueError) as exc:  # a Decimal or int too large for a float
        msg = f"{what} must be a finite number, got {shown(value)}{suffix}"
        raise error(msg) from exc
    if not math.isfinite(number):
        msg = f"{what} must be a finite number, got {shown(value)}{suffix}"
        raise error(msg)
    if least is not None and number < least:
        msg = f"{what} must be at least {least:g}, got {number:g}{suffix}"
        raise error(msg)
    if above is not None and number <= above:
        msg = f"{what} must be more than {above:g}, got {number:g}{suffix}"
        raise error(msg)
    if most is not None and number > most:
        msg = f"{what} must be at most {most:g}, got {number:g}{suffix}"
        raise error(msg)
    return number


def flag(value: object, what: str, *, error: type[CtxBudgetError] = ConfigurationError) -> bool:
    """``value`` as a plain ``bool``, or ``error`` saying why it is not one.

    >>> flag(True, "MemoryConfig.excerpts")
    True
    >>> flag("false", "MemoryConfig.excerpts")
    Traceback (most recent call last):
    ...
    ctxbudget.errors.ConfigurationError: MemoryConfig.excerpts must be True or False, got 'false'
    """
    if isinstance(value, bool | np.bool_):
        return bool(value)
    msg = f"{what} must be True or False, got {shown(value)}"
    raise error(msg)
