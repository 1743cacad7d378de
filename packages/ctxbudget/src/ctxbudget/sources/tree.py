r"""A folder's tree as one context item, drawn like ``tree``, bounded in depth and entries.

Entries are chosen level by level (everything the folder holds, then what its subfolders hold,
and so on) until ``max_entries``, so a large tree still shows its top levels whole; they are
drawn depth first, folders before files, each folder's entries by name::

    ├── src/
    │   ├── app.py
    │   └── … 12 more
    ├── docs -> ../shared/docs
    └── README.md

A folder cut short by ``max_entries`` ends with ``… N more``; folders at ``max_depth`` are shown
but not opened; a symlink shows its target and is never followed; a folder that cannot be
listed says so (``secret/ [unreadable: Permission denied]``). A name with a line break, a
control character or bytes that are not UTF-8 is shown as a JSON string.
"""

from __future__ import annotations

import json
import os
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ctxbudget.core.items import ContextItem, Shrink, Tier
from ctxbudget.errors import ConfigurationError
from ctxbudget.sources.gitignore import DEFAULT_IGNORE
from ctxbudget.sources.reading import display_path
from ctxbudget.sources.walk import Entry, Folder

__all__ = ["folder_tree_item"]


@dataclass(slots=True)
class _Node:
    entry: Entry
    children: list[_Node] = field(default_factory=list)
    more: int = 0  # entries of this folder found but not listed (max_entries)
    error: str = ""


def folder_tree_item(
    root: str | os.PathLike[str],
    *,
    max_depth: int = 3,
    max_entries: int = 200,
    gitignore: bool = True,
    ignore: Sequence[str] = DEFAULT_IGNORE,
    id: str | None = None,  # noqa: A002 - the name ContextItem uses
    name: str | None = None,
    tier: int = Tier.FILES,
    score: float = 1.0,
    shrink: Shrink = Shrink.LINES,
) -> ContextItem:
    r"""A folder's tree (names only, no content) as one item, shown under the folder's name.

    Args:
        root: the folder.
        max_depth: the deepest level listed (1: only what the folder itself holds).
        max_entries: the most entries listed (files, folders and symlinks).
        gitignore: leave out what its ``.gitignore`` files ignore (and those above it in its
            repository; see `ctxbudget.sources.gitignore`).
        ignore: patterns (gitignore syntax) left out whatever the files say (default:
            ``.git/``).
        id: the item's id (default ``"tree:<name>"``).
        name: the header it is shown under (default: the folder's own name and ``/``).
        tier: its tier (``Tier.FILES``: in the ``Files`` section, above pinned facts).
        score: its value among the files.
        shrink: how it may shrink (default ``LINES``: its first lines, whole).

    Raises:
        ConfigurationError: ``root`` is not a folder, or a limit is below 1.

    The item's ``metadata`` holds ``listed`` (the paths listed, from the root, POSIX),
    ``entries`` (how many) and ``complete`` (False when a limit left entries out).

    >>> import pathlib, tempfile
    >>> folder = pathlib.Path(tempfile.mkdtemp()) / "demo"
    >>> (folder / "src").mkdir(parents=True)
    >>> _ = (folder / "src" / "app.py").write_text("")
    >>> _ = (folder / ".gitignore").write_text("*.log\n")
    >>> _ = (folder / "debug.log").write_text("")
    >>> print(folder_tree_item(folder).text)
    ├── src/
    │   └── app.py
    └── .gitignore
    """
    for option, value in (("max_depth", max_depth), ("max_entries", max_entries)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            msg = f"{option} must be 1 or more, got {value!r}"
            raise ConfigurationError(msg)
    folder = Folder(root, gitignore=gitignore, ignore=ignore)
    top = _Node(Entry("", "", "dir", "", 0))
    listed: list[str] = []
    complete = True
    queue: deque[_Node] = deque([top])
    while queue:
        node = queue.popleft()
        if node.entry.depth >= max_depth:
            complete = complete and not _holds_anything(folder, node.entry)
            continue
        try:
            entries = folder.scan(node.entry.path)
        except OSError as exc:
            node.error = exc.strerror or type(exc).__name__
            complete = False
            continue
        room = max_entries - len(listed)
        if len(entries) > room:
            node.more = len(entries) - room
            entries = entries[:room]
            complete = False
        for entry in entries:
            child = _Node(entry)
            node.children.append(child)
            listed.append(entry.path)
            if entry.kind == "dir":
                queue.append(child)
        if node.more:
            break  # the limit is reached: folders not opened yet stay closed
    lines: list[str] = [f"[unreadable: {top.error}]"] if top.error else []
    _draw(top, "", lines)
    shown = name or display_path(Path(os.path.abspath(root)).name or os.fspath(root)) + "/"
    return ContextItem(
        id=id or f"tree:{shown}",
        text="\n".join(lines) if lines else "(empty)",
        tier=tier,
        score=score,
        name=shown,
        source="tree",
        shrink=shrink,
        metadata={"listed": tuple(listed), "entries": len(listed), "complete": complete},
    )


def _holds_anything(folder: Folder, entry: Entry) -> bool:
    """Whether a folder left closed at ``max_depth`` holds anything listable."""
    try:
        return bool(folder.scan(entry.path))
    except OSError:
        return True


def _draw(node: _Node, prefix: str, lines: list[str]) -> None:
    rows: list[tuple[str, _Node | None]] = [(_label(c), c) for c in node.children]
    if node.more:
        rows.append((f"… {node.more} more", None))
    for index, (label, child) in enumerate(rows):
        last = index == len(rows) - 1
        lines.append(prefix + ("└── " if last else "├── ") + label)
        if child is not None and (child.children or child.more):
            _draw(child, prefix + ("    " if last else "│   "), lines)


def _label(node: _Node) -> str:
    entry = node.entry
    label = _name(entry.name)
    if entry.kind == "dir":
        label += "/"
    elif entry.kind == "symlink":
        label += " -> " + _name(entry.target)
    if node.error:
        label += f" [unreadable: {node.error}]"
    return label


def _name(name: str) -> str:
    """A name on one line: as it is when printable UTF-8, else as a JSON string."""
    shown = display_path(name)
    if shown == name and name.isprintable():
        return name
    return json.dumps(shown)
