"""Context logs: one stored record per assembly, kept per session, written in the background.

`ContextMemory` logs what each `assemble` included and pruned (`ctxbudget.memory.log.entries`
builds the records); this module keeps them apart from memory, writes them off the call's
critical path, and reads and deletes them per session. The store never looks inside a record:
it is a JSON document with a time-ordered key.

**Layout.** Each session's log is a collection of its own, outside the partitions of records;
how the logs are laid out, read and deleted: `ctxbudget.store.log_partitions`.

**Writing.** `ContextLogs.append` queues an entry and returns at once. One background thread
(started when work arrives, gone after 30 s idle) waits for a pause: ``linger`` seconds
without a new entry, or ``max_wait`` seconds since the oldest queued one (calls back to back),
so it writes while the application waits for its model rather than during its next call. It
builds the documents, then writes each session's entries in one upsert and drops the session's
oldest records beyond the entry's ``retain``. At most ``max_pending`` entries wait: beyond that
an entry is dropped (counted in `ContextLogs.dropped`), the caller never blocks. A write that
fails is tried ``attempts`` times, then dropped (counted in `ContextLogs.failed`); every drop is
logged. Entries are not journaled: a process that dies loses at most what was still queued (a
log, not memory). A session's rows are written by one call, each row whole, and a document that
does not decode is skipped when read, so a crash never leaves anything that breaks a reader.

**Deleting.** Deletes hold the store's lock, and the writer holds it around each upsert, after
checking that its entries are still queued: entries of a deleted session or user (or that
recalled a deleted session's records, or an edited message) are discarded under that lock, from
the queues of every store of this process on the same folder or server (two `ContextMemory`
objects on one folder: an app and an admin task), so a deleted log, or a record quoting deleted
text, never comes back from this process. A deleted session's or user's records leave the other
logs that recalled them, as an edited message does. Another process on a shared server does not
see that lock or queue: each entry carries the session's generation when it was assembled, and
after writing a session's entries the writer reads the session's generation and takes back the
entries of another one (the session deleted, or deleted and started again, by another process;
a message deleted or replaced meanwhile drops the record too: a log, never memory). A delete
removes the session's entry before its log, so whichever comes first, no record of a deleted
session's generation stays (docs/architecture.md, "Caches").
"""

from __future__ import annotations

import atexit
import functools
import itertools
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterable

from ctxbudget.errors import StoreError
from ctxbudget.store.layout import Collections
from ctxbudget.store.log_deletes import LogDeletes, built
from ctxbudget.store.log_partitions import LogEntry, LogPartitions, LogRow
from ctxbudget.store.sessions import Sessions

__all__ = ["ContextLogs", "LogEntry", "LogRow"]

logger = logging.getLogger(__name__)

_BATCH = 256  # entries written at once, at most
# Every live ContextLogs of this process, by its store's key: a delete discards from them all.
_SIBLINGS: dict[tuple[str, ...], weakref.WeakSet[ContextLogs]] = {}
_SIBLINGS_GUARD = threading.Lock()
_IDLE = 30.0  # seconds an idle writer thread waits for work before it ends


class ContextLogs(LogDeletes):
    """The context logs of one store (see the module docstring).

    Args:
        collections: the store's collections.
        linger: seconds without a new entry the writer waits for before it writes.
        max_wait: the longest an entry waits while new ones keep arriving.
        max_pending: at most this many entries wait; more are dropped, never waited for.
        attempts: tries of a failing write before its entries are dropped.
    """

    def __init__(
        self,
        collections: Collections,
        *,
        linger: float = 0.05,
        max_wait: float = 5.0,
        max_pending: int = 2048,
        attempts: int = 3,
    ) -> None:
        self._collections = collections
        self._parts = LogPartitions(collections)
        self._sessions = Sessions(collections)
        self.linger = linger
        """Seconds without a new entry before the writer writes (may be changed at any time)."""
        self.max_wait = max_wait
        """The longest an entry waits while new ones keep arriving (may be changed)."""
        self.max_pending = max_pending
        """The most entries that wait; more are dropped (may be changed at any time)."""
        self.attempts = attempts
        self._queue: dict[int, LogEntry] = {}  # in order of arrival
        self._next = 0
        self._first = 0.0  # when the oldest queued entry arrived
        self._last = 0.0  # when the newest did
        self._hurry = 0  # callers waiting for the queue to empty: no lingering
        self._writing = False
        self._closed = False
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self.dropped = 0
        """Entries dropped because the queue was full (or the log closed)."""
        self.failed = 0
        """Entries dropped because the store kept failing to write them."""
        self._exit_hook = functools.partial(_close_at_exit, weakref.ref(self))
        atexit.register(self._exit_hook)
        with _SIBLINGS_GUARD:
            _SIBLINGS.setdefault(collections.conn.key, weakref.WeakSet()).add(self)

    # -- writing ---------------------------------------------------------------------------
    def append(self, entry: LogEntry) -> bool:
        """Queue ``entry`` for the background writer; False when it was dropped (queue full)."""
        with self._cond:
            if self._closed or len(self._queue) >= self.max_pending:
                self.dropped += 1
                logger.warning(
                    "context log entry of session %r dropped: %s",
                    entry.session_id,
                    "the log is closed" if self._closed else f"{self.max_pending} are queued",
                )
                return False
            if not self._queue:
                self._first = time.monotonic()
            self._last = time.monotonic()
            self._queue[self._next] = entry
            self._next += 1
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="ctxbudget-context-log", daemon=True
                )
                self._thread.start()
            self._cond.notify_all()
        return True

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every queued entry is written or dropped; False if ``timeout`` passed."""
        deadline = time.monotonic() + timeout
        with self._cond:
            self._hurry += 1
            self._cond.notify_all()
            try:
                while self._queue or self._writing:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    self._cond.wait(left)
            finally:
                self._hurry -= 1
        return True

    def close(self, timeout: float = 30.0) -> None:
        """Write what is queued (for at most ``timeout``), then stop taking entries."""
        atexit.unregister(self._exit_hook)
        written = self.flush(timeout)
        with self._cond:
            if not written:
                logger.error("closing the context log: %d entries not written", len(self._queue))
                self.dropped += len(self._queue)
            self._closed = True
            self._queue.clear()
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)  # it ends at once: nothing is queued any more

    def _run(self) -> None:
        ended = False  # False: an error ended the thread, which must not restart on it
        idle = time.monotonic()
        try:
            while True:
                with self._cond:
                    if not self._queue:  # kept a while: starting a thread delays `append`
                        rest = idle + _IDLE - time.monotonic()
                        if self._closed or rest <= 0:
                            ended = True
                            return
                        self._cond.wait(rest)
                        continue
                    left = self._waiting()
                    if left > 0:
                        self._cond.wait(left)
                        continue
                    taken = list(itertools.islice(self._queue.items(), _BATCH))
                    self._writing = True
                try:
                    self._write(taken)
                finally:
                    with self._cond:
                        self._writing = False
                        self._first = idle = time.monotonic()  # what came meanwhile waits
                        self._cond.notify_all()
        finally:
            with self._cond:
                self._thread = None
                if ended and self._queue and not self._closed:  # came as this thread ended
                    self._thread = threading.Thread(
                        target=self._run, name="ctxbudget-context-log", daemon=True
                    )
                    self._thread.start()
                self._cond.notify_all()

    def _waiting(self) -> float:
        """Seconds to wait before writing the queue (0 or less: none)."""
        if self._hurry or len(self._queue) >= _BATCH:
            return 0.0
        until = min(self._last + self.linger, self._first + self.max_wait)
        return until - time.monotonic()

    def _write(self, taken: list[tuple[int, LogEntry]]) -> None:
        documents = {number: built(entry) for number, entry in taken}
        wait = 0.05
        for attempt in range(1, self.attempts + 1):
            try:
                self._store(taken, documents)
            except StoreError as exc:
                if attempt < self.attempts:
                    logger.warning("writing the context log failed (%s); retrying", exc)
                    time.sleep(wait)
                    wait *= 4
                    continue
                with self._cond:
                    left = len(self._live(taken, documents))
                    self.failed += left
                    self._remove(n for n, _ in taken)
                logger.error("%d context log entries dropped: %s", left, exc)
                return
            with self._cond:
                self._remove(n for n, _ in taken)  # written, or discarded by a delete
            return

    def _live(
        self, taken: list[tuple[int, LogEntry]], documents: dict[int, str]
    ) -> list[tuple[int, LogEntry]]:
        """What is still to write of ``taken``: queued (not discarded by a delete), built."""
        with self._cond:
            return [(n, e) for n, e in taken if n in self._queue and documents[n]]

    def _remove(self, numbers: Iterable[int]) -> None:
        for number in numbers:
            self._queue.pop(number, None)

    def _store(self, taken: list[tuple[int, LogEntry]], documents: dict[int, str]) -> None:
        parts = self._parts
        sessions: dict[tuple[str, str], list[tuple[int, LogEntry]]] = {}
        for number, entry in self._live(taken, documents):
            sessions.setdefault((entry.namespace, entry.session_id), []).append((number, entry))
        parts.register([entry for entries in sessions.values() for _, entry in entries])
        for (ns, sid), entries in sessions.items():
            # The store's lock only around one upsert (the calls it delays are short): a delete
            # comes wholly before it (and discarded the entries) or wholly after.
            with self._collections.conn.lock:
                entries = self._live(entries, documents)
                if not entries:
                    continue
                parts.write([(entry, documents[n]) for n, entry in entries])
                with self._cond:
                    self._remove(n for n, _ in entries)  # written: a retry skips them
            stale = self._stale(ns, sid, [entry for _, entry in entries])
            if stale:
                parts.take_back(stale)
            parts.retain(ns, sid, min(entry.retain for _, entry in entries))

    def _stale(self, namespace: str, session_id: str, entries: list[LogEntry]) -> list[LogEntry]:
        """The entries assembled in a generation the session no longer has (read after the write).

        A delete removes the session's entry before its log, so a record written after that
        delete by another process finds the generation gone here, and one written before it
        goes with the log.
        """
        if not any(entry.generation for entry in entries):
            return []
        found = self._sessions.entry(namespace, session_id)
        now = found.generation if found is not None else None
        return [e for e in entries if e.generation and e.generation != now]

    # -- reading (`LogPartitions`) -----------------------------------------------------------
    def read(self, namespace: str, session_id: str, *, limit: int | None = None) -> list[LogRow]:
        """The stored records of a session's log, newest first (the newest ``limit``)."""
        return self._parts.read(namespace, session_id, limit=limit)

    def sessions(self, namespace: str, *, user_id: str | None = None) -> list[str]:
        """The sessions of a namespace (or those one user was assembled for) with a log."""
        return self._parts.sessions(namespace, user_id=user_id)

    # -- deleting: `LogDeletes` (ctxbudget.store.log_deletes) ------------------------------
    def _discard(self, which: Callable[[LogEntry], bool]) -> None:
        # The queues of this store's siblings too: the same folder or server in this process.
        with _SIBLINGS_GUARD:
            siblings = list(_SIBLINGS.get(self._collections.conn.key, ()))
        for logs in {self, *siblings}:
            with logs._cond:
                logs._remove([n for n, e in logs._queue.items() if which(e)])
                logs._cond.notify_all()


def _close_at_exit(ref: weakref.ref[ContextLogs]) -> None:
    logs = ref()
    if logs is not None:
        logs.close(timeout=5.0)
