"""Reading an ignore file the way git does: never through a symlink, never more than a bound.

Git (2.32 and later) opens the ``.gitignore`` files of a working tree without following
symlinks, so one that is a symlink (wherever it points) is not applied; ctxbudget does the same,
so that its listing and ``git ls-files`` agree. An ignore file is read at most
`MAX_IGNORE_BYTES`: a larger one is not read at all. Either is noted with why, and
`ctxbudget.folder_items` lists it as skipped (``SkipReason.IGNORE_FILE``).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["MAX_IGNORE_BYTES", "read_ignore_file"]

MAX_IGNORE_BYTES = 256 * 1024
"""The most bytes read of one ignore file (256 KiB; real ones are a few KiB). A larger one is
not read at all: its patterns are not applied and it is listed as skipped. Git reads up to
100 MiB, so a listing can then hold files git ignores; the skipped entry says so. Matching
costs time per pattern and path: a 200 MB ``.gitignore`` took over 30 s to compile whole."""


def read_ignore_file(
    path: Path, shown: str, unread: list[tuple[str, str]], *, follow: bool
) -> str | None:
    """An ignore file's text; None when there is none, or it is not read (noted in ``unread``).

    As git: a ``.gitignore`` that is a symlink is not followed (``follow`` is for
    ``.git/info/exclude``), and one that cannot be read counts as none. Larger than
    `MAX_IGNORE_BYTES`, it is not read at all (never more than that many bytes).
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)  # a FIFO never blocks the walk
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
        try:
            if stat.S_ISLNK(path.lstat().st_mode):
                why = "a symlink, which git does not follow for an ignore file: not applied"
                unread.append((shown, why))
                return None
        except OSError:
            return None
    try:
        handle = os.open(path, flags)
    except OSError:
        return None
    with os.fdopen(handle, "rb") as opened:
        try:
            if not stat.S_ISREG(os.fstat(handle).st_mode):
                return None
            raw = opened.read(MAX_IGNORE_BYTES + 1)
        except OSError:
            return None
    if len(raw) > MAX_IGNORE_BYTES:
        why = (
            f"larger than the {MAX_IGNORE_BYTES:,} bytes read of an ignore file "
            "(ctxbudget.sources.gitignore.MAX_IGNORE_BYTES): not applied"
        )
        unread.append((shown, why))
        return None
    return raw.decode("utf-8", errors="replace")
