"""The markup of the text formats: section headers, date lines, escaping, each item's row.

Content is escaped so that no row can pass for another (see `ctxbudget.core.readback`).
`row_fragment` writes the row of one item in its section (`ctxbudget.core.render` counts it).
"""

from __future__ import annotations

import functools
import json
import re
from datetime import UTC, datetime

from ctxbudget.core.items import ContextItem, Tier
from ctxbudget.core.rows import NAME_PATTERN, label, row_content

__all__ = [
    "BACKSLASH",
    "COMPACT_HEADERS",
    "DATED",
    "EARLIER",
    "EARLIER_PATTERN",
    "ESCAPE_LEAD",
    "MARKED",
    "SECTIONS",
    "SECTION_GROUPS",
    "SECTION_OF_TIER",
    "TEXT_HEADERS",
    "UNESCAPE_LEAD",
    "UNESCAPE_LINES",
    "date_label",
    "escape_compact",
    "escape_lines",
    "file_header",
    "indent_block",
    "parse_file_header",
    "row_fragment",
    "unescape_compact",
]


# Section names in render order, and which message (group) carries each in the messages format.
SECTIONS = ("system", "pinned", "tools", "files", "summaries", "knowledge", "history", "query")


SECTION_GROUPS = {
    "system": "prefix",
    "pinned": "prefix",
    "tools": "prefix",
    "files": "context",
    "summaries": "context",
    "knowledge": "context",
    "history": "history",
    "query": "query",
}


TEXT_HEADERS = {
    "pinned": "## Pinned facts\n",
    "tools": "## Tools\n",
    "files": "## Files\n",
    "summaries": "## Summaries of earlier context\n",
    "knowledge": "## Relevant context\n",
    "history": "## Conversation\n",
    "query": "## Current message\n",
}


COMPACT_HEADERS = {
    "pinned": "@pinned\n",
    "tools": "@tools\n",
    "files": "@files path|text\n",
    "summaries": "@summaries who|text\n",
    "knowledge": "@context who|text\n",
    "history": "@history who|text\n",
    "query": "@query\n",
}


SECTION_OF_TIER = {
    int(Tier.SYSTEM): "system",
    int(Tier.QUERY): "query",
    int(Tier.FILES): "files",
    int(Tier.PINNED): "pinned",
    int(Tier.TOOLS): "tools",
    int(Tier.RECENT): "history",
    int(Tier.SUMMARY): "summaries",
}


# Sections whose rows sit under date lines, per format (messages: history rows are messages).
DATED = {
    "messages": frozenset({"knowledge", "summaries"}),
    "text": frozenset({"knowledge", "summaries", "history"}),
    "compact": frozenset({"knowledge", "summaries", "history"}),
}


# After the label of an item a newer one restates (`ContextItem.newer`), in the knowledge and
# summary sections: ``user (Ana) [earlier; see newer]|I live in Lisbon``.
EARLIER = " [earlier; see newer]"
EARLIER_PATTERN = re.escape(EARLIER)
MARKED = frozenset({"knowledge", "summaries"})  # where an earlier item's row is marked


# Characters a model (or a tokenizer) may read as a line break.
_LINE_BREAKS = re.compile(r"\r\n|[\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


_COMPACT_ESCAPES = re.compile(r"[\\|\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


_COMPACT_TEXT_ESCAPES = re.compile(r"[\\\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


_ESCAPE_MAP = {"\\": "\\\\", "|": "\\|", "\n": "\\n", "\r": "\\r"}


# What a line must not look like unless it is structure: a header, a date line, a turn's label.
_BREAK = r"[\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]"


_SPACE = r"[^\S\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]*"


_EOL = rf"{_SPACE}(?={_BREAK}|\Z)"


_ROLE_LABEL = rf"(?i:user|assistant|system|tool|-)(?: \({NAME_PATTERN}\))?(?:{EARLIER_PATTERN})?"


_TEXT_STRUCTURE = (
    rf"{_SPACE}(?:(?i:{'|'.join(re.escape(h.rstrip()) for h in TEXT_HEADERS.values())}){_EOL}"
    rf"|\[[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}\]{_EOL}|{_ROLE_LABEL}:(?: |{_EOL}))"
)


_COMPACT_STRUCTURE = rf"{_SPACE}(?:@|\[[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}\]{_EOL}|{_ROLE_LABEL}\|)"


BACKSLASH = "\\\\"  # a re.sub replacement: one backslash


_LINE_START = rf"(?:\A|(?<={_BREAK}))"


_ESCAPE_LINES = {
    "text": re.compile(rf"{_LINE_START}(?=\\*{_TEXT_STRUCTURE})"),
    "compact": re.compile(rf"{_LINE_START}(?=\\*{_COMPACT_STRUCTURE})"),
}


UNESCAPE_LINES = {
    "text": re.compile(rf"{_LINE_START}\\(?=\\*{_TEXT_STRUCTURE})"),
    "compact": re.compile(rf"{_LINE_START}\\(?=\\*{_COMPACT_STRUCTURE})"),
}


ESCAPE_LEAD = re.compile(rf"\A(?=\\*{_TEXT_STRUCTURE})")


UNESCAPE_LEAD = re.compile(rf"\A\\(?=\\*{_TEXT_STRUCTURE})")


def _escape_char(match: re.Match[str]) -> str:
    char = match.group(0)
    return _ESCAPE_MAP.get(char) or f"\\u{ord(char):04x}"


def escape_compact(text: str, *, field: bool = False) -> str:
    r"""Escape text for one compact line: backslash, line breaks (and ``|`` in a field).

    >>> escape_compact("a\nb|c")
    'a\\nb|c'
    >>> escape_compact("x|y", field=True)
    'x\\|y'
    """
    pattern = _COMPACT_ESCAPES if field else _COMPACT_TEXT_ESCAPES
    return pattern.sub(_escape_char, text)


_UNESCAPE = re.compile(r"\\(u[0-9a-f]{4}|.)")


def unescape_compact(text: str) -> str:
    r"""Invert `escape_compact`.

    >>> unescape_compact(escape_compact("line one\nline two \\ end"))
    'line one\nline two \\ end'
    """

    def _one(match: re.Match[str]) -> str:
        code = match.group(1)
        if code.startswith("u") and len(code) == 5:
            return chr(int(code[1:], 16))
        return {"n": "\n", "r": "\r"}.get(code, code)

    return _UNESCAPE.sub(_one, text)


def escape_lines(text: str, fmt: str) -> str:
    """A backslash before each line that would read as structure (system prompt, query)."""
    return _ESCAPE_LINES[fmt].sub(BACKSLASH, text)


def indent_block(text: str) -> str:
    """One fragment body: line breaks become an indented continuation; never starts blank."""
    return _LINE_BREAKS.sub("\n  ", text.strip())


# A file's row opens with its path: as written when it is plain (no quote, backslash, "|",
# control character, lone surrogate, and spaces only between words), else as a JSON string.
_FILE_MARK = "###"
_PLAIN_PATH = re.compile(
    r"[^\s\"\\|\x00-\x1f\x7f\ud800-\udfff]+(?: [^\s\"\\|\x00-\x1f\x7f\ud800-\udfff]+)*"
)


def file_header(path: str | None) -> str:
    r"""The line that opens a file's row: ``###``, then its path when it has one.

    >>> file_header("src/app.py"), file_header('odd "name"|x')
    ('### src/app.py', '### "odd \\"name\\"\\u007cx"')
    """
    if not path:
        return _FILE_MARK
    if _PLAIN_PATH.fullmatch(path):
        return f"{_FILE_MARK} {path}"
    quoted = json.dumps(path).replace("|", "\\u007c").replace("\x7f", "\\u007f")
    return f"{_FILE_MARK} {quoted}"


def parse_file_header(line: str) -> tuple[bool, str | None]:
    """Invert `file_header`: ``(True, path)`` (path None: none given), ``(False, None)`` if not one.

    >>> parse_file_header(file_header('odd "name"|x'))
    (True, 'odd "name"|x')
    """
    if line == _FILE_MARK:
        return True, None
    if not line.startswith(_FILE_MARK + " "):
        return False, None
    label = line[len(_FILE_MARK) + 1 :]
    if not label.startswith('"'):
        return bool(_PLAIN_PATH.fullmatch(label)), label
    try:
        path = json.loads(label)
    except ValueError:
        return False, None
    return isinstance(path, str), path if isinstance(path, str) else None


@functools.lru_cache(maxsize=65_536)
def date_label(timestamp: float | None) -> str:
    """The date of a timestamp as ``YYYY-MM-DD`` (UTC); empty for None or an impossible one."""
    if timestamp is None:
        return ""
    try:
        return datetime.fromtimestamp(timestamp, tz=UTC).strftime("%Y-%m-%d")
    except (OverflowError, OSError, ValueError):
        return ""


def row_fragment(item: ContextItem, section: str, fmt: str) -> str:
    r"""The text ``item`` contributes in ``section`` of format ``fmt`` (uncached; see `Layout`).

    >>> row_fragment(ContextItem("k1", "I live\nin Lisbon", role="user"), "knowledge", "compact")
    'user|I live\\nin Lisbon\n'
    """
    if fmt == "messages" and section in ("history", "query"):
        return item.text  # a message of its own: content verbatim
    lines = "compact" if fmt == "compact" else "text"
    if section == "system":
        body = escape_lines(row_content(item, markers=False), lines)
        return body + "\n" if body else ""
    if section == "query" and fmt != "messages":
        # Last fragment of the text, after its header.
        return escape_lines(row_content(item, markers=False), lines)
    if section == "files":  # its path opens the row; the content follows, indented
        header = file_header(item.name)
        if fmt == "compact":
            return f"{header}|{escape_compact(row_content(item))}\n"
        body = indent_block(row_content(item))
        return f"{header}\n  {body}\n" if body else f"{header}\n"
    # An item a newer one restates is marked after its label (`ctxbudget.core.newer`).
    mark = EARLIER if item.newer and section in MARKED else ""
    if fmt == "compact":
        text = escape_compact(row_content(item))
        if section in ("pinned", "tools"):
            return f"- {text}\n"
        return f"{label(item)}{mark}|{text}\n"  # a label holds no "|", backslash or break
    body = indent_block(row_content(item))
    if section == "history":
        return f"{label(item)}: {body}\n"
    if section in MARKED:
        if item.role or mark:
            return f"- {label(item)}{mark}: {body}\n"
        return f"- {ESCAPE_LEAD.sub(BACKSLASH, body)}\n"
    return f"- {body}\n"
