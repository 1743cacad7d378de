"""Reading a rendered context back: `parse_rendered` inverts the ``text`` and ``compact`` formats.

What it proves: content cannot forge structure. Every section, turn and date line of a
rendering is one the assembler put there, and each row's text is the item's text (see
`ctxbudget.render` for the escaping rules). Useful to test prompts, and to show what a model
was sent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from ctxbudget.errors import InvalidItemError
from ctxbudget.render import (
    _COMPACT_HEADERS,
    _DATED,
    _NAME,
    _TEXT_HEADERS,
    _UNESCAPE_LEAD,
    _UNESCAPE_LINES,
    SECTIONS,
    unescape_compact,
)

__all__ = ["ParsedRow", "parse_rendered"]


@dataclass(frozen=True, slots=True)
class ParsedRow:
    """One piece of a rendered context, read back by `parse_rendered`.

    ``section`` is one of ``system``, ``pinned``, ``tools``, ``summaries``, ``knowledge``,
    ``history``, ``query``; the whole system prompt is one row. ``role`` and ``name`` are the
    label of a turn or a knowledge entry (``role`` None: none given); ``date`` the date line
    it sits under.
    """

    section: str
    text: str
    role: str | None = None
    name: str | None = None
    date: str | None = None


_ROW_LABEL = re.compile(rf"(user|assistant|system|tool|-)(?: \(({_NAME})\))?")
_TEXT_ROW = re.compile(rf"{_ROW_LABEL.pattern}: (.*)", re.DOTALL)
_COMPACT_ROW = re.compile(rf"{_ROW_LABEL.pattern}\|(.*)", re.DOTALL)
_DATE_ROW = re.compile(r"\[([0-9]{4}-[0-9]{2}-[0-9]{2})\]")


def parse_rendered(rendered: str, fmt: Literal["text", "compact"]) -> list[ParsedRow]:
    r"""Read a ``text`` or ``compact`` rendering back into its sections and rows.

    The inverse of rendering: each row's text is the item's text as rendered before escaping
    (trimmed; images as ``[image]`` marks, tool calls as ``[calls ...]``). For the ``messages``
    format, parse the content of its system messages with ``fmt="text"``.

    Raises:
        InvalidItemError: ``rendered`` is not a rendering of this format (a ValueError).

    >>> parse_rendered("@history who|text\nuser (Ana)|hi\\nthere\n", "compact")
    [ParsedRow(section='history', text='hi\nthere', role='user', name='Ana', date=None)]
    """
    if fmt not in ("text", "compact"):
        msg = f"parse_rendered reads the 'text' and 'compact' formats, got {fmt!r}"
        raise InvalidItemError(msg)
    headers = _COMPACT_HEADERS if fmt == "compact" else _TEXT_HEADERS
    sections = {header[:-1]: section for section, header in headers.items()}
    lines = rendered.split("\n")
    rows: list[ParsedRow] = []
    section = "system"
    body: list[str] = []
    date: str | None = None
    for number, line in enumerate(lines):
        opened = sections.get(line)
        if opened is not None and SECTIONS.index(opened) > SECTIONS.index(section):
            _flush(rows, section, body, fmt)
            section, body, date = opened, [], None
            if section == "query":
                query = "\n".join(lines[number + 1 :])
                rows.append(ParsedRow("query", _UNESCAPE_LINES[fmt].sub("", query)))
                return rows
            continue
        if section == "system":
            body.append(line)
            continue
        if number == len(lines) - 1 and not line:
            break  # the line break that ends the last row
        dated = _DATE_ROW.fullmatch(line)
        if dated is not None and section in _DATED[fmt]:
            _flush(rows, section, body, fmt)
            body, date = [], dated.group(1)
            continue
        if fmt == "text" and line.startswith("  ") and body:
            body.append(line[2:])  # a continuation line
            continue
        _flush(rows, section, body, fmt)
        body = [line, date or ""]  # the row, then its date (taken off by _flush)
    _flush(rows, section, body, fmt)
    return rows


def _flush(rows: list[ParsedRow], section: str, body: list[str], fmt: str) -> None:
    """Append the row (or system prompt) collected in ``body``."""
    if not body:
        return
    if section == "system":
        text = "\n".join(body).removesuffix("\n")
        if text:
            rows.append(ParsedRow("system", _UNESCAPE_LINES[fmt].sub("", text)))
        return
    first, date, rest = body[0], body[1] or None, body[2:]
    role: str | None = None
    name: str | None = None
    if fmt == "compact":
        if section in ("pinned", "tools"):
            text = _strip_prefix(first, "- ", section)
        else:
            match = _COMPACT_ROW.fullmatch(first)
            if match is None:
                raise _not_rendered(section, first)
            role, name, text = match.group(1), match.group(2), match.group(3)
        text = unescape_compact(text)
    else:
        if section != "history":
            first = _strip_prefix(first, "- ", section)
        match = _TEXT_ROW.fullmatch(first) if section in _LABELLED else None
        if match is not None:
            role, name, first = match.group(1), match.group(2), match.group(3)
        elif section == "history":
            raise _not_rendered(section, first)
        elif section in ("knowledge", "summaries"):
            first = _UNESCAPE_LEAD.sub("", first)
        text = "\n".join([first, *rest])
    rows.append(ParsedRow(section, text, None if role == "-" else role, name, date))


_LABELLED = frozenset({"history", "knowledge", "summaries"})


def _strip_prefix(line: str, prefix: str, section: str) -> str:
    if not line.startswith(prefix):
        raise _not_rendered(section, line)
    return line[len(prefix) :]


def _not_rendered(section: str, line: str) -> InvalidItemError:
    msg = f"not a rendered context: line {line!r:.80} in the {section} section is not a row"
    return InvalidItemError(msg)
