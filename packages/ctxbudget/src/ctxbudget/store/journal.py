"""Acknowledged writes not yet in Chroma: an append-only journal file per writer.

`ContextMemory` acknowledges a message once it is in its journal, and writes it to Chroma
(embedding included) in the background, in batches (`ctxbudget.memory.write_behind`). The
journal is what makes that acknowledgement hold when the process dies:

- Each writer appends to its own file, ``<folder>/<uuid>.jsonl``, and holds an exclusive
  ``flock`` on it while it lives. A line is one batch: ``{"batch": ID, "records": [[text,
  metadata], ...]}`` in the store's own record codec (`store.records.encode_record`), or
  ``{"done": [ID, ...]}`` once those batches are in Chroma.
- A batch is appended with one ``write`` to an ``O_APPEND`` file before the caller hears back.
  The kernel keeps what was written when the process is killed (even by SIGKILL); with
  ``fsync=True`` each append is also forced to disk, for machines that may lose power.
- A file whose lock nobody holds belongs to a writer that died: `orphans` reads back the batches
  it never marked done, the next writer stores them (``add`` is idempotent: a record already
  stored with the same content is left as it is) and removes the file.
- A line cut short by a crash has no newline and was never acknowledged: it is ignored.

Where ``fcntl`` does not exist (Windows), orphaned files are those not written for an hour.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ctxbudget.errors import StoreError, StoreInputError
from ctxbudget.store.records import Record, decode_record, encode_record

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["JOURNAL_FOLDER", "JournalBatch", "WriteJournal", "orphans", "read_batches", "replay"]

logger = logging.getLogger(__name__)

JOURNAL_FOLDER = "ctxbudget-journal"
"""The journal's folder name inside an embedded store's folder."""

_STALE_SECONDS = 3600.0  # without fcntl: a file untouched this long has no live writer


@dataclass(frozen=True, slots=True)
class JournalBatch:
    """One acknowledged batch: its id and its records (as given, before the store's seqs)."""

    id: str
    records: tuple[Record, ...]


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
        try:
            self._folder.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        except OSError as exc:
            msg = f"cannot create the write journal in {self._folder}: {exc}; check that it is a "
            msg += "writable folder (or pass write_behind=False to write synchronously)"
            raise StoreError(msg) from exc
        if fcntl is not None:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        # A writer nobody closed still releases its file (and lock) when it is collected.
        self._release_fd = weakref.finalize(self, os.close, self._fd)
        self._open = 0  # batches appended and not yet marked done
        self._guard = threading.Lock()  # an append never races the truncation in done()

    @property
    def path(self) -> Path:
        """This writer's journal file."""
        return self._path

    def append(self, batch_id: str, records: Sequence[Record]) -> None:
        """Record a batch as acknowledged (one ``write``; ``fsync`` if asked).

        Raises:
            StoreError: the journal cannot be written (nothing was acknowledged).
        """
        line: dict[str, object] = {
            "batch": batch_id,
            "records": [[r.text, encode_record(r, "")] for r in records],
        }
        with self._guard:
            self._write(line, "record acknowledged writes")
            self._open += 1

    def done(self, batch_ids: Sequence[str]) -> None:
        """Mark batches as stored in Chroma; empties the file when nothing is left open."""
        with self._guard:
            self._open -= len(batch_ids)
            if self._open <= 0:
                self._open = 0
                # Every batch is stored: start afresh instead of growing a file of finished work.
                with contextlib.suppress(OSError):
                    os.ftruncate(self._fd, 0)
                return
            with contextlib.suppress(StoreError):  # replaying a stored batch is harmless
                self._write({"done": list(batch_ids)}, "mark batches stored")

    def close(self, *, remove: bool) -> None:
        """Release the file; ``remove`` deletes it (only when every batch is stored)."""
        if self._fd < 0:
            return
        with self._guard:
            self._release(remove=remove)

    def _release(self, *, remove: bool) -> None:
        if remove:
            with contextlib.suppress(OSError):
                self._path.unlink()
        self._release_fd()  # closes the file: releases the flock
        self._fd = -1

    def _write(self, line: dict[str, object], action: str) -> None:
        data = (json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
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


def orphans(folder: str | os.PathLike[str]) -> Iterator[tuple[Path, list[JournalBatch]]]:
    """The journal files in ``folder`` no live writer holds, with their unfinished batches.

    Each file stays locked by this process while the caller handles it (between two steps of
    the iteration), so two processes never replay one file at once; the caller removes it once
    its batches are stored.
    """
    root = Path(folder)
    if not root.is_dir():
        return
    for path in sorted(root.glob("*.jsonl")):
        try:
            fd = os.open(path, os.O_RDWR)
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
            yield path, read_batches(path)
        finally:
            os.close(fd)


def read_batches(path: Path) -> list[JournalBatch]:
    """The batches of a journal file not marked done, in the order they were acknowledged."""
    batches: dict[str, JournalBatch] = {}
    data = path.read_bytes()
    complete = data[: data.rfind(b"\n") + 1]  # a line cut by a crash was never acknowledged
    for number, raw in enumerate(complete.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
            if "done" in line:
                for batch_id in line["done"]:
                    batches.pop(batch_id, None)
                continue
            records = tuple(decode_record(text, meta) for text, meta in line["records"])
            batches[str(line["batch"])] = JournalBatch(str(line["batch"]), records)
        except (ValueError, KeyError, TypeError) as exc:
            msg = (
                f"the write journal {path} is damaged at line {number} ({exc}); the batches "
                "before it are kept; move the file away to open the store without it"
            )
            raise StoreError(msg) from exc
    logger.info("journal %s: %d unfinished batch(es)", path, len(batches))
    return list(batches.values())


def replay(folder: Path, add: Callable[[Sequence[Record]], list[Record]]) -> int:
    """Store the batches of dead writers' journals in ``folder``; returns how many records.

    Raises:
        StoreError: the store failed; the journals stay for the next try.
    """
    stored = 0
    for path, batches in orphans(folder):
        refused: list[JournalBatch] = []
        for batch in batches:
            try:
                add(batch.records)
            except StoreInputError as exc:
                logger.error("journal %s: batch %s cannot be stored: %s", path, batch.id, exc)
                refused.append(batch)
                continue
            stored += len(batch.records)
        if refused:
            path.rename(path.with_suffix(".failed"))
        else:
            path.unlink(missing_ok=True)
    if stored:
        logger.warning("stored %d acknowledged record(s) left by a process that died", stored)
    return stored
