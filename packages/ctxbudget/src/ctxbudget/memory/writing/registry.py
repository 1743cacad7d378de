"""The process's background writers, for a forked child and for the interpreter's exit.

A `WriteBehind` registers here when it is made: a forked child's copies disown their parent's
journal and thread (`Registered._disown`), and a writer nobody closed is closed at exit (its
queue stored, for at most its timeout) through a weak reference, so the memory can still be
collected before.
"""

from __future__ import annotations

import os
import weakref
from typing import Protocol

__all__ = ["Registered", "close_at_exit", "register"]


class Registered(Protocol):
    """What a registered writer does: disown in a forked child, close at exit."""

    def _disown(self) -> None: ...

    def close(self) -> None:
        """Store what is queued, stop, release the journal."""


_WRITERS: weakref.WeakSet[Registered] = weakref.WeakSet()  # for a forked child to disown


def register(writer: Registered) -> None:
    """Disown ``writer`` in a forked child of this process."""
    _WRITERS.add(writer)


def close_at_exit(ref: weakref.ref[Registered]) -> None:
    """Close the writer ``ref`` names, if it is still alive (an `atexit` hook)."""
    writer = ref()
    if writer is not None:
        writer.close()


def _disown_inherited() -> None:
    for writer in list(_WRITERS):
        writer._disown()  # noqa: SLF001 - the child's own copy, made by the fork


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_disown_inherited)
