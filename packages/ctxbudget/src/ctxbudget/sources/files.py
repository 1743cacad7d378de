"""Files as context items: what a user put in front of a coding assistant.

A file becomes a `ContextItem` of tier ``Tier.FILES`` (just below the query, above pinned
facts) whose ``name`` is its path: every format shows that path as the header of the file's
content, in a ``Files`` section of its own. When a file does not fit whole it is cut at line
boundaries (``Shrink.LINES_HEAD_TAIL`` by default: its first and last lines, with a marker
naming the lines left out, counted in the budget); the report lists it as truncated and the
included item carries ``metadata["elided"]`` (`ctxbudget.core.lines.LineCut.as_metadata`).

- `file_item`: one file; raises `ConfigurationError` when it cannot be used.
- `file_items`: several files; those that cannot be used are reported, not raised.
- `folder_items`: the files of a folder, minus what its ``.gitignore`` files ignore.

Reading is bounded (``max_bytes`` per file, ``max_files`` per folder) and never leaves the
folder given as ``root`` (see `ctxbudget.sources.reading`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ctxbudget.core.items import ContextItem, Shrink, Tier
from ctxbudget.errors import ConfigurationError
from ctxbudget.sources.gitignore import DEFAULT_IGNORE, GitIgnore
from ctxbudget.sources.reading import (
    DEFAULT_MAX_BYTES,
    FileText,
    SkippedFile,
    SkipReason,
    check_encoding,
    locate,
    read_text_file,
)
from ctxbudget.sources.walk import Folder

__all__ = ["FileItems", "file_item", "file_items", "folder_items"]

PathLike = str | os.PathLike[str]


@dataclass(frozen=True, slots=True)
class FileItems:
    """The items made of several files, and the files left out with their reasons.

    Attributes:
        items: one `ContextItem` per file, in order.
        skipped: the files that could not be used (binary, unreadable, outside the folder...).
        complete: False when ``max_files`` stopped the walk of a folder before its end.
    """

    items: tuple[ContextItem, ...]
    skipped: tuple[SkippedFile, ...] = ()
    complete: bool = True


def _options(max_bytes: int, encoding: str) -> None:
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
        msg = f"max_bytes must be a positive number of bytes, got {max_bytes!r}"
        raise ConfigurationError(msg)
    check_encoding(encoding)


def _item(
    read: FileText, *, id: str | None, tier: int, score: float, shrink: Shrink
) -> ContextItem:
    lines = read.text.count("\n") + (0 if read.text.endswith("\n") or not read.text else 1)
    return ContextItem(
        id=id or f"file:{read.path}",
        text=read.text,
        tier=tier,
        score=score,
        name=read.path,
        source="file",
        shrink=shrink,
        metadata={
            "path": read.path,
            "bytes": read.size,
            "bytes_read": read.read,
            "lines": lines,
            "partial": read.partial,
        },
    )


def file_item(
    path: PathLike,
    *,
    root: PathLike | None = None,
    id: str | None = None,  # noqa: A002 - the name ContextItem uses
    tier: int = Tier.FILES,
    score: float = 1.0,
    shrink: Shrink = Shrink.LINES_HEAD_TAIL,
    max_bytes: int = DEFAULT_MAX_BYTES,
    encoding: str = "utf-8",
) -> ContextItem:
    r"""One file as a context item, shown under its path.

    Args:
        path: the file (relative to ``root`` when one is given).
        root: the folder the file must be inside (symlinks resolved); its path is then shown
            relative to it. None: the path is shown as given and may be anywhere.
        id: the item's id (default ``"file:<path as shown>"``).
        tier: its tier. The ``Files`` section, with the path as a header, holds
            ``Tier.FILES``; at another tier the content renders as knowledge, without the path.
            Rank files among themselves with ``score``.
        score: its value among the files (when not all fit, the total is maximized).
        shrink: how it may shrink: ``LINES_HEAD_TAIL`` (first and last lines), ``LINES``
            (first lines), ``DROP`` (whole or not at all) or ``NEVER`` (always sent).
        max_bytes: the most bytes read; a longer file keeps its first whole lines and a line
            saying how much was not read.
        encoding: its text encoding (undecodable bytes become U+FFFD).

    Raises:
        ConfigurationError: the file is missing, unreadable, binary, not a regular file or
            outside ``root`` (the message says which, and what to do).

    >>> import pathlib, tempfile
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "app.py").write_text("print('hi')\n")
    >>> item = file_item("app.py", root=folder)
    >>> item.id, item.name, item.tier.name, item.text
    ('file:app.py', 'app.py', 'FILES', "print('hi')\n")
    """
    _options(max_bytes, encoding)
    full, shown = locate(path, root)
    read = read_text_file(full, shown, root=root, max_bytes=max_bytes, encoding=encoding)
    if isinstance(read, SkippedFile):
        raise ConfigurationError(read.message.replace(" was left out ", " cannot be used ", 1))
    return _item(read, id=id, tier=tier, score=score, shrink=shrink)


def file_items(
    paths: Iterable[PathLike],
    *,
    root: PathLike | None = None,
    tier: int = Tier.FILES,
    score: float = 1.0,
    shrink: Shrink = Shrink.LINES_HEAD_TAIL,
    max_bytes: int = DEFAULT_MAX_BYTES,
    encoding: str = "utf-8",
) -> FileItems:
    r"""Several files as context items; those that cannot be used are listed in ``skipped``.

    Each path is read once (the first time it is given). Options as in `file_item`.

    >>> import pathlib, tempfile
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "a.txt").write_text("alpha\n")
    >>> found = file_items(["a.txt", "gone.txt"], root=folder)
    >>> [it.id for it in found.items], [s.reason.value for s in found.skipped]
    (['file:a.txt'], ['missing'])
    """
    if isinstance(paths, str | bytes | os.PathLike):
        msg = "paths must be a list of paths, not one path; use file_item for a single file"
        raise ConfigurationError(msg)
    _options(max_bytes, encoding)
    items: list[ContextItem] = []
    skipped: list[SkippedFile] = []
    seen: set[str] = set()
    for path in paths:
        full, shown = locate(path, root)
        if shown in seen:
            continue
        seen.add(shown)
        read = read_text_file(full, shown, root=root, max_bytes=max_bytes, encoding=encoding)
        if isinstance(read, SkippedFile):
            skipped.append(read)
            continue
        items.append(_item(read, id=None, tier=tier, score=score, shrink=shrink))
    return FileItems(tuple(items), tuple(skipped))


def folder_items(
    root: PathLike,
    *,
    include: Sequence[str] = (),
    gitignore: bool = True,
    ignore: Sequence[str] = DEFAULT_IGNORE,
    max_depth: int | None = None,
    max_files: int = 100,
    tier: int = Tier.FILES,
    score: float = 1.0,
    shrink: Shrink = Shrink.LINES_HEAD_TAIL,
    max_bytes: int = DEFAULT_MAX_BYTES,
    encoding: str = "utf-8",
) -> FileItems:
    """The text files of a folder as context items, paths shown relative to it.

    Args:
        root: the folder.
        include: which files, as gitignore-style patterns (``"*.py"`` at any depth,
            ``"src/**/*.ts"`` anchored, ``"!*_test.py"`` to take some back); empty: all.
        gitignore: leave out what its ``.gitignore`` files ignore (see
            `ctxbudget.sources.gitignore`).
        ignore: patterns left out whatever the files say (default: ``.git/``).
        max_depth: the deepest level read (1: the folder's own files); None: no limit.
        max_files: the most files made into items; the walk stops there (``complete`` False).
        tier: as in `file_item`.
        score: as in `file_item`.
        shrink: as in `file_item`.
        max_bytes: as in `file_item`.
        encoding: as in `file_item`.

    Returns:
        The items in walk order (depth first, a folder's files before its subfolders, by
        name); in ``skipped``, with why: binary and unreadable files, FIFOs, sockets and
        devices (never opened), symlinks that leave the folder, and ``.gitignore`` files
        not applied (symlinks, which git does not follow either, or larger than
        `ctxbudget.sources.gitignore.MAX_IGNORE_BYTES`).

    Raises:
        ConfigurationError: ``root`` is not a folder, or an option is out of range.
    """
    _options(max_bytes, encoding)
    if isinstance(max_files, bool) or not isinstance(max_files, int) or max_files < 1:
        msg = f"max_files must be a positive number of files, got {max_files!r}"
        raise ConfigurationError(msg)
    if max_depth is not None and (isinstance(max_depth, bool) or max_depth < 1):
        msg = f"max_depth must be 1 or more (or None: no limit), got {max_depth!r}"
        raise ConfigurationError(msg)
    if isinstance(include, str):
        msg = f"include must be a list of patterns, not one string; pass [{include!r}]"
        raise ConfigurationError(msg)
    folder = Folder(root, gitignore=gitignore, ignore=ignore)
    wanted = GitIgnore(extra=tuple(include)) if include else None
    items: list[ContextItem] = []
    skipped: list[SkippedFile] = []
    errors: list[tuple[str, str]] = []
    complete = True
    for entry in folder.files(max_depth=max_depth, errors=errors):
        if wanted is not None and not wanted.decides(entry.path, is_dir=False):
            continue
        if len(items) >= max_files:
            complete = False
            break
        full, shown = locate(entry.path, root)
        read = read_text_file(full, shown, root=root, max_bytes=max_bytes, encoding=encoding)
        if isinstance(read, SkippedFile):
            skipped.append(read)
            continue
        items.append(_item(read, id=None, tier=tier, score=score, shrink=shrink))
    skipped.extend(SkippedFile(path, SkipReason.UNREADABLE, why) for path, why in errors)
    unread = folder.rules.unread
    skipped.extend(SkippedFile(path, SkipReason.IGNORE_FILE, why) for path, why in unread)
    return FileItems(tuple(items), tuple(skipped), complete)
