r"""One row of the text formats: who said it, what it says, the tool calls it carries.

A row of the ``text`` and ``compact`` formats (and of the knowledge and summary sections of
the ``messages`` format) reads ``label: content`` (compact: ``label|content``), where

* the label is the role (``-`` when none), then the author name in parentheses when there is
  one: as written when it is a plain name (``user (Ana Maria)``), else as a JSON string
  (``user ("Dr. Who: 2")``), so any name is shown and reads back exactly;
* a tool result starts with ``[result of ID]`` naming the call it answers;
* an assistant turn that calls tools ends with ``[calls NAME(ARGS) id=ID; ...]``, ARGS being
  the arguments as JSON when they are a JSON object, else the text the model produced as a
  JSON string (see `ctxbudget.core.toolcalls.canonical_arguments`); a name or id that is not a
  plain token is written as a JSON string.

Content that contains ``[calls `` or ``[result of `` gets a backslash in front of the bracket
(``\[calls ``; one more backslash where some precede it), so only the assembler writes
markers. `split_row` inverts `row_content`; `parse_label` inverts `label`.

>>> from ctxbudget import ContextItem
>>> from ctxbudget.core.toolcalls import tool_call
>>> item = ContextItem("a1", "Looking.", role="assistant",
...     tool_calls=("c1",), metadata={"tool_calls": [tool_call("c1", "search", {"q": "x"})]})
>>> row_content(item)
'Looking. [calls search({"q": "x"}) id=c1]'
>>> split_row(row_content(item))
('Looking.', (RowCall(id='c1', name='search', arguments='{"q": "x"}'),), None)
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ctxbudget.core.items import ContextItem
from ctxbudget.core.toolcalls import canonical_arguments, json_line, parse_arguments

__all__ = [
    "LABEL_PATTERN",
    "NAME_PATTERN",
    "RowCall",
    "label",
    "parse_label",
    "row_content",
    "split_row",
]

_PLAIN_NAME = r"\w[^\s|:\\()\"]*(?: [^\s|:\\()\"]+)*"
_JSON_STRING = r"\"(?:[^\"\\\x00-\x1f\x7f-\uffff]|\\.)*\""
NAME_PATTERN = rf"(?:{_PLAIN_NAME}|{_JSON_STRING})"
"""An author name as a label shows it (plain, or a JSON string)."""
LABEL_PATTERN = rf"(?:user|assistant|system|tool|-)(?: \({NAME_PATTERN}\))?"
"""A whole label: the role (or ``-``), then the author name in parentheses."""
_LABEL = re.compile(rf"(user|assistant|system|tool|-)(?: \(({NAME_PATTERN})\))?")
_PLAIN = re.compile(_PLAIN_NAME)
_TOKEN = re.compile(r"[A-Za-z0-9_.\-]+")
_MARKER = re.compile(r"(\\*)\[(calls |result of )")
_UNMARK = re.compile(r"\\(\\*)\[(calls |result of )")
_CALLS = re.compile(r"(?:^| )(?<!\\)\[calls ")
_MAX_PLAIN = 64


@dataclass(frozen=True, slots=True)
class RowCall:
    """A tool call read back from a row: its id, tool name and canonical arguments.

    ``name`` and ``arguments`` are None for a call known only by its id.
    """

    id: str
    name: str | None
    arguments: str | None


def label(item: ContextItem) -> str:
    """Who said it: the role (``-`` if none), then the author name when it has one."""
    role = item.role or "-"
    name = item.name
    if not name:
        return role
    if len(name) <= _MAX_PLAIN and _PLAIN.fullmatch(name):
        return f"{role} ({name})"
    # A JSON string on one line, with no "|" (the compact format's field separator).
    quoted = json.dumps(name).replace("|", "\\u007c")
    return f"{role} ({quoted})"


def parse_label(text: str) -> tuple[str | None, str | None] | None:
    """``(role, name)`` of a label (role None for ``-``); None when it is not a label."""
    match = _LABEL.fullmatch(text)
    if match is None:
        return None
    role, name = match.group(1), match.group(2)
    if name is not None and name.startswith('"'):
        name = json.loads(name)
    return (None if role == "-" else role), name


def _token(value: str) -> str:
    return value if _TOKEN.fullmatch(value) else json.dumps(value)


def _calls(item: ContextItem) -> list[str]:
    payloads = item.metadata.get("tool_calls")
    by_id: dict[str, Mapping[str, Any]] = {}
    if isinstance(payloads, list):
        for call in payloads:
            if isinstance(call, Mapping) and isinstance(call.get("id"), str):
                by_id.setdefault(call["id"], call)
    shown: list[str] = []
    for call_id in item.tool_calls:
        call = by_id.get(call_id)
        function = call.get("function", call) if call is not None else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            shown.append(f"id={_token(call_id)}")
            continue
        raw = function.get("arguments", function.get("args", ""))
        arguments = canonical_arguments(raw)
        if parse_arguments(arguments) is None:  # not a JSON object: shown as the text it is
            arguments = json_line(arguments)
        shown.append(f"{_token(function['name'])}({arguments}) id={_token(call_id)}")
    return shown


def row_content(item: ContextItem, *, markers: bool = True) -> str:
    """The content of ``item``'s row: its text, image marks, and tool-call markers.

    With ``markers=False`` (the system prompt and the query, which are not rows) the text is
    not escaped; tool calls are still shown.
    """
    images = item.images
    text = item.text.strip()
    if images:
        text = (text + " " if text else "") + " ".join(["[image]"] * images)
    if markers:
        text = _MARKER.sub(r"\\\1[\2", text)
        if item.tool_call_id is not None:
            text = f"[result of {_token(item.tool_call_id)}]" + (" " + text if text else "")
    if item.tool_calls:
        text = (text + " " if text else "") + "[calls " + "; ".join(_calls(item)) + "]"
    return text


def split_row(content: str) -> tuple[str, tuple[RowCall, ...], str | None]:
    """Invert `row_content`: ``(text, tool calls, id of the call it answers)``."""
    answers: str | None = None
    if content.startswith("[result of "):
        answers, end = _read_token(content, len("[result of "))
        if not content.startswith("]", end):
            return _unmark(content), (), None
        content = content[end + 1 :].removeprefix(" ")
    calls: tuple[RowCall, ...] = ()
    found = _CALLS.search(content)
    if found is not None and content.endswith("]"):
        parsed = _read_calls(content, found.end())
        if parsed is not None:
            calls = parsed
            content = content[: found.start()]
    return _unmark(content), calls, answers


def _unmark(text: str) -> str:
    return _UNMARK.sub(r"\1[\2", text)


def _read_token(text: str, start: int) -> tuple[str, int]:
    if text.startswith('"', start):
        value, end = json.JSONDecoder().raw_decode(text, start)
        return str(value), end
    match = _TOKEN.match(text, start)
    if match is None:
        return "", start
    return match.group(0), match.end()


def _read_calls(text: str, start: int) -> tuple[RowCall, ...] | None:
    decoder = json.JSONDecoder()
    calls: list[RowCall] = []
    position = start
    try:
        while True:
            name: str | None = None
            arguments: str | None = None
            if not text.startswith("id=", position):
                name, position = _read_token(text, position)
                if not text.startswith("(", position):
                    return None
                value, position = decoder.raw_decode(text, position + 1)
                arguments = value if isinstance(value, str) else canonical_arguments(value)
                if not text.startswith(") id=", position):
                    return None
                position += 2
            call_id, position = _read_token(text, position + len("id="))
            calls.append(RowCall(call_id, name, arguments))
            if text.startswith("; ", position):
                position += 2
                continue
            return tuple(calls) if position == len(text) - 1 else None
    except ValueError:
        return None
