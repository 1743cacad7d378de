"""Acknowledged writes not yet in Chroma: an append-only journal file per writer.

`ContextMemory` acknowledges a message once it is in its journal, and writes it to Chroma
(embedding included) in the background, in batches (`ctxbudget.memory.writing.behind`). The
journal is what makes that acknowledgement hold when the process dies:

- Each writer appends to its own file, ``<folder>/<uuid>.jsonl``, and holds an exclusive
  ``flock`` on it while it lives. A line is one batch or marks batches done
  (`ctxbudget.store.journal_lines`: the format, and how a line the code did not write is told
  apart). The file is created under another name and renamed once locked, so a replay never
  takes a writer's file for a dead one's in the moment between its creation and its lock.
- A batch is appended with one ``write`` to an ``O_APPEND`` file before the caller hears back.
  The kernel keeps what was written when the process is killed (even by SIGKILL); with
  ``fsync=True`` each append is also forced to disk, for machines that may lose power.
- A file whose lock nobody holds belongs to a writer that died: `orphans` reads back the batches
  it never marked done, the next writer stores them (``add`` is idempotent: a record already
  stored with the same content is left as it is) and removes the file.
- A line cut short by a crash has no newline and was never acknowledged: it is ignored. Lines
  the code did not write are moved aside to ``<uuid>.quarantined`` (a warning names it) and the
  batches around them stored: a damaged file never blocks opening the store. A record another
  writer stored first under its id with other content is dropped with a warning (the first
  write wins, `ctxbudget.store.first_write`); a batch the store refuses for another reason
  leaves its file as ``<uuid>.failed``.
- A lock is the open file's, and a forked process shares its parent's open files: a child
  outliving its parent would keep a dead writer's journal looking alive, and its batches would
  wait until the child ends, then be stored after messages written since. So a forked child
  closes its copies at once (``os.register_at_fork``) and never writes, truncates or removes
  its parent's journal; a program that ``exec`` s gets none (the descriptors are
  close-on-exec).

When a dead writer's batches are stored: by the next store opening the folder, before it
assigns a seq to anything (`ChromaStore` for an embedded store's journal, `open_write_behind`
for a journal folder given by path), and, for a writer that dies while others are writing, by
any write-behind on the same folder before its next store call (`replay`). A batch acknowledged
by a writer that died is so stored before every batch another writer stores after the death is
seen; batches stored before it keep their place (seqs are never reassigned).

Where ``fcntl`` does not exist (Windows), orphaned files are those not written for an hour.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from ctxbudget.errors import StoreError, StoreInputError
from ctxbudget.store.first_write import Get, add_acknowledged
from ctxbudget.store.journal_lines import (
    JournalBatch,
    JournalContent,
    batch_line,
    done_line,
    read_journal,
)
from ctxbudget.store.records import Record

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "JOURNAL_FOLDER",
    "JournalBatch",
    "JournalContent",
    "WriteJournal",
    "orphans",
    "read_batches",
    "replay",
]

logger = logging.getLogger(__name__)

JOURNAL_FOLDER = "ctxbudget-journal"
"""The journal's folder name inside an embedded store's folder."""

_STALE_SECONDS = 3600.0  # without fcntl: a file untouched this long has no live writer

# Every descriptor of a journal file this process opens, by token, so that a forked child can
# close its copies (see the module docstring). The guard is also held across a fork, so no
# descriptor is ever copied between its opening and its registration; reentrant, as a journal
# collected by the garbage collector inside `_open_held` closes its file (`_close_held`).
_HELD: dict[int, int] = {}
_TOKENS = itertools.count()
_HELD_GUARD = threading.RLock()


def _open_held(path: Path, flags: int) -> tuple[int, int]:
    """Open a journal file: (token, descriptor), registered before a fork can copy it."""
    with _HELD_GUARD:
        fd = os.open(path, flags, 0o600)
        token = next(_TOKENS)
        _HELD[token] = fd
    return token, fd


def _close_held(token: int) -> None:
    """Close a registered descriptor (once; in a forked child it is closed already)."""
    with _HELD_GUARD:
        fd = _HELD.pop(token, None)
        if fd is not None:
            os.close(fd)


def _forget_inherited() -> None:
    # In a forked child: closing its copies leaves the lock to the parent's open file alone.
    for fd in _HELD.values():
        with contextlib.suppress(OSError):
            os.close(fd)
    _HELD.clear()
    _HELD_GUARD.release()  # taken by the forking thread before the fork


if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=_HELD_GUARD.acquire,
        after_in_parent=_HELD_GUARD.release,
        after_in_child=_forget_inherited,
    )


class WriteJournal:
    """The journal file of one writer (see the module docstring).

    Args:
        folder: where the journal files live (created if missing).
        fsync: force each append to disk before it returns.

    Raises:
        StoreError: the folder cannot be created or written.
    """

    def __init__(self, folder: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self._folder = Path(folder)
        self._fsync = fsync
        self._path = self._folder / f"{uuid.uuid4().hex}.jsonl"
        # Named so that no replay reads it as a journal until it is locked.
        creating = self._path.with_name(self._path.name + ".new")
        try:
            self._folder.mkdir(parents=True, exist_ok=True)
            self._token, self._fd = _open_held(creating, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        except OSError as exc:
            msg = f"cannot create the write journal in {self._folder}: {exc}; check that it is a "
            msg += "writable folder (or pass write_behind=False to write synchronously)"
            raise StoreError(msg) from exc
        # A writer nobody closed still releases its file (and lock) when it is collected.
        self._release_fd = weakref.finalize(self, _close_held, self._token)
        self._pid = os.getpid()  # a forked child's copy is not this writer
        try:
            if fcntl is not None:
                fcntl.flock(self._fd, fcntl.LOCK_EX)
            creating.rename(self._path)
        except OSError as exc:
            self._release_fd()
            with contextlib.suppress(OSError):
                creating.unlink()
            msg = f"cannot create the write journal {self._path}: {exc}; check that its folder "
            msg += "is writable (or pass write_behind=False to write synchronously)"
            raise StoreError(msg) from exc
        self._open = 0  # batches appended and not yet marked done
        self._guard = threading.Lock()  # an append never races the truncation in done()

    @property
    def path(self) -> Path:
        """This writer's journal file."""
        return self._path

    def append(self, batch_id: str, records: Sequence[Record]) -> None:
        """Record a batch as acknowledged (one ``write``; ``fsync`` if asked).

        Raises:
            StoreError: the journal cannot be written, is closed, or belongs to the process
                this one was forked from (nothing was acknowledged).
        """
        action = "record acknowledged writes"
        self._check_owner(action)
        with self._guard:
            self._write(batch_line(batch_id, records), action)
            self._open += 1

    def done(self, batch_ids: Sequence[str]) -> None:
        """Mark batches as stored in Chroma; empties the file when nothing is left open."""
        if not self._owned():
            return
        with self._guard:
            self._open -= len(batch_ids)
            if self._open <= 0:
                self._open = 0
                # Every batch is stored: start afresh instead of growing a file of finished work.
                with contextlib.suppress(OSError):
                    os.ftruncate(self._fd, 0)
                return
            with contextlib.suppress(StoreError):  # replaying a stored batch is harmless
                self._write(done_line(batch_ids), "mark batches stored")

    def close(self, *, remove: bool) -> None:
        """Release the file; ``remove`` deletes it (only when every batch is stored).

        In a process forked from the writer's, nothing happens: the file is the parent's.
        """
        if not self._owned():
            return
        with self._guard:
            self._release(remove=remove)

    def _owned(self) -> bool:
        return self._fd >= 0 and os.getpid() == self._pid

    def _check_owner(self, action: str) -> None:
        if self._owned():
            return
        if self._fd < 0:
            msg = f"cannot {action}: the write journal {self._path} is closed (its memory was "
            msg += "closed); open a new ContextMemory"
        else:
            msg = f"cannot {action}: the write journal {self._path} belongs to process "
            msg += f"{self._pid}, and this process ({os.getpid()}) was forked from it; open a "
            msg += "ContextMemory in this process instead of using the parent's"
        raise StoreError(msg)

    def _release(self, *, remove: bool) -> None:
        if remove:
            with contextlib.suppress(OSError):
                self._path.unlink()
        self._release_fd()  # closes the file: releases the flock
        self._fd = -1

    def _write(self, data: bytes, action: str) -> None:
        try:
            written = os.write(self._fd, data)
            if written != len(data):
                msg = f"short write ({written} of {len(data)} bytes)"
                raise OSError(msg)
            if self._fsync:
                os.fsync(self._fd)
        except OSError as exc:
            msg = f"cannot {action} in the write journal {self._path}: {exc}; free disk space "
            msg += "or fix the folder's permissions, then try again"
            raise StoreError(msg) from exc


def orphans(
    folder: str | os.PathLike[str], *, skip: Path | None = None
) -> Iterator[tuple[Path, JournalContent]]:
    """The journal files in ``folder`` no live writer holds, with what they hold.

    Each file stays locked by this process while the caller handles it (between two steps of
    the iteration), so two processes never replay one file at once; the caller removes it once
    its batches are stored. ``skip``: a file of this process's own (a live writer's).
    """
    root = Path(folder)
    if not root.is_dir():
        return
    for path in sorted(root.glob("*.jsonl")):
        if path == skip:
            continue
        try:
            token, fd = _open_held(path, os.O_RDWR)
        except OSError:
            continue  # removed by another process in the meantime
        try:
            if fcntl is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    continue  # a live writer's file
            elif time.time() - os.fstat(fd).st_mtime < _STALE_SECONDS:  # pragma: no cover
                continue
            if not path.exists():
                continue  # replayed and removed by another process before we locked it
            try:
                content = read_journal(path)
            except OSError as exc:
                logger.error("cannot read the write journal %s (%s); it is kept", path, exc)
                continue
            logger.info("journal %s: %d unfinished batch(es)", path, len(content.batches))
            yield path, content
        finally:
            _close_held(token)


def read_batches(path: Path) -> list[JournalBatch]:
    """The batches of a journal file not marked done, in the order they were acknowledged.

    Lines the code did not write are left out (`ctxbudget.store.journal_lines`).

    Raises:
        StoreError: the file cannot be read.
    """
    try:
        return list(read_journal(path).batches)
    except OSError as exc:
        msg = f"cannot read the write journal {path}: {exc}; check its permissions"
        raise StoreError(msg) from exc


def replay(
    folder: Path,
    add: Callable[[Sequence[Record]], list[Record]],
    *,
    skip: Path | None = None,
    get: Get | None = None,
) -> int:
    """Store the batches of dead writers' journals in ``folder``; returns how many records.

    Lines the code did not write are moved aside first (`quarantine`); a file whose batches
    are all stored is removed, one with a batch the store refuses is kept as ``.failed``.
    ``skip``: the caller's own journal. ``get``: the store's ``get``; with it, a record another
    writer stored first with other content is dropped with a warning and the rest of its batch
    stored (`ctxbudget.store.first_write`: the first write wins).

    Raises:
        StoreError: the store failed; the journals stay for the next try.
    """
    stored = 0
    for path, content in orphans(folder, skip=skip):
        aside = quarantine(path, content.bad)
        refused: list[JournalBatch] = []
        reported: set[str] = set()
        for batch in content.batches:
            try:
                dropped = add_acknowledged(add, get, batch.records, reported=reported)
            except StoreInputError as exc:
                logger.error("journal %s: batch %s cannot be stored: %s", path, batch.id, exc)
                refused.append(batch)
                continue
            stored += len(batch.records) - len(dropped)
        try:
            if refused:
                path.rename(path.with_suffix(".failed"))
            elif aside:
                path.unlink(missing_ok=True)
        except OSError as exc:  # its batches are stored: replaying it again is harmless
            logger.error("cannot move or remove the replayed journal %s: %s", path, exc)
    if stored:
        logger.warning("stored %d acknowledged record(s) left by a process that died", stored)
    return stored


def quarantine(path: Path, bad: Sequence[tuple[int, bytes]]) -> bool:
    """Move lines the code did not write aside, to ``<name>.quarantined``, with a warning.

    Returns whether they are aside (True: nothing to move); if not, the journal must be kept.
    """
    if not bad:
        return True
    target = path.with_suffix(".quarantined")
    numbers = [number for number, _ in bad]
    shown = ", ".join(map(str, numbers[:10])) + (", ..." if len(numbers) > 10 else "")
    try:
        with target.open("wb") as file:  # written again, the same, if a replay is interrupted
            file.write(b"".join(raw for _, raw in bad))
            file.flush()
            os.fsync(file.fileno())
    except OSError as exc:
        logger.error(
            "the write journal %s holds %d line(s) ctxbudget did not write (line(s) %s) that "
            "cannot be moved aside to %s (%s); its other batches are stored and the file kept",
            path,
            len(bad),
            shown,
            target,
            exc,
        )
        return False
    logger.warning(
        "the write journal %s held %d line(s) ctxbudget did not write (line(s) %s): moved "
        "aside to %s; the batches around them are stored",
        path,
        len(bad),
        shown,
        target,
    )
    return True
