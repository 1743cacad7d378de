"""Walking a folder: what each folder holds, minus what its ``.gitignore`` files ignore.

`Folder.scan` lists one folder (sorted: folders first, then by name), leaving out what the
`GitIgnore` rules ignore. Symlinks are listed, never followed into: a symlinked folder is not
entered (no loops, nothing outside the root), and a symlinked file is read only when its
target lies inside the root (`ctxbudget.sources.reading`). `Folder.files` walks depth first.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ctxbudget.errors import ConfigurationError
from ctxbudget.sources.gitignore import DEFAULT_IGNORE, GitIgnore

__all__ = ["Entry", "Folder"]


@dataclass(frozen=True, slots=True)
class Entry:
    """One thing in a folder.

    Attributes:
        name: its name.
        path: its path from the root (POSIX).
        kind: ``"dir"``, ``"file"``, ``"symlink"`` or ``"other"`` (FIFO, socket, device).
        target: where a symlink points, as written in it (else empty).
        depth: 1 for what the root holds, 2 one folder down...
    """

    name: str
    path: str
    kind: str
    target: str
    depth: int


class Folder:
    """A folder to list, with the rules that say what to leave out.

    Args:
        root: the folder.
        gitignore: apply its ``.gitignore`` files (and those above it in its repository).
        ignore: patterns (gitignore syntax) left out whatever the files say; by default
            git's own folder, ``.git/``.

    Raises:
        ConfigurationError: ``root`` is not a folder.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        gitignore: bool = True,
        ignore: Sequence[str] = DEFAULT_IGNORE,
    ) -> None:
        if isinstance(ignore, str):
            msg = f"ignore must be a list of patterns, not one string; pass [{ignore!r}]"
            raise ConfigurationError(msg)
        self.root = Path(root)
        if not self.root.is_dir():
            what = "does not exist" if not self.root.exists() else "is not a folder"
            msg = f"folder {os.fspath(root)!r} {what}; pass the path of a folder"
            raise ConfigurationError(msg)
        if gitignore:
            self.rules = GitIgnore.for_folder(self.root, extra=tuple(ignore))
        else:
            self.rules = GitIgnore(extra=tuple(ignore))

    def scan(self, folder: str = "") -> list[Entry]:
        """What ``folder`` (from the root, POSIX; ``""``: the root) holds, not ignored.

        Raises:
            OSError: the folder cannot be listed.
        """
        where = self.root / folder if folder else self.root
        depth = folder.count("/") + 2 if folder else 1
        entries: list[Entry] = []
        with os.scandir(where) as found:
            for item in found:
                path = f"{folder}/{item.name}" if folder else item.name
                kind = _kind(item)
                if self.rules.decides(path, is_dir=kind == "dir"):
                    continue
                target = ""
                if kind == "symlink":
                    try:
                        target = os.readlink(item.path)
                    except OSError:
                        target = "?"
                entries.append(Entry(item.name, path, kind, target, depth))
        entries.sort(key=lambda e: (e.kind != "dir", e.name.casefold(), e.name))
        return entries

    def files(
        self, *, max_depth: int | None = None, errors: list[tuple[str, str]] | None = None
    ) -> Iterator[Entry]:
        """Every file, symlink and special file below the root, depth first, in listing order.

        Special files (``kind == "other"``: FIFOs, sockets, devices) are yielded too, never
        opened here, so that a caller lists them as skipped with why. Folders that cannot be
        listed are skipped, and noted in ``errors`` as ``(path, reason)`` when given.
        """
        stack: list[Entry] = [Entry("", "", "dir", "", 0)]
        while stack:
            folder = stack.pop()
            if max_depth is not None and folder.depth >= max_depth:
                continue
            try:
                entries = self.scan(folder.path)
            except OSError as exc:
                if errors is not None:
                    errors.append((folder.path or ".", exc.strerror or type(exc).__name__))
                continue
            for entry in entries:
                if entry.kind != "dir":
                    yield entry
            stack.extend(reversed([e for e in entries if e.kind == "dir"]))


def _kind(item: os.DirEntry[str]) -> str:
    try:
        if item.is_symlink():
            return "symlink"
        if item.is_dir(follow_symlinks=False):
            return "dir"
        if item.is_file(follow_symlinks=False):
            return "file"
    except OSError:
        return "other"
    return "other"
