"""What a custom extractor said of each message: remembered, and asked as messages are stored.

The built-in rules cost microseconds a message and are run when a session's entities are read.
A custom extractor (spaCy, a model: `LLMEntityExtractor`) may take a second: its answers are
remembered by (text, speaker) (`Answers`, `_KEPT` at most, least recently used go), so a
session read again does not ask again, and `ContextMemory.add_messages` hands new messages to
`Answers.prepare`, which asks about them on a thread of its own (``ctxbudget-entities``; the
memory's ``close`` waits for it, `Answers.close`). By the time an assembly reads
them their answers are usually there; when they are not, the assembly waits for a batch being
asked already and asks itself about one still queued (taking it off the queue), so a message is
never asked about twice and an assembly never waits behind other sessions' messages. Only the
newest `BATCH` messages of a write are handed over, and at most `_QUEUED` batches wait: a bulk
import is asked about when its sessions are first read, as a session never read costs nothing.

A failure on that thread is logged and forgotten: the assembly that needs those messages asks
again, and its failure is raised there (as without preparation).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict, deque
from collections.abc import Sequence
from concurrent.futures import Future

from ctxbudget.memory.closing import join_model_threads
from ctxbudget.memory.entities.names import EntityExtractor, Mention, as_mentions
from ctxbudget.memory.reading.speakers import find_speaker, speaker_prefix
from ctxbudget.store.records import Record

__all__ = ["BATCH", "Answers", "Key", "message_key"]

logger = logging.getLogger(__name__)

Key = tuple[str, str | None]
"""What an extractor is asked about one message: its text (without a ``Name: `` prefix) and
its speaker (the name it was said by, else its role)."""

_Asked = Future[list[list[Mention]]]

BATCH = 64  # texts sent to an extractor at once; also the newest messages of a write prepared
_QUEUED = 16  # batches waiting for the background thread, at most (the oldest are dropped)
_IDLE = 5.0  # seconds the background thread waits for work before it ends (started again)
_KEPT = 50_000  # answers remembered


def message_key(record: Record, author: str | None) -> Key:
    """The `Key` of a stored message said by ``author`` (None: only its role is known)."""
    text = record.text
    prefix = speaker_prefix(text)
    return (text[prefix.end :] if prefix is not None else text, author or record.role)


def _author(record: Record) -> str | None:
    # As `ctxbudget.memory.reading.session_index` names who said a message.
    speaker = find_speaker(record) if record.role in ("user", "assistant") else None
    return speaker.name if speaker is not None else None


class Answers:
    """A custom extractor's answers by `Key`, and the messages being asked about (thread-safe)."""

    def __init__(self, extractor: EntityExtractor) -> None:
        self._extractor = extractor
        self._where = type(extractor).__name__
        self._found: OrderedDict[Key, list[Mention]] = OrderedDict()
        self._queued: dict[Key, _Asked] = {}
        self._batches: dict[_Asked, list[Key]] = {}
        self._lock = threading.RLock()  # a done callback may run on the thread that submits
        self._work: deque[_Asked] = deque()  # batches queued for the background thread
        self._wake = threading.Condition(self._lock)
        self._worker: threading.Thread | None = None
        self._closed = False

    def mentions(self, keys: Sequence[Key]) -> list[list[Mention]]:
        """Each key's mentions: remembered, asked now (in batches of `BATCH`), or awaited.

        Batches still queued that hold a key are taken off the queue and asked here, whole,
        while the batch being asked on the background thread (if it holds one) goes on; it is
        awaited last.
        """
        known = self._known(keys)
        waiting: dict[_Asked, list[Key]] = {}
        with self._lock:
            for key in keys:
                future = self._queued.get(key)
                if key not in known and future is not None:
                    waiting[future] = self._batches.get(future, [])
        running: list[_Asked] = []
        taken: list[Key] = []
        for future, batch in waiting.items():
            if future.cancel():
                taken += batch
            else:
                running.append(future)
        later = {k for f in running for k in waiting[f]}
        wanted = list(dict.fromkeys([*keys, *taken]))
        known = self._known(wanted)
        self._ask_all([k for k in wanted if k not in known and k not in later], known)
        for future in running:
            try:  # a failure is logged on its thread, and its keys asked again below
                future.result()
            except Exception:  # noqa: BLE001, S110
                pass
        known.update(self._known([k for k in keys if k not in known]))
        self._ask_all([k for k in dict.fromkeys(keys) if k not in known], known)
        return [known[k] for k in keys]

    def _ask_all(self, todo: list[Key], known: dict[Key, list[Mention]]) -> None:
        for start in range(0, len(todo), BATCH):
            batch = todo[start : start + BATCH]
            known.update(zip(batch, self._ask(batch), strict=True))

    def prepare(self, records: Sequence[Record]) -> None:
        """Ask about the newest `BATCH` of these stored messages in the background.

        Not waiting for it. A bulk import is not asked about here (only its last batch): a
        model is asked about a session's messages when an assembly first reads it, so a
        session never read costs nothing. At most `_QUEUED` batches wait; older ones are
        dropped (an assembly that needs them asks).
        """
        messages = [r for r in records if r.kind == "message"][-BATCH:]
        keys = [message_key(r, _author(r)) for r in messages]
        with self._lock:
            if self._closed:
                return
            todo = [
                k for k in dict.fromkeys(keys) if k not in self._found and k not in self._queued
            ]
            if not todo:
                return
            for start in range(0, len(todo), BATCH):
                batch = todo[start : start + BATCH]
                future: _Asked = Future()
                self._batches[future] = batch
                for key in batch:
                    self._queued[key] = future
                future.add_done_callback(self._settled)
                self._work.append(future)
            dropped = [self._work.popleft() for _ in range(len(self._work) - _QUEUED)]
            if self._worker is None:
                # A daemon: answers are only remembered, so exiting never waits for a model.
                self._worker = threading.Thread(
                    target=self._run, name="ctxbudget-entities", daemon=True
                )
                self._worker.start()
            self._wake.notify()
        for future in dropped:
            future.cancel()

    def close(self) -> None:
        """Stop asking: what is queued is dropped (an assembly would ask for it again).

        Returns once the batch being asked, if any, was answered and the background thread
        ended: `ctxbudget.memory.closing.MODEL_WAIT` seconds at most, then one warning names
        the thread and the extractor (`join_model_threads`).
        """
        with self._lock:
            self._closed = True
            queued = list(self._work)
            self._work.clear()
            self._wake.notify_all()
            worker = self._worker
        for future in queued:
            future.cancel()
        if worker is not None:
            join_model_threads([worker], model=f"the entity extractor {self._where}")

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._work and not self._closed:
                    self._wake.wait(_IDLE)
                if not self._work:  # closed, or idle: a memory never closed keeps no thread
                    self._worker = None
                    return
                future = self._work.popleft()
                batch = self._batches.get(future, [])
            if not future.set_running_or_notify_cancel():
                continue  # taken off the queue by an assembly
            try:
                future.set_result(self._ask(batch))
            except BaseException as exc:  # noqa: BLE001 - the future carries it (logged)
                future.set_exception(exc)

    def _known(self, keys: Sequence[Key]) -> dict[Key, list[Mention]]:
        with self._lock:
            known: dict[Key, list[Mention]] = {}
            for key in keys:
                found = self._found.get(key)
                if found is not None:
                    self._found.move_to_end(key)
                    known[key] = found
            return known

    def _ask(self, batch: list[Key]) -> list[list[Mention]]:
        given = self._extractor.extract([t for t, _ in batch], speakers=[s for _, s in batch])
        found = as_mentions(given, len(batch), self._where)
        with self._lock:
            for key, mentions in zip(batch, found, strict=True):
                self._found[key] = mentions
                self._found.move_to_end(key)
            while len(self._found) > _KEPT:
                self._found.popitem(last=False)
        return found

    def _settled(self, future: _Asked) -> None:
        with self._lock:
            batch = self._batches.pop(future, [])
            for key in batch:
                if self._queued.get(key) is future:
                    del self._queued[key]
        if not future.cancelled() and future.exception() is not None:
            logger.warning(
                "asking %s about %d stored messages failed (%s); an assembly asks again",
                self._where,
                len(batch),
                future.exception(),
            )
