"""One call reads a session's entry once: `reading_once`, and the store's write epoch.

An agent's model call reads the entries of ``<collection>.meta`` several times by id: the
stamps of what its kept candidates drew from, the session's entry for its view, the entry
again to find where to check the ids of the messages it stores. Within `reading_once` (the
LangChain middleware's call, `ContextMemory.candidates` and `assemble`), an entry read by id
is read from Chroma once and served to the later reads of the same call, as one read would
be; any write through the store (by any thread of the process, on any store of the same
location and collection: `WriteEpoch`) since that read makes the next one read again.

What the later reads get is the entry as of the first read of the call: a change made by
another process after it is seen by the next call, as a change made just after one read is.
Nothing is kept past the call (the scope is a `contextvars.ContextVar`, reset when it ends).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

__all__ = ["READ_ACTIONS", "WriteEpoch", "meta_rows", "reading_once", "write_epoch"]

Row = tuple[str, Any, dict[str, Any]]

READ_ACTIONS = frozenset(
    {"read", "count", "open", "open a partition", "open collection", "search", "search values"}
)
"""`Connection.call` actions that change nothing; every other call moves the write epoch."""

# (store key, entry id) -> (the write epoch before the read, the row or None: no such entry)
_Memo = dict[tuple[tuple[str, ...], str], tuple[int, Row | None]]
_SCOPE: ContextVar[_Memo | None] = ContextVar("ctxbudget_reading_once", default=None)


class WriteEpoch:
    """A number that moves before and after every write to one store location in a process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.value = 0

    def bump(self) -> None:
        """Move the epoch: an entry read before now is read again in the call."""
        with self._lock:
            self.value += 1


_EPOCHS: dict[tuple[str, ...], WriteEpoch] = {}
_EPOCHS_GUARD = threading.Lock()


def write_epoch(key: tuple[str, ...]) -> WriteEpoch:
    """The write epoch of one (location, collection), the same for every store on it."""
    with _EPOCHS_GUARD:
        found = _EPOCHS.get(key)
        if found is None:
            found = _EPOCHS[key] = WriteEpoch()
        return found


@contextmanager
def reading_once() -> Iterator[None]:
    """Within it, an entry of a store's ``meta`` is read by id once (until the store writes).

    Nested scopes are the outermost one.
    """
    if _SCOPE.get() is not None:
        yield
        return
    token = _SCOPE.set({})
    try:
        yield
    finally:
        _SCOPE.reset(token)


def meta_rows(
    key: tuple[str, ...],
    epoch: WriteEpoch,
    ids: Sequence[str],
    read: Callable[[list[str]], list[Row]],
) -> list[Row]:
    """``read(ids)`` (rows of ``meta`` by id), served from this call's reads when in a scope.

    ``key`` names the store (`Connection.key`); a row is served while ``epoch`` has not moved
    since the read that returned it began. Rows come in the order of ``ids`` (absent ones left
    out), each a copy.
    """
    memo = _SCOPE.get()
    if memo is None:
        return read(list(ids))
    now = epoch.value
    missing = [i for i in dict.fromkeys(ids) if memo.get((key, i), (-1, None))[0] != now]
    if missing:
        found = {row[0]: row for row in read(missing)}
        for i in missing:
            memo[(key, i)] = (now, found.get(i))
    rows = [memo[(key, i)][1] for i in dict.fromkeys(ids)]
    return [(k, d, dict(m)) for k, d, m in (r for r in rows if r is not None)]
