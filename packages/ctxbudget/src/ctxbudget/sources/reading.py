"""Reading one file for the context: text only, bounded in size, never outside its folder.

`read_text_file` returns the file's text (`FileText`) or why it cannot be used (`SkippedFile`):
missing, unreadable (permissions, a folder that cannot be listed), binary (a NUL byte in its
first 8,000 bytes, git's own test), not a regular file (a folder, a FIFO, a device: never
opened, so reading never blocks), or outside the folder it was given with (``..`` or a symlink
whose target lies elsewhere). At most ``max_bytes`` are read: a longer file keeps its first
whole lines and ends with a line saying how much was not read.
"""

from __future__ import annotations

import codecs
import os
import stat
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from ctxbudget.errors import ConfigurationError

__all__ = [
    "DEFAULT_MAX_BYTES",
    "FileText",
    "SkipReason",
    "SkippedFile",
    "check_encoding",
    "display_path",
    "read_text_file",
]

DEFAULT_MAX_BYTES = 512 * 1024
"""The most bytes read of one file by default (about 130,000 tokens of English or code)."""

_SNIFF = 8000  # git's test for binary content: a NUL byte among the first 8,000 bytes


class SkipReason(StrEnum):
    """Why a file was not made into an item."""

    MISSING = "missing"
    """Nothing at that path (or a symlink whose target is gone)."""
    UNREADABLE = "unreadable"
    """It exists but cannot be read (permissions, an I/O error)."""
    BINARY = "binary"
    """A NUL byte in its first 8,000 bytes: not text."""
    NOT_A_FILE = "not_a_file"
    """A folder, FIFO, socket or device: never opened."""
    OUTSIDE = "outside_folder"
    """It lies outside the folder it was given with (``..``, or a symlink pointing out)."""
    IGNORE_FILE = "ignore_file_not_read"
    """An ignore file (``.gitignore``) whose patterns were not applied: a symlink (git does
    not follow those) or larger than `ctxbudget.sources.gitignore.MAX_IGNORE_BYTES`."""


_ADVICE = {
    SkipReason.MISSING: "check the path",
    SkipReason.UNREADABLE: "check its permissions, or leave it out",
    SkipReason.BINARY: "pass text files only (describe a binary file in words if it matters)",
    SkipReason.NOT_A_FILE: "pass a regular file (folder_tree_item lists a folder)",
    SkipReason.OUTSIDE: "pass a path inside the folder, or a wider root",
    SkipReason.IGNORE_FILE: (
        "make it a regular file of at most 256 KiB, or pass the patterns as ignore=[...]"
    ),
}


@dataclass(frozen=True, slots=True)
class SkippedFile:
    """A file left out, with the reason and what was found.

    Attributes:
        path: the path as it would have been shown.
        reason: why (a `SkipReason`).
        detail: what was found (``"Permission denied"``, ``"a directory"``...).
    """

    path: str
    reason: SkipReason
    detail: str

    @property
    def message(self) -> str:
        """One sentence: the file, what is wrong and what to do."""
        return (
            f"file {self.path!r} was left out ({self.reason.value}: {self.detail}); "
            + (_ADVICE[self.reason])
        )


@dataclass(frozen=True, slots=True)
class FileText:
    """The text of a file, as read.

    Attributes:
        path: the path as shown (relative to its folder, POSIX).
        text: its content (decoding errors replaced by U+FFFD; a BOM dropped), ending with a
            line that says how much was not read when the file is larger than ``max_bytes``.
        size: its size in bytes.
        read: the bytes of it the text holds.
    """

    path: str
    text: str
    size: int
    read: int

    @property
    def partial(self) -> bool:
        """Whether part of the file was not read (it is larger than ``max_bytes``)."""
        return self.read < self.size


def display_path(path: str) -> str:
    r"""A path as text any model API accepts: undecodable bytes shown as ``\xNN``, POSIX.

    >>> display_path("src/caf\udce9.py")
    'src/caf\\xe9.py'
    """
    raw = os.fsencode(path)
    return raw.decode("utf-8", errors="backslashreplace").replace(os.sep, "/")


def check_encoding(encoding: str) -> str:
    """``encoding`` if Python knows it, else a `ConfigurationError` naming it."""
    try:
        codecs.lookup(encoding)
    except (LookupError, TypeError) as exc:
        msg = f"unknown text encoding {encoding!r}; use one Python knows, e.g. 'utf-8'"
        raise ConfigurationError(msg) from exc
    return encoding


def locate(path: str | os.PathLike[str], root: str | os.PathLike[str] | None) -> tuple[Path, str]:
    """The file's location and its path as shown: relative to ``root`` when given.

    A path outside ``root`` is shown as given; `read_text_file` then leaves it out.
    """
    given = Path(path)
    if root is None:
        return given, display_path(given.as_posix())
    base = Path(root)
    full = given if given.is_absolute() else base / given
    try:
        relative = os.path.relpath(os.path.abspath(full), os.path.abspath(base))
    except ValueError:  # another drive (Windows)
        return full, display_path(given.as_posix())
    return full, display_path(Path(relative).as_posix())


def read_text_file(
    full: Path,
    shown: str,
    *,
    root: str | os.PathLike[str] | None,
    max_bytes: int,
    encoding: str,
) -> FileText | SkippedFile:
    """Read the file at ``full`` (shown as ``shown``), or say why it cannot be used.

    Args:
        full: where it is.
        shown: its path as shown.
        root: the folder it must stay inside, symlinks resolved (None: anywhere).
        max_bytes: the most bytes read.
        encoding: its text encoding.
    """
    if root is not None:
        outside = shown == ".." or shown.startswith("../")
        if outside or not _inside(full, Path(root)):
            return SkippedFile(shown, SkipReason.OUTSIDE, f"not inside {os.fspath(root)!r}")
    try:
        info = full.stat()
    except FileNotFoundError:
        return SkippedFile(shown, SkipReason.MISSING, "no such file")
    except OSError as exc:
        return SkippedFile(shown, SkipReason.UNREADABLE, exc.strerror or type(exc).__name__)
    if not stat.S_ISREG(info.st_mode):
        return SkippedFile(shown, SkipReason.NOT_A_FILE, _kind(info.st_mode))
    try:
        with full.open("rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        return SkippedFile(shown, SkipReason.UNREADABLE, exc.strerror or type(exc).__name__)
    if b"\0" in data[:_SNIFF]:
        return SkippedFile(shown, SkipReason.BINARY, "a NUL byte in its first 8,000 bytes")
    size = max(info.st_size, len(data))  # files of /proc say 0 and hold more
    if len(data) <= max_bytes:
        text = data.decode(encoding, errors="replace").removeprefix("\ufeff")
        return FileText(shown, text, size, len(data))
    data = data[:max_bytes]
    end = data.rfind(b"\n")
    if end >= 0:  # whole lines only
        data = data[: end + 1]
    decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
    text = decoder.decode(data, final=False).removeprefix("\ufeff")  # no half character
    if text and not text.endswith("\n"):
        text += "\n"
    more = f"{size:,}" if info.st_size else "more"
    text += f"… [file continues: only its first {len(data):,} of {more} bytes were read] …"
    return FileText(shown, text, size, len(data))


def _inside(full: Path, root: Path) -> bool:
    """Whether ``full``, symlinks resolved, lies inside ``root`` (symlinks resolved too)."""
    try:
        return full.resolve().is_relative_to(root.resolve())
    except (OSError, RuntimeError):  # a symlink loop: opening it fails too, and says why
        return True


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"
