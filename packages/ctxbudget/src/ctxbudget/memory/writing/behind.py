"""Messages acknowledged at once, stored in the background: `WriteBehind`.

Storing one message costs a forward pass of the embedding model and a Chroma write (an embedded
Chroma syncs its files on every call: about 15-30 ms for one record, under 1 ms a record in a
batch of 256). `ContextMemory` therefore acknowledges a message as soon as it is checked and in
the write journal (`ctxbudget.store.journal`), and one background thread stores the journal's
batches in order, several at a time, through the store's ordinary `add` (seqs, idempotence and
retries as for any write).

What callers can rely on:

- **Nothing acknowledged is lost.** A batch is in the journal before its call returns; a process
  killed before the batch is stored leaves the journal behind, and the next `ContextMemory` on
  that store stores it when it opens (`replay`), before anything it writes; a writer dying while
  others of its journal folder write (processes sharing a server) is replayed by the next of
  them to store anything, first (each store call replays dead writers' journals).
- **A forked child is not the writer.** Its copy (``multiprocessing``, ``os.fork``) acknowledges
  nothing (`StoreError`), stores nothing and leaves the parent's journal and lock alone: what
  the parent acknowledged is replayed once the parent dies, even while the child lives on.
- **Reads see every acknowledged write.** Every read and change of `ContextMemory` first waits
  for what it and the process's other memories on the store acknowledged (`settle`, `drain`:
  `ctxbudget.memory.writing.opening.drain_siblings`), so a deletion is never overtaken by a
  write acknowledged before it; an agent's read skips the wait only for the messages its state
  holds (`waiting`). Other processes see a message once it is stored, typically milliseconds
  after it was acknowledged; `ContextMemory.flush()` waits for that.
- **Failures are reported, never dropped.** A write Chroma refuses for a moment (a server
  restarting) is retried, in order, until it succeeds; `settle` (hence the next read) raises a
  `StoreError` naming the error if it has not succeeded within ``timeout``. A batch the store
  refuses for good (`StoreInputError`, e.g. a vector of another dimension) stays in the journal
  and the next call of the memory raises the error, once.
- **Another writer's message under an acknowledged id: the first write wins.** If another
  memory (on the same folder or server) stored a different message under the scope and id of
  one acknowledged here before it was stored, that message is kept: the acknowledged one is
  dropped from the journal with one warning naming its id and session, and the rest of its
  batch is stored (`ctxbudget.store.first_write`), as a synchronous write or the journal's
  replay would. Nothing else stays in the journal, and `settle` raises nothing for it.
- **One store call for a burst.** The writer lingers ``linger`` seconds (50 ms) after a batch
  arrives, so the messages of one turn (the question, then the answer and tool results) are
  stored together, after the call that acknowledged them, rather than while it still reads
  and packs. Anyone waiting for the queue (`settle`, `close`, a full queue) ends the linger.
- **Bounded memory.** At most ``max_pending`` records wait; a caller that writes faster than the
  model embeds waits too (``add_messages`` of a large import runs at the embedding speed).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import threading
import time
import uuid
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ctxbudget.errors import StoreError, StoreInputError
from ctxbudget.memory.writing.batching import pending_key, store_groups
from ctxbudget.memory.writing.registry import close_at_exit, register
from ctxbudget.store.first_write import Add, Get, add_acknowledged
from ctxbudget.store.journal import JournalBatch, WriteJournal, replay
from ctxbudget.store.records import Record

__all__ = ["WriteBehind"]

logger = logging.getLogger(__name__)

_MAX_WAIT = 2.0  # seconds between two tries of a failing write


@dataclass(slots=True)
class _Failure:
    error: StoreError
    records: int
    reported: bool = False


class WriteBehind:
    """One background writer of acknowledged records (see the module docstring).

    Args:
        add: the store's ``add`` (records in, stored records out).
        journal: where batches are recorded before they are acknowledged.
        get: the store's ``get``, to tell which records of a refused batch another writer
            stored first with other content (dropped; without it the batch is refused whole).
        batch: at most this many records per store call.
        max_pending: at most this many records wait at once; `submit` waits beyond.
        timeout: how long `settle`, `close` and a waiting `submit` wait for a store that
            stores nothing (a failing write is reported at once; a slow one is waited for).
        linger: seconds to wait after a batch arrives for more to store with it.
    """

    def __init__(
        self,
        add: Add,
        journal: WriteJournal,
        *,
        get: Get | None = None,
        batch: int = 256,
        max_pending: int = 1024,
        timeout: float = 30.0,
        linger: float = 0.05,
    ) -> None:
        self._add = add
        self._get = get
        self._journal = journal
        self._batch = batch
        self._max_pending = max_pending
        self._timeout = timeout
        self._linger = linger
        self._first = 0.0  # when the oldest batch of the queue arrived
        self._hurry = 0  # callers waiting for the queue to empty: no lingering
        self._queue: deque[JournalBatch] = deque()
        self._inflight: list[JournalBatch] = []
        self._pending: dict[str, Record] = {}  # record key -> record, queued or in flight
        self._waiting = 0
        self._seq = 0  # the last batch acknowledged
        self._seqs: dict[str, int] = {}  # batch id -> its seq, queued or in flight
        self._progress = 0  # records stored or refused so far: a waiter sees the store alive
        self._retrying: StoreError | None = None
        self._failed: list[_Failure] = []
        self._reported: set[str] = set()  # records dropped (first write wins) and warned about
        self._stopping = False
        self._released = False  # closed: the thread stopped and the journal let go
        self._cond = threading.Condition()
        # The thread runs while there is work and ends when the queue is empty, so an idle
        # writer holds no thread and a memory nobody closed can still be collected.
        self._thread: threading.Thread | None = None
        self._exit_hook = functools.partial(close_at_exit, weakref.ref(self))
        atexit.register(self._exit_hook)  # a weak reference: the memory can still be collected
        register(self)  # a forked child's copy disowns the journal and thread

    @property
    def journal(self) -> Path:
        """This writer's journal file."""
        return self._journal.path

    def submit(self, records: Sequence[Record]) -> None:
        """Acknowledge records: journal them, then queue them for the store.

        Raises:
            StoreError: the journal cannot be written, or the store has failed for ``timeout``
                while the queue is full, or an earlier batch was refused (see `raise_failure`).
                In each case the records were not acknowledged.
        """
        batch = JournalBatch(uuid.uuid4().hex, tuple(records))
        with self._cond:
            self._raise_failure()
            if self._retrying is not None:
                action = "acknowledge more messages"
                raise self._late(action)
            size = len(batch.records)
            self._wait_while(
                lambda: bool(self._waiting) and self._waiting + size > self._max_pending,
                "acknowledge more messages",
            )
            self._journal.append(batch.id, batch.records)
            if not self._queue:
                self._first = time.monotonic()
            self._queue.append(batch)
            self._seq += 1
            self._seqs[batch.id] = self._seq
            self._waiting += len(batch.records)
            for record in batch.records:
                self._pending[pending_key(record)] = record
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="ctxbudget-write", daemon=True
                )
                self._thread.start()
            self._cond.notify_all()

    def waiting(self) -> list[Record]:
        """The acknowledged records not stored yet (queued or being stored)."""
        with self._cond:
            return list(self._pending.values())

    def pending(self, record: Record) -> Record | None:
        """The acknowledged, not yet stored record with the same scope and id, if any."""
        with self._cond:
            return self._pending.get(pending_key(record))

    def settle(self) -> None:
        """Wait until every acknowledged record is stored.

        Raises:
            StoreError: the store kept failing for ``timeout`` (the records stay queued and
                journaled, and are retried), or a batch was refused for good.
        """
        with self._cond:
            self._wait("store acknowledged messages")
            self._raise_failure()

    def drain(self) -> None:
        """Wait until every acknowledged record is stored, for another memory's deletion.

        Another `ContextMemory` on the same store deletes only after this, so a message this
        writer acknowledged before the deletion cannot land after it. A refused batch stays
        this writer's own to report (`settle`, `check`).

        Raises:
            StoreError: the store kept failing for ``timeout`` (the records stay queued and
                journaled): a deletion now would be overtaken by them.
        """
        with self._cond:
            if not self._stopping:
                self._wait("delete while another memory on this store has them queued")

    def _wait(self, action: str) -> None:
        # Holding the condition: until what was acknowledged before this call is stored (not
        # what others acknowledge meanwhile: under steady writes the queue is never empty),
        # or StoreError (see _wait_while).
        self._hurry += 1
        self._cond.notify_all()
        upto = self._seq
        try:
            self._wait_while(lambda: min(self._seqs.values(), default=upto + 1) <= upto, action)
        finally:
            self._hurry -= 1

    def _wait_while(self, busy: Callable[[], bool], action: str) -> None:
        """Holding the condition: wait while ``busy()`` as long as batches get stored.

        StoreError at once when a write fails, or when nothing was stored for ``timeout`` s
        (until 2026-12-01 from the start: a large import's flush raised under load).
        """
        deadline = time.monotonic() + self._timeout
        progress = self._progress
        while busy():
            if self._progress != progress:  # a batch was stored meanwhile: the store is alive
                progress = self._progress
                deadline = time.monotonic() + self._timeout
            left = deadline - time.monotonic()
            if left <= 0 or self._retrying is not None:
                raise self._late(action)
            self._cond.wait(left)

    def check(self) -> None:
        """Raise a failure of the background writer not reported yet, without waiting.

        Raises:
            StoreError: a batch failed (it stays journaled and is retried) or was refused.
        """
        with self._cond:
            self._raise_failure()

    def close(self) -> None:
        """Store what is queued (for at most ``timeout``), stop the thread, release the journal.

        The journal file is removed only when every acknowledged record was stored; otherwise
        it stays for the next `ContextMemory` on this store to replay.
        """
        atexit.unregister(self._exit_hook)
        with self._cond:
            if self._released:
                return
            if not self._stopping:  # (a close cut by Ctrl-C after this goes on from the join)
                self._hurry += 1
                self._cond.notify_all()
                with contextlib.suppress(StoreError):  # what is left stays journaled
                    self._wait_while(lambda: bool(self._waiting), "close")
                self._stopping = True
                self._cond.notify_all()
            clean = not self._waiting and not self._failed
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(self._timeout)
        if not clean:
            logger.error(
                "closing with %d acknowledged record(s) not stored; they are kept in %s and "
                "stored when this store is opened again",
                self._waiting + sum(f.records for f in self._failed),
                self._journal.path,
            )
        self._journal.close(remove=clean)
        self._released = True

    def _disown(self) -> None:
        """In a forked child: this copy has no thread and maybe a lock its parent's thread held."""
        self._cond = threading.Condition()
        # close() returns at once: the parent stores and removes
        self._stopping = self._released = True
        self._thread, self._retrying, self._waiting, self._seqs = None, None, 0, {}
        self._queue, self._inflight, self._pending, self._failed = deque(), [], {}, []
        atexit.unregister(self._exit_hook)

    # -- the background thread -----------------------------------------------------------

    def _run(self) -> None:
        wait = 0.05
        while True:
            with self._cond:
                if self._stopping or (not self._queue and not self._inflight):
                    # Idle, or closing: what is left stays in the journal for the next opener.
                    self._thread = None
                    return
                if not self._inflight:
                    left = self._lingering()
                    if left > 0:
                        self._cond.wait(left)
                        continue
                    self._inflight = self._take()
                work = list(self._inflight)
            try:
                # A writer of this folder that died meanwhile: its batches go first.
                replay(self._journal.path.parent, self._add, skip=self._journal.path, get=self._get)
                for group in store_groups(work, self._batch):
                    self._store(group)
            except StoreError as exc:
                with self._cond:
                    self._retrying = exc
                    self._cond.notify_all()  # waiters report it now, not after the timeout
                    self._cond.wait(wait)  # close() may end the wait: the journal keeps them
                logger.warning("storing acknowledged messages failed (%s); retrying", exc)
                wait = min(_MAX_WAIT, wait * 2)
                continue
            wait = 0.05

    def _lingering(self) -> float:
        """Seconds to wait for more batches before storing the queue (0 or less: none)."""
        if self._hurry or self._waiting >= min(self._batch, self._max_pending):
            return 0.0
        return self._first + self._linger - time.monotonic()

    def _take(self) -> list[JournalBatch]:
        taken: list[JournalBatch] = []
        count = 0
        while self._queue and count + len(self._queue[0].records) <= max(self._batch, 1):
            taken.append(self._queue.popleft())
            count += len(taken[-1].records)
        if not taken:
            taken.append(self._queue.popleft())  # one batch larger than a store call
        self._first = 0.0  # what is left has waited already: it goes next
        return taken

    def _store(self, group: list[JournalBatch]) -> None:
        try:
            records = [r for b in group for r in b.records]
            add_acknowledged(self._add, self._get, records, reported=self._reported)
        except StoreInputError as exc:
            if len(group) == 1:
                self._refused(group[0], exc)
                return
            for batch in group:  # find the batch at fault: the others are stored
                self._store([batch])
            return
        self._stored(group)

    def _stored(self, group: list[JournalBatch]) -> None:
        self._journal.done([b.id for b in group])
        with self._cond:
            for batch in group:
                self._inflight.remove(batch)
                self._forget(batch)
            if not self._inflight:
                self._reported.clear()
            self._retrying = None
            self._cond.notify_all()

    def _refused(self, batch: JournalBatch, exc: StoreInputError) -> None:
        with self._cond:
            self._inflight.remove(batch)
            self._forget(batch)
            msg = (
                f"{len(batch.records)} acknowledged message(s) could not be stored ({exc}); "
                f"they are kept in {self._journal.path} (ids "
                f"{[r.id for r in batch.records][:10]})"
            )
            logger.error(msg)
            self._failed.append(_Failure(StoreError(msg), len(batch.records)))
            self._cond.notify_all()

    def _forget(self, batch: JournalBatch) -> None:
        self._waiting -= len(batch.records)
        self._progress += len(batch.records)
        self._seqs.pop(batch.id, None)
        for record in batch.records:
            key = pending_key(record)
            if self._pending.get(key) is record:
                del self._pending[key]

    def _raise_failure(self) -> None:
        for failure in self._failed:
            if not failure.reported:
                failure.reported = True
                raise failure.error

    def _late(self, action: str) -> StoreError:
        cause = self._retrying
        why = f"the store failed: {cause}" if cause else f"nothing stored for {self._timeout:g} s"
        msg = (
            f"cannot {action}: {self._waiting} acknowledged message(s) are not stored yet "
            f"({why}); they are kept in {self._journal.path} and retried, and stored when "
            "this store is opened again"
        )
        return StoreError(msg)
