"""Reading a rendered context back: `parse_rendered` inverts the ``text`` and ``compact`` formats.

What it proves: content cannot forge structure. Every section, turn and date line of a
rendering is one the assembler put there, and each row's text is the item's text (see
`ctxbudget.core.render` for the escaping rules). Useful to test prompts, and to show what a model
was sent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from ctxbudget.core.markup import (
    COMPACT_HEADERS,
    DATED,
    EARLIER_PATTERN,
    SECTIONS,
    TEXT_HEADERS,
    UNESCAPE_LEAD,
    UNESCAPE_LINES,
    parse_file_header,
    unescape_compact,
)
from ctxbudget.core.rows import LABEL_PATTERN, RowCall, parse_label, split_row
from ctxbudget.errors import InvalidItemError

__all__ = ["ParsedRow", "RowCall", "parse_rendered"]


@dataclass(frozen=True, slots=True)
class ParsedRow:
    """One piece of a rendered context, read back by `parse_rendered`.

    ``section`` is one of ``system``, ``pinned``, ``tools``, ``files``, ``summaries``,
    ``knowledge``, ``history``, ``query``; the whole system prompt is one row. ``role`` and
    ``name`` are the label of a turn or a knowledge entry (``role`` None: none given), and
    ``name`` a file's path; ``date`` the date line it sits under; ``tool_calls`` the calls an
    assistant turn makes and ``tool_call_id`` the call a tool result answers; ``earlier``
    that a newer row restates it (marked ``[earlier; see newer]`` after its label,
    `ctxbudget.core.newer`). Each query is a row of its own.
    """

    section: str
    text: str
    role: str | None = None
    name: str | None = None
    date: str | None = None
    tool_calls: tuple[RowCall, ...] = ()
    tool_call_id: str | None = None
    earlier: bool = False


_TEXT_ROW = re.compile(rf"({LABEL_PATTERN})({EARLIER_PATTERN})?: (.*)", re.DOTALL)
_COMPACT_ROW = re.compile(rf"({LABEL_PATTERN})({EARLIER_PATTERN})?\|(.*)", re.DOTALL)
_DATE_ROW = re.compile(r"\[([0-9]{4}-[0-9]{2}-[0-9]{2})\]")


def parse_rendered(rendered: str, fmt: Literal["text", "compact"]) -> list[ParsedRow]:
    r"""Read a ``text`` or ``compact`` rendering back into its sections and rows.

    The inverse of rendering: each row's text is the item's text as rendered before escaping
    (trimmed; images as ``[image]`` marks), its label, and its tool calls. For the ``messages``
    format, parse the content of its system messages with ``fmt="text"``.

    Raises:
        InvalidItemError: ``rendered`` is not a rendering of this format (a ValueError).

    >>> rows = parse_rendered("@history who|text\nuser (Ana)|hi\\nthere\n", "compact")
    >>> rows[0].section, rows[0].role, rows[0].name, rows[0].text
    ('history', 'user', 'Ana', 'hi\nthere')
    """
    if fmt not in ("text", "compact"):
        msg = f"parse_rendered reads the 'text' and 'compact' formats, got {fmt!r}"
        raise InvalidItemError(msg)
    headers = COMPACT_HEADERS if fmt == "compact" else TEXT_HEADERS
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
                # Several queries are separated by the header again (a query line that reads
                # as a header was escaped).
                header = headers["query"][:-1]
                query: list[str] = []
                for rest in [*lines[number + 1 :], header]:
                    if rest != header:
                        query.append(rest)
                        continue
                    text = "\n".join(query)
                    rows.append(ParsedRow("query", UNESCAPE_LINES[fmt].sub("", text)))
                    query = []
                return rows
            continue
        if section == "system":
            body.append(line)
            continue
        if number == len(lines) - 1 and not line:
            break  # the line break that ends the last row
        dated = _DATE_ROW.fullmatch(line)
        if dated is not None and section in DATED[fmt]:
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
            rows.append(ParsedRow("system", UNESCAPE_LINES[fmt].sub("", text)))
        return
    first, date, rest = body[0], body[1] or None, body[2:]
    role: str | None = None
    name: str | None = None
    earlier = False
    if section == "files":
        name, text = _file_row(first, rest, fmt)
    elif fmt == "compact":
        if section in ("pinned", "tools"):
            text = _strip_prefix(first, "- ", section)
        else:
            match = _COMPACT_ROW.fullmatch(first)
            if match is None:
                raise _not_rendered(section, first)
            role, name = _label(match.group(1))
            earlier = match.group(2) is not None
            text = match.group(3)
        text = unescape_compact(text)
    else:
        if section != "history":
            first = _strip_prefix(first, "- ", section)
        match = _TEXT_ROW.fullmatch(first) if section in _LABELLED else None
        if match is not None:
            role, name = _label(match.group(1))
            earlier = match.group(2) is not None
            first = match.group(3)
        elif section == "history":
            raise _not_rendered(section, first)
        elif section in ("knowledge", "summaries"):
            first = UNESCAPE_LEAD.sub("", first)
        text = "\n".join([first, *rest])
    text, calls, answers = split_row(text)
    rows.append(ParsedRow(section, text, role, name, date, calls, answers, earlier))


_FILES = "files"


def _file_row(first: str, rest: list[str], fmt: str) -> tuple[str | None, str]:
    """A file's path and text: its header line, then (text) its indented lines."""
    if fmt == "compact":
        header, separator, text = first.partition("|")
        is_header, path = parse_file_header(header)
        if not (is_header and separator):
            raise _not_rendered(_FILES, first)
        return path, unescape_compact(text)
    is_header, path = parse_file_header(first)
    if not is_header:
        raise _not_rendered(_FILES, first)
    return path, "\n".join(rest)


def _label(text: str) -> tuple[str | None, str | None]:
    parsed = parse_label(text)
    if parsed is None:  # the row pattern matched a label: parse_label takes it
        return None, None
    return parsed


_LABELLED = frozenset({"history", "knowledge", "summaries"})


def _strip_prefix(line: str, prefix: str, section: str) -> str:
    if not line.startswith(prefix):
        raise _not_rendered(section, line)
    return line[len(prefix) :]


def _not_rendered(section: str, line: str) -> InvalidItemError:
    msg = f"not a rendered context: line {line!r:.80} in the {section} section is not a row"
    return InvalidItemError(msg)
