"""The session indexes a `ContextMemory` keeps (`SessionIndexes`), and how calls share them.

A `SessionIndex` (`ctxbudget.memory.reading.session_index`) is kept per session, for the 32
sessions used last, keyed by the session's generation (`ctxbudget.store.sessions.Stamp`): read
again when a message was deleted or replaced, or the session was deleted and started again, by
this object or any other, in any process. A call reads one under its lock (`reading`), and an
index is extended only under that lock: two calls on one session never see it half extended.
An extension that fails part way (an interrupt, a failed read) drops the index.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ctxbudget.memory.reading.session_index import SessionIndex
from ctxbudget.store.records import Record
from ctxbudget.store.sessions import Stamp

if TYPE_CHECKING:
    from ctxbudget.store.chroma_store import ChromaStore

__all__ = ["SessionIndexes"]

_INDEXED_SESSIONS = 32  # lexical indexes kept per ContextMemory (least recently used go)


class SessionIndexes:
    """The indexes of the sessions used last (32; the least recently used go), thread-safe."""

    def __init__(self) -> None:
        self._indexes: OrderedDict[str, SessionIndex] = OrderedDict()
        self._lock = threading.Lock()

    def held(self, session_id: str, episode_gap: float) -> SessionIndex | None:
        """The index kept of ``session_id`` (as it is, maybe behind), if any."""
        if not isinstance(session_id, str):
            return None  # the store refuses it, with its message
        with self._lock:
            index = self._indexes.get(session_id)
        return index if index is not None and index.gap == episode_gap else None

    @contextmanager
    def reading(
        self,
        store: ChromaStore,
        namespace: str,
        session_id: str,
        last_seq: int | None,
        stamp: Stamp | None,
        *,
        episode_gap: float,
        counter_name: str,
        newest: dict[int, tuple[Record, Any]] | None = None,
    ) -> Iterator[SessionIndex | None]:
        """`current`, held for the block: no other call extends it while the caller reads it.

        Two calls on one session (threads of a web server, an async app's workers) would
        otherwise read an index another one is extending: rows, words and positions of
        different lengths (an ``IndexError`` or a broadcast error, 12 in 1,900 calls).
        """
        index = self.current(
            store,
            namespace,
            session_id,
            last_seq,
            stamp,
            episode_gap=episode_gap,
            counter_name=counter_name,
            newest=newest,
            hold=True,
        )
        try:
            yield index
        finally:
            if index is not None:
                index.lock.release()

    def current(
        self,
        store: ChromaStore,
        namespace: str,
        session_id: str,
        last_seq: int | None,
        stamp: Stamp | None,
        *,
        episode_gap: float,
        counter_name: str,
        newest: dict[int, tuple[Record, Any]] | None = None,
        hold: bool = False,
    ) -> SessionIndex | None:
        """The session's index, brought up to its newest message, ``last_seq`` (None: none).

        Kept from earlier calls while the session's ``stamp`` keeps its generation (no message
        was deleted or replaced since, the session was not deleted and started again); extended
        with the messages past it, with their vectors: from ``newest`` (what the call read
        already, by seq) when it holds them all. ``hold``: return it with its lock held (the
        caller releases it: `reading`). An extension that fails part way (an interrupt, a
        failed read) drops the index: the next call reads the session again.
        """
        if last_seq is None:
            return None
        while True:
            with self._lock:
                index = self._indexes.get(session_id)
                if index is not None and (
                    index.gap != episode_gap or not index.stamp.same_session(stamp)
                ):
                    index = None  # the configuration changed, or the session's messages did
                if index is not None and newest and _late(index, newest):
                    index = None  # a worker on a server stored a lower seq after the index read
                if index is not None and last_seq - index.last_seq > 1_000:
                    index = None
            if index is None:
                index = SessionIndex(episode_gap, counter_name, stamp)
                index.extend(store.message_vectors(namespace=namespace, session_id=session_id))
                if hold:
                    index.lock.acquire()
                self._keep(session_id, index)
                return index
            with index.lock:
                if not index.broken and last_seq > index.last_seq:
                    self._extend(store, namespace, session_id, index, last_seq, newest)
                if index.broken:
                    continue  # another call's extension failed: read the session again
                if hold:
                    index.lock.acquire()  # once more: held past this block, for the caller
                with self._lock:
                    if session_id in self._indexes:
                        self._indexes.move_to_end(session_id)
                return index

    def _extend(
        self,
        store: ChromaStore,
        namespace: str,
        session_id: str,
        index: SessionIndex,
        last_seq: int,
        newest: dict[int, tuple[Record, Any]] | None,
    ) -> None:
        """Extend ``index`` (its lock held) up to ``last_seq``; dropped if that fails."""
        seqs = list(range(index.last_seq + 1, last_seq + 1))
        try:
            if newest is not None and all(seq in newest for seq in seqs):
                found = [newest[seq] for seq in seqs]
            else:
                found = store.message_vectors(namespace=namespace, session_id=session_id, seqs=seqs)
            index.extend(found)
        except BaseException:
            index.broken = True  # half extended, maybe: never read again
            with self._lock:
                if self._indexes.get(session_id) is index:
                    del self._indexes[session_id]
            raise

    def _keep(self, session_id: str, index: SessionIndex) -> None:
        with self._lock:
            self._indexes[session_id] = index
            self._indexes.move_to_end(session_id)
            while len(self._indexes) > _INDEXED_SESSIONS:
                self._indexes.popitem(last=False)

    def forget(self, session_id: str | None = None) -> None:
        """Drop the index of ``session_id`` (None: of every session)."""
        with self._lock:
            if session_id is None:
                self._indexes.clear()
            else:
                self._indexes.pop(session_id, None)


def _late(index: SessionIndex, newest: dict[int, tuple[Record, Any]]) -> bool:
    """Whether the window read holds a message the index passed without it (a late write).

    On a server, seqs are claimed in one order and may be stored in another: a message can
    land below the index's last seq after the index was extended past it. The window is read
    whole there, so such a message shows in it.
    """
    return any(
        seq <= index.last_seq and record.id not in index.position
        for seq, (record, _) in newest.items()
    )
