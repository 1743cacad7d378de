"""One process per embedded Chroma folder: a lock file held while a `ChromaStore` has it open.

Chroma's embedded client keeps each collection's vector index in the memory of the process and
writes it back on its own schedule, so two processes writing one folder overwrite each other's
index: measured with chromadb 1.5, three processes adding 1,500 records each to one folder had
every add acknowledged and all 4,500 rows in SQLite, yet 65 of them could no longer be found by
a vector search, even from a fresh process. ctxbudget therefore refuses a second process instead:
the first store to open a folder holds an exclusive ``flock`` on ``<folder>/ctxbudget.lock``
(with its pid written inside, for the message), shared by every store of that process and
released when the last one closes, or by the kernel when the process dies, even by SIGKILL.
Several processes share data through a Chroma server (``chroma run``) instead.

A folder the process may not write (read-only) is locked if its lock file exists and opened
without a lock otherwise: nothing can be written there, so nothing can be lost. Where ``fcntl``
does not exist (Windows) there is no lock.
"""

from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from ctxbudget.errors import StoreError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["LOCK_NAME", "FolderLock", "hold_folder"]

LOCK_NAME = "ctxbudget.lock"


@dataclass(slots=True)
class _Held:
    fd: int
    users: int


_HELD: dict[str, _Held] = {}
_GUARD = threading.Lock()


def _forget_inherited() -> None:
    # A forked child shares its parent's lock (same open file); it must not count as the owner
    # nor keep the lock alive once the parent is gone.
    for held in _HELD.values():
        with contextlib.suppress(OSError):
            os.close(held.fd)
    _HELD.clear()
    _GUARD.release()  # taken before the fork, so no lock file was opened and not yet listed


if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=_GUARD.acquire, after_in_parent=_GUARD.release, after_in_child=_forget_inherited
    )


class FolderLock:
    """This process's hold on an embedded Chroma folder; `release` once (idempotent)."""

    def __init__(self, key: str | None) -> None:
        self._key = key

    def release(self) -> None:
        """Let go; the lock file is unlocked when the process's last holder lets go."""
        with _GUARD:
            key, self._key = self._key, None
            held = _HELD.get(key) if key is not None else None
            if held is None:
                return
            held.users -= 1
            if held.users == 0:
                del _HELD[key]  # type: ignore[arg-type]
                os.close(held.fd)  # closing the only descriptor releases the flock


def _open_lock_file(path: Path) -> int | None:
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        pass
    try:  # a read-only folder: lock its existing file if there is one
        return os.open(path, os.O_RDONLY)
    except OSError:
        return None


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        text = ""
    return f"process {text}" if text.isdigit() else "another process"


def hold_folder(folder: Path) -> FolderLock:
    """Hold ``folder`` for this process, or raise StoreError if another process holds it.

    Raises:
        StoreError: another live process has a store open on ``folder``.
    """
    if fcntl is None:  # pragma: no cover - Windows
        return FolderLock(None)
    key = str(folder)
    with _GUARD:
        held = _HELD.get(key)
        if held is not None:
            held.users += 1
            return FolderLock(key)
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError:
            return FolderLock(None)  # Chroma itself will report why the folder is unusable
        fd = _open_lock_file(folder / LOCK_NAME)
        if fd is None:
            return FolderLock(None)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = _holder(fd)
            os.close(fd)
            msg = (
                f"the embedded Chroma in {folder} is already open in {holder}; an embedded "
                "Chroma belongs to one process (two lose each other's writes): close it there, "
                "or serve the folder with a Chroma server (chroma run --path "
                f"{folder}) and connect every process to it with url= / chroma_url="
            )
            raise StoreError(msg) from exc
        with contextlib.suppress(OSError):  # the pid is only for the message above
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        _HELD[key] = _Held(fd, 1)
        return FolderLock(key)
