r"""Which paths a folder's ``.gitignore`` files ignore, decided the way git decides it.

The rules of gitignore(5), all of them:

- a blank line matches nothing; a line starting with ``#`` is a comment (``\#`` for a literal
  ``#``); trailing spaces are dropped unless escaped (``\ ``); a trailing ``\r`` too;
- ``!`` re-includes what an earlier pattern excluded (``\!`` for a literal ``!``), except a path
  inside an excluded directory: git never looks inside it, so nothing there comes back;
- a trailing ``/`` matches directories only (``build/``);
- a ``/`` at the start or in the middle anchors the pattern to the folder of its
  ``.gitignore`` (``/todo.txt``, ``doc/*.txt``); without one it matches a name at any depth;
- ``*`` matches anything but ``/``, ``?`` one character but ``/``, ``[a-z]``, ``[!0-9]``,
  ``[^x]`` and ``[[:alpha:]]`` one character of a set (never ``/``); ``\`` escapes the next
  character; a bracket that is never closed, an unknown class or a trailing ``\`` make the
  pattern match nothing, as git's wildmatch does;
- ``**/x`` matches ``x`` in any folder, ``x/**`` everything inside ``x``, ``a/**/b`` zero or more
  folders between; ``**`` elsewhere is an ordinary ``*``;
- within one file the last matching pattern wins; a ``.gitignore`` deeper in the tree wins over
  one above it, and every ``.gitignore`` over ``.git/info/exclude``.

`GitIgnore.for_folder` reads the ``.gitignore`` of each folder as the walk reaches it, and those
of the folders between the repository's top (the nearest folder above with a ``.git``) and the
folder itself; patterns passed as ``extra`` win over all of them (like git's command line).
The user's global excludes file (``core.excludesFile``) is not read. Matching is case-sensitive
(git's default on Linux). A symlinked ``.gitignore`` (git 2.32 and later ignore those too) and
one over `MAX_IGNORE_BYTES` are not read: `GitIgnore.unread`, skipped by `folder_items`.

>>> rules = GitIgnore({"": "*.log\n!keep.log\nbuild/\n", "src": "/gen\n"})
>>> tuple(rules.ignored(p, is_dir=d) for p, d in [("a.log", False), ("keep.log", False),
...     ("x/build", True), ("x/build", False), ("src/gen", True), ("gen", True)])
(True, False, True, False, True, False)
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ctxbudget.sources.ignore_files import MAX_IGNORE_BYTES, read_ignore_file

__all__ = [
    "DEFAULT_IGNORE",
    "MAX_IGNORE_BYTES",
    "GitIgnore",
    "IgnorePattern",
    "parse_pattern",
    "translate",
]


DEFAULT_IGNORE = (".git/",)
"""What a folder listing leaves out besides its ``.gitignore`` files: git's own folder."""

_CLASSES = {
    "alnum": "a-zA-Z0-9",
    "alpha": "a-zA-Z",
    "blank": " \\t",
    "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9",
    "graph": "\\x21-\\x7e",
    "lower": "a-z",
    "print": "\\x20-\\x7e",
    "punct": "!-/:-@\\[-`{-~",
    "space": " \\t\\n\\r\\x0b\\x0c",
    "upper": "A-Z",
    "xdigit": "0-9A-Fa-f",
}


@dataclass(frozen=True, slots=True)
class IgnorePattern:
    r"""One pattern of a ``.gitignore``, compiled.

    Attributes:
        text: the pattern as written (trailing spaces and ``\r`` removed).
        regex: what it matches (None: nothing, e.g. an unclosed ``[``).
        negated: a ``!`` pattern (re-includes).
        directory_only: a ``dir/`` pattern.
        anchored: matched against the path from its ``.gitignore``'s folder, not the name.
    """

    text: str
    regex: re.Pattern[str] | None
    negated: bool
    directory_only: bool
    anchored: bool

    def matches(self, path: str, *, is_dir: bool) -> bool:
        """Whether it matches ``path`` (relative to its ``.gitignore``'s folder, POSIX)."""
        if self.regex is None or (self.directory_only and not is_dir):
            return False
        subject = path if self.anchored else path.rpartition("/")[2]
        return self.regex.fullmatch(subject) is not None


def parse_pattern(line: str) -> IgnorePattern | None:
    r"""One line of a ``.gitignore`` as a pattern; None for a blank line or a comment.

    >>> p = parse_pattern("!/doc/**/*.txt")
    >>> p.negated, p.anchored, p.matches("doc/a/b.txt", is_dir=False)
    (True, True, True)
    """
    line = line.removesuffix("\n").removesuffix("\r")
    if not line or line.startswith("#"):
        return None
    line = _trim_trailing_spaces(line)
    if not line:
        return None
    text = line
    negated = line.startswith("!")
    if negated:
        line = line[1:]
    directory_only = line.endswith("/")
    if directory_only:  # one slash only, as git: "a//" is "a/" for directories (never matches)
        line = line[:-1]
    if not line:
        return None
    anchored = "/" in line
    line = line.removeprefix("/")
    regex = translate(line)
    return IgnorePattern(text, regex, negated, directory_only, anchored)


def _trim_trailing_spaces(line: str) -> str:
    """Drop trailing spaces that are not escaped with a backslash."""
    end = len(line)
    index = 0
    cut: int | None = None
    while index < end:
        char = line[index]
        if char == "\\":
            index += 2
            cut = None
            continue
        if char == " ":
            if cut is None:
                cut = index
        else:
            cut = None
        index += 1
    return line if cut is None else line[:cut]


def translate(pattern: str) -> re.Pattern[str] | None:
    """A gitignore glob (without ``!``, leading or trailing ``/``) as a regex; None: nothing.

    >>> translate("a/**/b*").pattern
    'a/(?:.*/)?b[^/]*'
    """
    parts = _components(pattern)
    if parts is None:
        return None
    if parts == ["**"]:
        return re.compile(".*", re.DOTALL)
    out: list[str] = []
    separator = ""  # what must come before the next component: "/" once one was written
    for index, part in enumerate(parts):
        if part == "**":
            # Zero or more folders (the whole rest when last): never the start of a name.
            out.append(separator + (".+" if index == len(parts) - 1 else "(?:.*/)?"))
            separator = ""
            continue
        piece = _translate_part(part)
        if piece is None:
            return None
        out.append(separator + piece)
        separator = "/"
    return re.compile("".join(out), re.DOTALL)


def _components(pattern: str) -> list[str] | None:
    """The pattern split at each ``/`` outside a bracket (``[a/c]`` is one component)."""
    parts: list[str] = []
    start = index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            index += 2
            continue
        if char == "[":
            bracket = _bracket(pattern, index + 1)
            if bracket is None:
                return None
            index = bracket[1]
            continue
        if char == "/":
            parts.append(pattern[start:index])
            start = index + 1
        index += 1
    parts.append(pattern[start:])
    return parts


def _translate_part(part: str) -> str | None:
    """One path component: ``*``, ``?``, brackets and escapes; None if it matches nothing."""
    out: list[str] = []
    index = 0
    while index < len(part):
        char = part[index]
        if char == "*":
            while index < len(part) and part[index] == "*":
                index += 1
            out.append("[^/]*")
            continue
        if char == "?":
            out.append("[^/]")
        elif char == "[":
            bracket = _bracket(part, index + 1)
            if bracket is None:
                return None
            expression, index = bracket
            out.append(expression)
            continue
        elif char == "\\":
            if index + 1 >= len(part):
                return None  # a trailing backslash: git's wildmatch matches nothing
            index += 1
            out.append(re.escape(part[index]))
        else:
            out.append(re.escape(char))
        index += 1
    return "".join(out)


def _bracket(part: str, index: int) -> tuple[str, int] | None:
    """The regex of a bracket expression opened before ``index``, and where it ends."""
    negated = index < len(part) and part[index] in "!^"
    if negated:
        index += 1
    members: list[str] = []
    start = index
    while True:
        if index >= len(part):
            return None  # never closed
        char = part[index]
        if char == "]" and index > start:
            index += 1
            break
        if char == "[" and part.startswith("[:", index):
            end = part.find(":]", index + 2)
            if end < 0:
                return None
            name = part[index + 2 : end]
            if name not in _CLASSES:
                return None
            members.append(_CLASSES[name])
            index = end + 2
            continue
        if char == "\\":
            index += 1
            if index >= len(part):
                return None
            char = part[index]
        low = char
        index += 1
        if part.startswith("-", index) and index + 1 < len(part) and part[index + 1] != "]":
            high = part[index + 1]
            index += 2
            if high == "\\":
                if index >= len(part):
                    return None
                high = part[index]
                index += 1
            if low <= high:  # a reversed range is empty, as in git
                members.append(f"{re.escape(low)}-{re.escape(high)}")
            continue
        members.append(re.escape(low))
    body = "".join(members)
    if negated:
        return f"[^/{body}]", index
    return (f"(?!/)[{body}]" if body else "(?!)"), index


@dataclass(frozen=True, slots=True)
class _Rules:
    """The patterns of one ignore file and the folder (from the top, POSIX) they apply below."""

    base: str
    patterns: tuple[IgnorePattern, ...]

    def decide(self, path: str, *, is_dir: bool) -> bool | None:
        """True: ignored; False: re-included; None: no pattern matches."""
        if self.base:
            if not path.startswith(self.base + "/"):
                return None
            path = path[len(self.base) + 1 :]
        for pattern in reversed(self.patterns):
            if pattern.matches(path, is_dir=is_dir):
                return not pattern.negated
        return None


def _parse(text: str, base: str) -> _Rules:
    patterns = (parse_pattern(line) for line in text.split("\n"))
    return _Rules(base, tuple(p for p in patterns if p is not None))


class GitIgnore:
    """The ignore rules of a folder tree: a ``.gitignore`` per folder, plus extra patterns.

    Args:
        files: the text of each folder's ``.gitignore``, by folder (POSIX, ``""`` for the top);
            or a function that returns it (None: that folder has none), called once per folder.
        extra: patterns that win over every file (as if given on git's command line).
        exclude: the text of ``.git/info/exclude`` (below every ``.gitignore``).
        prefix: where the listed folder sits below the top the files are relative to (paths
            given to `ignored` are relative to the listed folder).
    """

    def __init__(
        self,
        files: Mapping[str, str] | Callable[[str], str | None] | None = None,
        *,
        extra: Sequence[str] = (),
        exclude: str = "",
        prefix: str = "",
    ) -> None:
        if files is None:
            files = {}
        self._load: Callable[[str], str | None] = files.get if isinstance(files, Mapping) else files
        self._prefix = prefix.strip("/")
        self._extra = _parse("\n".join(extra), "")
        self._exclude = _parse(exclude, "")
        self._chains: dict[str, tuple[_Rules, ...]] = {}
        self.unread: list[tuple[str, str]] = []
        """Ignore files found but not applied, as ``(path, why)`` (see `for_folder`)."""

    @classmethod
    def for_folder(cls, root: str | Path, *, extra: Sequence[str] = DEFAULT_IGNORE) -> GitIgnore:
        """The rules git applies inside ``root``.

        Its ``.gitignore`` files, those above it up to the repository's top (the nearest
        folder above with a ``.git``), and ``.git/info/exclude``; ``extra`` wins over them all.
        As git, a ``.gitignore`` that is a symlink is not followed (wherever it points); one
        larger than `MAX_IGNORE_BYTES` is not read. Both are listed in `unread` with why.
        """
        folder = Path(root).absolute()
        top = next((p for p in (folder, *folder.parents) if (p / ".git").exists()), folder)
        unread: list[tuple[str, str]] = []
        exclude = None
        if (top / ".git").is_dir():
            path = top / ".git" / "info" / "exclude"
            exclude = read_ignore_file(path, os.path.relpath(path, folder), unread, follow=True)

        def load(base: str) -> str | None:
            path = top / base / ".gitignore" if base else top / ".gitignore"
            return read_ignore_file(
                path, Path(os.path.relpath(path, folder)).as_posix(), unread, follow=False
            )

        prefix = folder.relative_to(top).as_posix()
        rules = cls(
            load, extra=extra, exclude=exclude or "", prefix="" if prefix == "." else prefix
        )
        rules.unread = unread
        return rules

    def _chain(self, folder: str) -> tuple[_Rules, ...]:
        """The rules that apply in ``folder`` (from the top), lowest precedence first."""
        chain = self._chains.get(folder)
        if chain is None:
            parent = folder.rpartition("/")[0] if folder else None
            above = (self._exclude,) if parent is None else self._chain(parent)
            text = self._load(folder)
            chain = (*above, _parse(text, folder)) if text else above
            self._chains[folder] = chain
        return chain

    def _full(self, path: str) -> str:
        return f"{self._prefix}/{path}" if self._prefix else path

    def decides(self, path: str, *, is_dir: bool) -> bool:
        """Whether ``path`` is ignored by the patterns alone, its parent folders not checked.

        What a walk that never enters an ignored folder asks of each entry it finds.
        """
        full = self._full(path)
        verdict = self._extra.decide(full, is_dir=is_dir) if self._extra.patterns else None
        if verdict is not None:
            return verdict
        folder = full.rpartition("/")[0]
        for rules in reversed(self._chain(folder)):
            verdict = rules.decide(full, is_dir=is_dir)
            if verdict is not None:
                return verdict
        return False

    def ignored(self, path: str, *, is_dir: bool) -> bool:
        """Whether git ignores ``path`` (relative to the listed folder, POSIX).

        Ignored when the path itself is, or one of its folders below the listed one.
        """
        parts = path.strip("/").split("/")
        for depth in range(1, len(parts)):
            if self.decides("/".join(parts[:depth]), is_dir=True):
                return True
        return self.decides("/".join(parts), is_dir=is_dir)
