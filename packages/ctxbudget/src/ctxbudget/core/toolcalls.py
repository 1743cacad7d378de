"""Tool calls in one canonical form, for every reader and writer.

The form is OpenAI's, which providers and both frameworks convert to and from::

    {"id": "call_1", "type": "function", "function": {"name": "search", "arguments": "{...}"}}

``arguments`` is kept as the text the model produced, valid JSON or not: a model that emits
malformed arguments made that call, and the conversation must show it (LangChain keeps such a
call in ``invalid_tool_calls``). `parse_arguments` says whether the text is a JSON object;
readers turn a call whose arguments are not one into their framework's invalid-call type
instead of failing.

JSON is strict JSON here, as providers read it: text holding a bare ``NaN``, ``Infinity`` or
``-Infinity`` (Python's ``json`` reads them, no provider does), or a number too large for a
float (``1e999``), is not a JSON object. Such text is kept as the model produced it, like any
other malformed arguments, so `parse_arguments` never returns NaN or an infinity and every
adapter reads it back as an invalid call; arguments given as a mapping holding NaN or an
infinity are refused (`InvalidItemError`), as the adapters refuse them.

>>> call = tool_call("call_1", "search", {"q": "lisbon"})
>>> call["function"]["arguments"], parse_arguments(call["function"]["arguments"])
('{"q": "lisbon"}', {'q': 'lisbon'})
>>> parse_arguments('{"q": ') is None, parse_arguments('{"x": NaN}') is None
(True, True)
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from ctxbudget.core.numbers import from_numpy
from ctxbudget.errors import InvalidItemError

__all__ = [
    "call_ids",
    "canonical_arguments",
    "json_line",
    "normalize_tool_calls",
    "parse_arguments",
    "tool_call",
]


def tool_call(call_id: str, name: str, arguments: Mapping[str, Any] | str) -> dict[str, Any]:
    """One call in the canonical form (``arguments``: a mapping, or the text as produced)."""
    text = arguments if isinstance(arguments, str) else _json(arguments, name)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}


def parse_arguments(arguments: str) -> dict[str, Any] | None:
    """The arguments as a dict, or None when the text is not a strict JSON object.

    Empty text counts as no arguments (``{}``), as the OpenAI API treats it. ``NaN``,
    ``Infinity``, ``-Infinity`` and numbers no float holds (``1e999``) make the text not JSON
    (None): providers refuse them, and the value returned never holds NaN or an infinity.
    Text nested too deep for Python's parser is not a JSON object either (None, not a
    RecursionError).

    >>> parse_arguments('{"x": 1.5}'), parse_arguments('{"x": -Infinity}'), parse_arguments("")
    ({'x': 1.5}, None, {})
    """
    if not arguments.strip():
        return {}
    try:
        value = json.loads(arguments, parse_constant=_no_constant, parse_float=_finite_float)
    except (ValueError, RecursionError):  # the hooks' InvalidItemError is a ValueError
        return None
    return value if isinstance(value, dict) else None


def _no_constant(token: str) -> object:
    """``json.loads``' hook for ``NaN``, ``Infinity`` and ``-Infinity``: not JSON."""
    msg = f"{token} is not a JSON value"
    raise InvalidItemError(msg)


def _finite_float(token: str) -> float:
    """A JSON number with a fraction or exponent as a float; one no float holds is refused."""
    value = float(token)
    if not math.isfinite(value):
        msg = f"{token} is too large for a float"
        raise InvalidItemError(msg)
    return value


def canonical_arguments(arguments: object) -> str:
    """Arguments in one form for showing and comparing.

    A JSON object (given as text or as a mapping) becomes `json_line` of it; any other text
    stays the text the model produced.

    >>> canonical_arguments('{"b":1, "a": "x"}'), canonical_arguments("{oops")
    ('{"b": 1, "a": "x"}', '{oops')
    """
    if isinstance(arguments, str):
        parsed = parse_arguments(arguments)
        return arguments if parsed is None else json_line(parsed)
    if isinstance(arguments, Mapping):
        return json_line(dict(arguments))
    return json_line(arguments)


_LINE_BREAKS = {"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def json_line(value: object) -> str:
    """JSON on one line: non-ASCII kept, but no character a reader may take for a line break."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    for char, escape in _LINE_BREAKS.items():
        text = text.replace(char, escape)
    return text


def normalize_tool_calls(calls: object, where: str) -> list[dict[str, Any]]:
    """Tool calls given in any common form, checked, in the canonical form.

    Accepts OpenAI dicts (``{"id", "function": {"name", "arguments"}}``), LangChain dicts
    (``{"id", "name", "args"}``; an invalid call's ``args`` is its raw text) and the canonical
    form itself. Each call needs a non-empty str ``id`` (its result names it) and ``name``, ids
    must be distinct, and arguments must be a mapping or a str.

    Raises:
        InvalidItemError: a call that is not a dict, or lacks an id or a name (``where`` says
            which message); a ValueError.
    """
    if calls is None:
        return []
    if isinstance(calls, str | bytes | Mapping) or not isinstance(calls, Sequence):
        msg = f"{where}: tool_calls must be a list of call dicts, got {type(calls).__name__}"
        raise InvalidItemError(msg)
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for position, call in enumerate(calls):
        label = f"{where}, tool call {position}"
        if not isinstance(call, Mapping):
            msg = (
                f"{label}: a tool call must be a dict with an id, a name and arguments, "
                f"got {call!r:.80}"
            )
            raise InvalidItemError(msg)
        function = call.get("function")
        source: Mapping[str, Any] = function if isinstance(function, Mapping) else call
        name = source.get("name")
        arguments: object = source.get("arguments", source.get("args"))
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id:
            msg = (
                f"{label} ({name!r:.40}) has no id; give every tool call a non-empty str id "
                "(its result names it in tool_call_id)"
            )
            raise InvalidItemError(msg)
        if call_id in seen:
            msg = f"{label}: the id {call_id!r} is used by another call of the same message"
            raise InvalidItemError(msg)
        seen.add(call_id)
        if not isinstance(name, str) or not name:
            msg = f"{label} (id {call_id!r}) has no tool name; give it the name of the tool"
            raise InvalidItemError(msg)
        if arguments is None:
            arguments = ""
        if not isinstance(arguments, str | Mapping):
            msg = (
                f"{label} (id {call_id!r}): arguments must be a dict or JSON text, got "
                f"{type(arguments).__name__}"
            )
            raise InvalidItemError(msg)
        try:
            out.append(tool_call(call_id, name, arguments))
        except InvalidItemError as exc:
            msg = f"{label} (id {call_id!r}): {exc}"
            raise InvalidItemError(msg) from exc
    return out


def call_ids(calls: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """The ids of canonical calls, in order."""
    return tuple(str(call["id"]) for call in calls)


def _json(arguments: Mapping[str, Any], name: str) -> str:
    try:
        # No NaN or infinity: JSON has neither, and a provider refuses the request holding
        # them (json.dumps would write a bare NaN; until 2026-12-01 it was stored so).
        return json.dumps(dict(arguments), ensure_ascii=False, default=_numbers, allow_nan=False)
    except ValueError as exc:
        if "not JSON compliant" not in str(exc):
            msg = f"the arguments of tool call {name!r} cannot be written as JSON ({exc})"
            raise InvalidItemError(msg) from exc
        msg = (
            f"the arguments of tool call {name!r} hold NaN or infinity, which JSON cannot "
            "write and providers refuse; give null or a string for that value"
        )
        raise InvalidItemError(msg) from exc
    except (TypeError, InvalidItemError) as exc:
        msg = f"the arguments of tool call {name!r} cannot be written as JSON ({exc})"
        raise InvalidItemError(msg) from exc


def _numbers(value: object) -> object:
    """Numbers and arrays of numpy (a model's parsed arguments may hold them) as JSON's."""
    plain = from_numpy(value)
    if plain is value:
        msg = f"{type(value).__name__} is not JSON"
        raise InvalidItemError(msg)
    return plain
