"""How a store lays out its data in Chroma: a collection per user, and the store's own entries.

Layout 3 (`LAYOUT_VERSION`) keeps each tenant's records apart, so a call reads only collections
that hold its own user's or session's data and its cost does not grow with other users' data
(a filtered Chroma read costs in proportion to the collection it filters):

- **Partitions** hold the `Record` s (vector in cosine space, flat metadata: ``ns``, ``rid``,
  ``kind``, ``sid``, ``uid``, ``role``, ``seq``, ``ts``...; user metadata keys get an ``m.``
  prefix). There are three kinds, each named ``<collection>.<letter>-<digest>`` from a hash of
  its namespace and owner, so any user id or session id makes a valid collection name
  (`ctxbudget.store.partitions`): ``u`` a user's (the user's pins, and the sessions the user
  started), ``s`` a session's own (a session whose first records had no user), ``d`` a
  namespace's documents (records with no session and no user: `ContextMemory.add_documents`).
  A session lives wholly in one partition, its **home**, chosen at its first write and kept in
  its session entry; a message another user writes into it stays there, and that user's entry
  lists the home as ``elsewhere``. A session's context log has a collection of its own, ``l-``
  (`log_partition`), outside the partitions: it holds no records and no record read visits it
  (`ctxbudget.store.context_log`); nor does a namespace's documents' entity index, ``e-``
  (`entity_partition`, `ctxbudget.store.doc_entities`); nor do keyed values, ``v-``
  (`values_partition`, one per user and one shared per namespace: `ctxbudget.store.values`).
- ``<collection>.meta`` holds the store's entries: one per session (its last ``seq``, its home,
  its owner and a version bumped whenever a message of it is deleted or replaced, so a process
  keeping a session in memory knows when to read it again), one per (session, user) pair (for
  `list_sessions` and `delete_user`), one per user whose messages live in a session of another
  user, one per partition (for reads of a whole namespace), the embedder's name and dimension,
  and the layout version.

The Chroma id of a record is ``[namespace, scope kind, scope name, id]`` as JSON
(`store.records.record_key`): ids are unique per namespace and scope. `Collections` is the one
place that opens collections (`ctxbudget.store.partitions` names them); every other part of the
store reaches a partition through it. Layout versions: 1 kept every record in ``<collection>``
keyed ``[namespace, id]``; 2 added the scope; 3 is this one. Opening a store of another
version: `ctxbudget.store.migration`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any, TypeVar

import numpy as np

from ctxbudget.errors import StoreError, StoreInputError
from ctxbudget.store.connection import Connection
from ctxbudget.store.partitions import partition_name
from ctxbudget.store.records import (
    Record,
    Scope,
    decode_record,
    json_key,
    record_key,
    require_name,
    scope_arg,
)
from ctxbudget.store.replies import get_reply

__all__ = [
    "LAYOUT_VERSION",
    "Collections",
    "Row",
    "existing",
    "missing",
    "scoped_keys",
]

T = TypeVar("T")

LAYOUT_VERSION = 3
"""The store layout this code writes (see the module docstring); older ones are migrated."""

Row = tuple[str, str, dict[str, Any]]
"""A row read from a collection: its Chroma id, its document and its metadata."""

_OPEN_HANDLES = 512  # partition handles kept open per store (least recently used go)
SYNC_EVERY = 100
"""Records a collection takes before Chroma folds its log into the index (Chroma's default:
1,000). Every write re-reads the log not folded yet: at 1,000 a one-record write into a
partition of a few thousand records took 46 ms against 9 at 100, and 20 conversations on one
event loop did 5.7 turns/s against 11.2 (docs/benchmarks.md, "The event loop with 20
conversations"). Folding costs a write of the index every ``SYNC_EVERY`` records: on a
collection of 50,000 records a write's p99 rose from 14 to 35 ms. Set when a collection is
created; collections made before keep Chroma's default."""


def _index(space: str | None) -> dict[str, Any]:
    """The index configuration of a collection this layout creates."""
    hnsw: dict[str, Any] = {"sync_threshold": SYNC_EVERY, "batch_size": SYNC_EVERY}
    if space is not None:
        hnsw["space"] = space
    return {"hnsw": hnsw}


def missing(exc: BaseException) -> bool:
    """Whether a Chroma error says the collection does not exist (deleted, or never made)."""
    text = f"{type(exc).__name__} {exc}".lower()
    return "notfound" in text or "does not exist" in text or "not found" in text


def existing(client: Any, name: str) -> Any | None:
    """The collection ``name``, or None if there is none (not raised: a common case)."""
    try:
        return client.get_collection(name)
    except Exception as exc:
        if missing(exc):
            return None
        raise


class Collections:
    """The Chroma collections of one store: ``meta`` (opened at once) and the partitions.

    Partitions are opened on first use and their handles kept (a few hundred, least recently
    used dropped); a handle whose collection another process deleted is opened again once.
    Reads never create a partition: reading one that does not exist finds nothing.

    Raises:
        StoreError: Chroma failed, or ``name`` is too long to name partitions after it.
    """

    def __init__(self, conn: Connection, name: str) -> None:
        self.conn = conn
        self.name = name
        longest = len(partition_name(name, "user", "", ""))
        if longest > 512:
            msg = f"collection name {name!r} is too long: use at most {512 - longest + len(name)}"
            raise StoreInputError(msg)
        self.meta: Any = conn.call(
            f"open collection {name!r}",
            lambda: conn.client.get_or_create_collection(
                f"{name}.meta",
                embedding_function=None,
                metadata={"ctxbudget": 1},
                configuration=_index(None),
            ),
        )
        self.batch = max(1, int(conn.call("open", conn.client.get_max_batch_size)))
        self._handles: OrderedDict[str, Any] = OrderedDict()
        self.opened: Callable[[str, Any], None] | None = None
        """Called with each partition opened, before it is used (`ctxbudget.store.migration`)."""

    # -- partitions ------------------------------------------------------------------------
    def handle(self, partition: str, *, create: bool) -> Any | None:
        """The collection of ``partition`` (None: it does not exist and ``create`` is off)."""
        with self.conn.lock:
            found = self._handles.get(partition)
            if found is not None:
                self._handles.move_to_end(partition)
                return found
        client = self.conn.client
        if create:
            found = self.conn.call(
                "open a partition",
                lambda: client.get_or_create_collection(
                    partition,
                    embedding_function=None,
                    metadata={"hnsw:space": "cosine"},
                    configuration=_index("cosine"),
                ),
            )
        else:
            found = self.conn.call("open a partition", partial(existing, client, partition))
            if found is None:
                return None
        if (opened := self.opened) is not None:
            opened(partition, found)  # if it raises, the handle is not kept: it runs again
        with self.conn.lock:
            self._handles[partition] = found
            while len(self._handles) > _OPEN_HANDLES:
                self._handles.popitem(last=False)
        return found

    def forget(self, partition: str) -> None:
        """Drop the handle of ``partition`` (its collection was deleted)."""
        with self.conn.lock:
            self._handles.pop(partition, None)

    def run(self, partition: str, call: Callable[[Any], T], *, create: bool = False) -> T | None:
        """``call(collection)`` on ``partition`` (None: no such partition and ``create`` off).

        ``call`` makes its Chroma calls through `Connection.call`. A handle to a collection
        deleted since it was opened (by `delete_user`, maybe in another process) is dropped and
        the partition opened again, once.
        """
        for attempt in (0, 1):
            collection = self.handle(partition, create=create)
            if collection is None:
                return None
            try:
                return call(collection)
            except StoreError as exc:
                if attempt or exc.__cause__ is None or not missing(exc.__cause__):
                    raise
                self.forget(partition)
        return None  # pragma: no cover - the loop returns or raises

    def register(self, partitions: dict[str, dict[str, str]]) -> None:
        """Create these partitions and record them in ``meta`` (name: namespace and owner).

        Their entries are read by id each time (one short read): a partition dropped by
        another store or process, and so unregistered, is created and registered again. (A
        set of partitions seen registered, kept in process, went stale exactly then.)
        """
        if not partitions:
            return
        keys = {json_key("part", p): p for p in partitions}
        known = {key for key, _, _ in self.rows(self.meta, ids=list(keys), documents=False)}
        new = {keys[k]: partitions[keys[k]] for k in keys if k not in known}
        if not new:
            return
        for partition in new:
            self.forget(partition)  # a handle kept from before a drop is stale
            self.handle(partition, create=True)
        entries = {json_key("part", p): {"type": "part", "part": p, **o} for p, o in new.items()}
        self.upsert_meta(entries, action="register partitions", wrote="; nothing was written")

    def partitions(self, namespace: str | None = None) -> list[str]:
        """The registered partitions of a namespace (None: of every namespace), sorted."""
        rows = self.rows(self.meta, where={"type": "part"}, documents=False)
        return sorted(str(m["part"]) for _, _, m in rows if namespace in (None, m.get("ns")))

    def drop(self, partition: str) -> None:
        """Delete a partition's collection and its registry entry (it holds no records now)."""
        client = self.conn.client
        try:
            self.conn.call("delete a partition", partial(client.delete_collection, partition))
        except StoreError as exc:
            if exc.__cause__ is None or not missing(exc.__cause__):
                raise
        self.forget(partition)
        self.delete(self.meta, [json_key("part", partition)])

    def drop_if_empty(self, partition: str) -> None:
        """`drop` a partition holding no records (a documents' partition stays: it is named)."""
        left = self.run(partition, lambda c: int(self.conn.call("count", c.count)))
        if left == 0 and not partition.startswith(f"{self.name}.d-"):
            self.drop(partition)

    # -- reading and writing ---------------------------------------------------------------
    def rows(
        self,
        collection: Any,
        *,
        ids: Sequence[str] | None = None,
        where: dict[str, Any] | None = None,
        documents: bool = True,
        embeddings: bool = False,
    ) -> list[Row]:
        """The rows of ``collection`` with these ids and/or passing ``where``."""
        return [
            (k, d, m) for k, d, m, _ in self._get(collection, ids, where, documents, embeddings)
        ]

    def part_rows(
        self,
        partition: str,
        *,
        ids: Sequence[str] | None = None,
        where: dict[str, Any] | None = None,
        documents: bool = True,
    ) -> list[Row]:
        """`rows` of a partition (none if it does not exist)."""
        got = self.run(partition, lambda c: self.rows(c, ids=ids, where=where, documents=documents))
        return got or []

    def part_vectors(
        self, partition: str, where: dict[str, Any] | None
    ) -> list[tuple[str, str, dict[str, Any], Any]]:
        """The rows of a partition passing ``where``, each with its vector (a float32 array)."""
        return self.run(partition, lambda c: self._get(c, None, where, True, True)) or []

    def with_vectors(self, partition: str, where: dict[str, Any]) -> list[tuple[Record, Any]]:
        """The records of a partition passing ``where``, each with its vector (float32)."""
        got = self.run(partition, lambda c: self._get(c, None, where, True, True))
        return [(decode_record(doc, meta), vector) for _, doc, meta, vector in got or []]

    def _get(
        self,
        collection: Any,
        ids: Sequence[str] | None,
        where: dict[str, Any] | None,
        documents: bool,
        embeddings: bool,
    ) -> list[tuple[str, str, dict[str, Any], Any]]:
        include = ["metadatas"] + (["documents"] if documents else [])
        include += ["embeddings"] if embeddings else []
        chunks: Iterable[Sequence[str] | None] = (
            [None]
            if ids is None
            else (ids[i : i + self.batch] for i in range(0, len(ids), self.batch))
        )
        out: list[tuple[str, str, dict[str, Any], Any]] = []
        for chunk in chunks:
            if chunk is not None and not chunk:
                continue
            got = self.conn.call(
                "read",
                partial(_checked_get, collection, chunk, where, include),
            )
            n = len(got["ids"])
            docs = got.get("documents") or [""] * n
            metas = got.get("metadatas") or [{}] * n
            found = got.get("embeddings")
            vectors: Any = [None] * n if found is None else np.asarray(found, dtype=np.float32)
            out.extend(zip(got["ids"], docs, (dict(m or {}) for m in metas), vectors, strict=True))
        return out

    def records_where(self, partition: str, where: dict[str, Any]) -> list[Record]:
        """The records of a partition that pass ``where``."""
        rows = self.part_rows(partition, where=where)
        return [decode_record(doc, meta) for _, doc, meta in rows]

    def fetch(self, partition: str, keys: Sequence[str]) -> dict[str, Record]:
        """The stored records of a partition with these Chroma ids, by id (unknown ids left out)."""
        if not keys:
            return {}
        rows = self.part_rows(partition, ids=keys)
        return {key: decode_record(doc, meta) for key, doc, meta in rows}

    def delete(self, collection: Any, keys: Sequence[str]) -> None:
        """Delete these ids from ``collection``."""
        for start in range(0, len(keys), self.batch):
            chunk = list(keys[start : start + self.batch])
            self.conn.call(
                "delete",
                partial(collection.delete, ids=chunk),
                wrote="; some records may already be deleted: delete them again",
            )

    def delete_in(self, partition: str, keys: Sequence[str]) -> None:
        """Delete these ids from a partition (nothing if it does not exist)."""
        if keys:
            self.run(partition, lambda c: self.delete(c, keys))

    def upsert_meta(
        self,
        entries: dict[str, dict[str, Any]],
        *,
        wrote: str,
        action: str = "write session counters",
    ) -> None:
        """Write these entries of ``meta`` (id: metadata); ``wrote`` ends a failure's message."""
        keys = list(entries)
        for start in range(0, len(keys), self.batch):
            chunk = keys[start : start + self.batch]
            self.conn.call(
                action,
                partial(
                    self.meta.upsert,
                    ids=chunk,
                    embeddings=[[1.0]] * len(chunk),
                    metadatas=[entries[k] for k in chunk],
                ),
                wrote=wrote,
            )


def scoped_keys(
    what: str,
    ids: Sequence[str],
    namespace: str,
    session_id: str | None,
    user_id: str | None,
    collection: str | None,
) -> tuple[Scope, list[str]]:
    """The scope ``what`` (`get`, `delete`) names and the Chroma ids of its ids in it.

    Raises:
        StoreInputError: no scope or more than one, ``ids`` a str, or a malformed id.
    """
    require_name("namespace", namespace)
    scope: Scope = scope_arg(what, session_id, user_id, collection)
    if isinstance(ids, str):
        msg = f"ids must be a list of ids, got the str {ids!r}; pass [{ids!r}]"
        raise StoreInputError(msg)
    wanted = list(dict.fromkeys(require_name("id", i) for i in ids))
    return scope, [record_key(namespace, scope, i) for i in wanted]


def _checked_get(
    collection: Any, chunk: Sequence[str] | None, where: dict[str, Any] | None, include: list[str]
) -> Any:
    asked = None if chunk is None else list(chunk)
    got = collection.get(ids=asked, where=where, include=include)
    return get_reply(got, asked=asked, include=include)
