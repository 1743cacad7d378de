"""The changes ``bench_async.py --write-bounds`` compares (issue 40), by monkeypatching only.

`variant` turns a token into one: ``none``/``16``: records per Chroma call of a write
(`mechanisms.write_batch`); ``allN``: that bound and the context log's writes in calls of at
most N entries too; ``spaceN``: the background writers (threads ``ctxbudget-write``,
``ctxbudget-context-log``) sleep N ms after each Chroma call that writes; ``switchN``: the
interpreter's switch interval N ms (default 5); ``syncN``: every collection syncs its vector
index (and drops its Chroma log) every N records (Chroma's ``sync_threshold``, 1,000 by default;
the store's copy is tuned before the run, `prepare`); ``readN``: reads of an embedded store in
calls of at most N rows (a session's rows: ids first, then by id); ``pageN``: a whole session's
rows read in pages of N (limit, offset). Tokens join with ``+``.
"""

from __future__ import annotations

import contextlib
import functools
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mechanisms import write_batch

from ctxbudget.store import log_partitions
from ctxbudget.store.connection import Connection

__all__ = ["prepare", "variant"]

READ_ACTIONS = frozenset(
    {"read", "count", "open", "open a partition", "open collection", "search", "search values"}
)
"""`Connection.call` actions that change nothing (the rest write)."""


@contextlib.contextmanager
def _log_bound(size: int) -> Iterator[None]:
    """The context log's upserts in calls of at most ``size`` entries."""
    cls = log_partitions.LogPartitions
    original = cls._upsert  # noqa: SLF001

    def bounded(self: Any, entries: Sequence[Any], collection: Any) -> None:
        for start in range(0, len(entries), size):
            original(self, entries[start : start + size], collection)

    cls._upsert = bounded  # type: ignore[method-assign]  # noqa: SLF001
    try:
        yield
    finally:
        cls._upsert = original  # type: ignore[method-assign]  # noqa: SLF001


@contextlib.contextmanager
def _spaced(ms: float) -> Iterator[None]:
    """Background writers sleep ``ms`` after each Chroma call that writes."""
    original = Connection.call

    def call(self: Connection, action: str, fn: Callable[[], Any], **kw: Any) -> Any:
        try:
            return original(self, action, fn, **kw)
        finally:
            if action not in READ_ACTIONS and threading.current_thread().name in (
                "ctxbudget-write",
                "ctxbudget-context-log",
            ):
                time.sleep(ms / 1e3)

    setattr(Connection, "call", call)  # noqa: B010 - typed as any Connection.call
    try:
        yield
    finally:
        setattr(Connection, "call", original)  # noqa: B010


@contextlib.contextmanager
def _switch(ms: float) -> Iterator[None]:
    was = sys.getswitchinterval()
    sys.setswitchinterval(ms / 1e3)
    try:
        yield
    finally:
        sys.setswitchinterval(was)


_TUNE = """
import sys, chromadb
client = chromadb.PersistentClient(sys.argv[1])
sync = int(sys.argv[2])
for col in client.list_collections():
    col.modify(configuration={"hnsw": {"sync_threshold": sync, "batch_size": min(100, sync)}})
    got = col.get(limit=1, include=["embeddings"])
    if got["ids"]:  # one write syncs the index and purges its log now, not during the run
        col.upsert(ids=["tune"], embeddings=[[0.5] * len(got["embeddings"][0])])
        col.delete(ids=["tune"])
"""


def prepare(token: str, folder: Path) -> None:
    """``syncN``: every collection of the store in ``folder`` syncs its vector index (and drops
    its Chroma log) every N records, not 1,000 (Chroma's default), as if created so; in a child
    process, before the run."""
    for part in token.split("+"):
        if part.startswith("sync"):
            subprocess.run(
                [sys.executable, "-c", _TUNE, str(folder / "store"), part[4:]], check=True
            )


@contextlib.contextmanager
def _synced(size: int) -> Iterator[None]:
    """Partitions created inside (the context logs') sync every ``size`` records."""
    from ctxbudget.store import layout

    original = layout.Collections.handle
    tuned: set[str] = set()

    def handle(self: Any, partition: str, *, create: bool) -> Any | None:
        found = original(self, partition, create=create)
        if found is not None and partition not in tuned:
            tuned.add(partition)
            hnsw = {"sync_threshold": size, "batch_size": min(100, size)}
            self.conn.call("tune", lambda: found.modify(configuration={"hnsw": hnsw}))
        return found

    layout.Collections.handle = handle  # type: ignore[method-assign]
    try:
        yield
    finally:
        layout.Collections.handle = original  # type: ignore[method-assign]


@contextlib.contextmanager
def _paged(size: int) -> Iterator[None]:
    """Reads of an embedded store's rows in calls of at most ``size`` ids (a whole session's
    rows: their ids first, then the rows by id)."""
    from ctxbudget.store import layout

    cls = layout.Collections
    original = cls._get  # noqa: SLF001

    def paged(
        self: Any, collection: Any, ids: Any, where: Any, documents: bool, embeddings: bool
    ) -> list[tuple[str, str, dict[str, Any], Any]]:
        if self.conn.shared or (ids is not None and len(ids) <= size):
            return original(self, collection, ids, where, documents, embeddings)
        if ids is None:
            got = self.conn.call("read", functools.partial(collection.get, where=where, include=[]))
            ids = got["ids"]
        out: list[tuple[str, str, dict[str, Any], Any]] = []
        for start in range(0, len(ids), size):
            out += original(
                self, collection, ids[start : start + size], where, documents, embeddings
            )
        return out

    cls._get = paged  # type: ignore[method-assign]  # noqa: SLF001
    try:
        yield
    finally:
        cls._get = original  # type: ignore[method-assign]  # noqa: SLF001


@dataclass
class _Page:
    collection: Any
    limit: int
    offset: int

    def get(self, **kw: Any) -> Any:
        return self.collection.get(limit=self.limit, offset=self.offset, **kw)


@contextlib.contextmanager
def _pages(size: int) -> Iterator[None]:
    """Reads of a whole partition's rows (``where`` only) in pages of ``size`` rows (limit and
    offset) on an embedded store."""
    from ctxbudget.store import layout

    cls = layout.Collections
    original = cls._get  # noqa: SLF001

    def paged(
        self: Any, collection: Any, ids: Any, where: Any, documents: bool, embeddings: bool
    ) -> list[tuple[str, str, dict[str, Any], Any]]:
        if self.conn.shared or ids is not None:
            return original(self, collection, ids, where, documents, embeddings)
        out: list[tuple[str, str, dict[str, Any], Any]] = []
        while True:
            page = _Page(collection, size, len(out))  # the original's one call reads one page
            rows = original(self, page, None, where, documents, embeddings)
            out += rows
            if len(rows) < size:
                return out

    cls._get = paged  # type: ignore[method-assign]  # noqa: SLF001
    try:
        yield
    finally:
        cls._get = original  # type: ignore[method-assign]  # noqa: SLF001


def variant(token: str) -> Callable[[], contextlib.AbstractContextManager[None]]:
    """The change a ``--write-bounds`` token names (see the module docstring)."""

    def one(part: str) -> Callable[[], contextlib.AbstractContextManager[None]]:
        if part == "none":
            return lambda: write_batch(None)
        if part.isdigit():
            return lambda: write_batch(int(part))
        if part.startswith("all") and part[3:].isdigit():
            size = int(part[3:])

            @contextlib.contextmanager
            def both() -> Iterator[None]:
                with write_batch(size), _log_bound(size):
                    yield

            return both
        if part.startswith("space"):
            return lambda: _spaced(float(part[5:]))
        if part.startswith("sync"):
            return lambda: _synced(int(part[4:]))
        if part.startswith("read"):
            return lambda: _paged(int(part[4:]))
        if part.startswith("page"):
            return lambda: _pages(int(part[4:]))
        if part.startswith("switch"):
            return lambda: _switch(float(part[6:]))
        msg = f"unknown variant {part!r}: none, N, allN, spaceN, switchN, syncN, readN, pageN, joined with +"
        raise SystemExit(msg)

    parts = [one(p) for p in token.split("+")]

    @contextlib.contextmanager
    def joined() -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            for make in parts:
                stack.enter_context(make())
            yield

    return joined
