"""Where memory is kept: `ChromaStore`, over an embedded Chroma or a Chroma server.

The store is the only part of ctxbudget that does I/O. Two collections per store:

- ``<collection>`` holds every `Record` (messages, pinned facts, documents, summaries) with its
  vector (cosine space) and flat metadata: ``ns``, ``rid``, ``kind``, ``sid``, ``uid``, ``role``,
  ``seq``, ``ts``... Tuples and token counts are JSON strings; user metadata keys get an ``m.``
  prefix so they never clash with the store's own. The Chroma id is
  ``[namespace, scope kind, scope name, id]`` as JSON (`store.records.record_key`): ids are
  unique per namespace and scope (a record's session, else its user, else its document
  collection), so two sessions, users or namespaces may use the same id and never touch each
  other's records. `get` and `delete` name the scope of the ids they take.
- ``<collection>.meta`` holds one entry per session (its last ``seq``, rewritten every few
  messages, so `recent` reads a ``seq >= last - n`` range instead of scanning the session), one
  per (session, user) pair (for `list_sessions` and `delete_user`) and one for the store (the
  embedder's name and dimension), and one for the store layout (``layout``: its version).

Layout versions: 1 keyed records ``[namespace, id]``; 2 (this one) adds the scope. A store
written with an older layout is migrated when opened (`LAYOUT_VERSION`): every record is written
again under its new key with its vector, text and metadata (seqs included), then its old key is
removed, batch by batch, and the version is recorded last. Each step is idempotent, so an
interrupted migration simply resumes on the next open; a store with a newer layout than this
code knows is refused. Stop processes running an older ctxbudget on a shared server before
opening it with this one (they would keep writing the old keys).

Isolation: every read takes a namespace, and namespace, session and user filters are part of
the ``where`` Chroma evaluates; nothing is filtered after the fact.

Sequence numbers: messages get ``seq`` 0, 1, 2... per session, in insertion order. Within a
process, writes to a store (same path or URL and collection) are serialized by one lock. An
embedded Chroma belongs to one process (a Chroma limitation), so the lock is enough there. A
server may be shared by several processes, which no lock here serializes: on a server each seq
is also claimed with an entry in ``<collection>.meta`` that only the first writer gets (Chroma's
``add`` ignores an id it already has), and a writer that loses a claim takes the next seq. Seqs
are then unique across processes; they stay dense unless a write fails after its claim, and the
order between processes is the order of their claims. The records are the truth; the session
counter is only a starting point, and a deleted message's seq is not given out again.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from ctxbudget.embed.base import Embedder, as_embedder, default_embedder, validate_embeddings
from ctxbudget.errors import StoreError, StoreInputError
from ctxbudget.store.client import (
    close_client,
    forget_failed_system,
    http_client,
    import_chromadb,
    index_not_ready,
    is_server,
    parse_url,
    valid_collection_name,
    watch_status,
    write_problem,
)
from ctxbudget.store.filters import all_of, where_filter
from ctxbudget.store.lock import FolderLock, hold_folder
from ctxbudget.store.records import (
    KINDS,
    Hit,
    Kind,
    MetadataValue,
    Record,
    Scope,
    StoreStats,
    decode_record,
    embedding_text,
    encode_record,
    json_key,
    record_key,
    require_count,
    require_name,
    same_content,
    scope_arg,
    scope_of,
    stored_scope,
)
from ctxbudget.store.retry import RetryPolicy, is_transient, never_sent, retry_call
from ctxbudget.store.validate import bad_record, check_record

if TYPE_CHECKING:
    from chromadb.api import ClientAPI

__all__ = [
    "KINDS",
    "LAYOUT_VERSION",
    "ChromaStore",
    "Hit",
    "Kind",
    "MetadataValue",
    "Record",
    "RetryPolicy",
    "StoreStats",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

_ENV_URL = "CTXBUDGET_CHROMA_URL"
_DEFAULT_PATH = "./.ctxbudget"
_EMBED_CHUNK = 256
_CLAIM_ROUNDS = 100
# A session's stored last seq may trail the truth by this much (a write saved per message); the
# range read in `recent` has no upper bound and `_last_seq` looks past it, so both stay exact.
_COUNTER_LAG = 16
_NO_RETRY = RetryPolicy(attempts=1)
LAYOUT_VERSION = 2
"""The store layout this code writes (see the module docstring); older ones are migrated."""
_LAYOUT_ID = "layout"

_LOCKS: dict[tuple[str, ...], threading.RLock] = {}
_LOCKS_GUARD = threading.Lock()


def _lock_for(key: tuple[str, ...]) -> threading.RLock:
    with _LOCKS_GUARD:
        lock = _LOCKS.get(key)
        if lock is None:
            lock = _LOCKS[key] = threading.RLock()
        return lock


def _search_transient(exc: BaseException) -> bool:
    return is_transient(exc) or index_not_ready(exc)


def _some(ids: Sequence[str]) -> str:
    shown = ", ".join(repr(i) for i in ids[:3])
    return f"{shown}, ... {ids[-1]!r}" if len(ids) > 3 else shown


class ChromaStore:
    """Records and their vectors in Chroma: embedded (a local folder) or a Chroma server.

    Which Chroma: an explicit ``client``, else ``url`` (a server), else an embedded Chroma in
    ``path``; with none of the three, the server in the environment variable
    ``CTXBUDGET_CHROMA_URL`` if set, else an embedded Chroma in ``./.ctxbudget``. Telemetry is
    off. The default embedder is `OnnxEmbedder` (`default_embedder`), loaded on first use, so
    opening a store is cheap. A store is safe to share between threads; on an embedded Chroma its
    calls run one at a time (chromadb's embedded client can fail a query that overlaps a write),
    embedding aside.

    Args:
        path: folder of the embedded Chroma.
        url: a Chroma server, e.g. ``http://127.0.0.1:8000``.
        client: a chromadb client to use as is (the store does not close it).
        embedder: an `Embedder`, or anything `as_embedder` accepts.
        collection: the collection name; ``<collection>.meta`` is used too.
        retry: how calls to a server are retried when it cannot be reached or answers 429,
            502, 503 or 504, and how a search is retried when it meets a new collection's
            index still being written (default `RetryPolicy()`: 3 tries within about 2 s;
            ``RetryPolicy(attempts=1)`` for none). Every call the store makes is safe to repeat
            (see `ctxbudget.store.retry`). An embedded Chroma is not retried.

    Raises:
        StoreError: Chroma cannot be opened or reached (after the retries, for a server), or
            the folder of an embedded Chroma is read-only or its disk is full.
        StoreInputError: a malformed URL or collection name.

    >>> hi = Record(id="m1", kind="message", text="hi", session_id="s1")
    >>> ChromaStore("./memory").add([hi])[0].seq  # doctest: +SKIP
    0
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        url: str | None = None,
        client: ClientAPI | None = None,
        embedder: Embedder | None = None,
        collection: str = "ctxbudget",
        retry: RetryPolicy | None = None,
    ) -> None:
        self._name = valid_collection_name(collection)
        if retry is not None and not isinstance(retry, RetryPolicy):
            msg = f"retry must be a RetryPolicy or None, got {type(retry).__name__}"
            raise StoreInputError(msg)
        self._retry = RetryPolicy() if retry is None else retry
        self._folder: Path | None = None
        self._folder_lock: FolderLock | None = None
        chromadb, settings_cls, self._io_errors = import_chromadb()
        self._embedder: Embedder = default_embedder() if embedder is None else as_embedder(embedder)
        self._owns_client = client is None
        self._closed = False
        self._info: tuple[str, int] | None = None
        self._warned_name = False
        settings = settings_cls(anonymized_telemetry=False)
        if url is None and client is None and path is None:
            url = os.environ.get(_ENV_URL) or None
        if client is not None:
            self._location = f"the given Chroma client ({type(client).__name__})"
            self._hint = "check the client passed to ChromaStore"
            lock_key = ("client", str(id(client)), collection)
            self._client: Any = client
        elif url is not None:
            host, port, ssl = parse_url(url)
            self._location = f"the Chroma server at {url}"
            self._hint = (
                f"check that it is running and reachable (chroma run --host {host} --port {port}) "
                f"or fix the url / {_ENV_URL}"
            )
            lock_key = ("url", f"{host}:{port}", collection)
            # chromadb turns a refused connection into a ValueError ("Could not connect").
            refused: tuple[type[BaseException], ...] = (ValueError, *self._io_errors)
            self._client = retry_call(
                lambda: http_client(chromadb, host, port, ssl, settings, self._retry.timeout),
                policy=self._retry,
                catch=refused,
                fail=lambda exc, tries, spent: self._failure(
                    f"cannot connect to {self._location}", exc, tries, spent
                ),
                on_retry=lambda exc, tries, wait: logger.warning(
                    "cannot connect to %s (try %d of %d: %s); retrying in %.2f s",
                    self._location,
                    tries,
                    self._retry.attempts,
                    exc,
                    wait,
                ),
            )
            watch_status(self._client)
        else:
            folder = Path(path if path is not None else _DEFAULT_PATH).resolve()
            self._location = f"the embedded Chroma in {folder}"
            self._hint = f"check that {folder} is a writable folder no other process has open"
            lock_key = ("path", str(folder), collection)
            unusable: tuple[type[BaseException], ...] = (OSError, *self._io_errors)
            self._folder = folder
            # One process per folder (see ctxbudget.store.lock): a second one is refused here.
            self._folder_lock = hold_folder(folder)
            try:
                self._client = chromadb.PersistentClient(path=str(folder), settings=settings)
            except unusable as exc:
                self._folder_lock.release()
                forget_failed_system(str(folder))
                what = f"cannot open {self._location}"
                raise self._failure(what, exc, 1, 0.0) from exc
        self._lock = _lock_for(lock_key)
        self._shared = is_server(self._client)
        try:
            self._open_collections()
        except StoreError:
            self.close()
            raise

    def _open_collections(self) -> None:
        action = f"open collection {self._name!r}"
        self._records: Any = self._call(
            action,
            lambda: self._client.get_or_create_collection(
                self._name, embedding_function=None, metadata={"hnsw:space": "cosine"}
            ),
        )
        self._meta: Any = self._call(
            action,
            lambda: self._client.get_or_create_collection(
                f"{self._name}.meta", embedding_function=None, metadata={"ctxbudget": 1}
            ),
        )
        self._batch = max(1, int(self._call(action, self._client.get_max_batch_size)))
        space = (self._records.metadata or {}).get("hnsw:space")
        if space != "cosine":
            msg = (
                f"collection {self._name!r} in {self._location} uses the {space or 'l2'} distance "
                "but the store needs cosine; pass another collection name"
            )
            raise StoreError(msg)
        self._layout_pending = False
        self._check_layout()

    # -- layout ----------------------------------------------------------------------------

    def _check_layout(self) -> None:
        """Migrate a store of an older layout, refuse a newer one (see the module docstring)."""
        with self._lock:
            rows = self._rows(self._meta, ids=[_LAYOUT_ID], documents=False)
            version = int(rows[0][2].get("version", 1)) if rows else None
            if version == LAYOUT_VERSION:
                return
            if version is not None and version > LAYOUT_VERSION:
                msg = (
                    f"collection {self._name!r} in {self._location} has store layout {version}, "
                    f"written by a newer ctxbudget; this one reads layout {LAYOUT_VERSION}: "
                    "upgrade ctxbudget"
                )
                raise StoreError(msg)
            if version is None and not self._call("count records", self._records.count):
                self._layout_pending = True  # a new store: recorded with its first write
                return
            self._migrate_to_scoped_ids()
            self._write_layout()

    def _write_layout(self) -> None:
        entry = {"type": "layout", "version": LAYOUT_VERSION}
        self._upsert_meta({_LAYOUT_ID: entry}, action="record the store layout", wrote="")
        self._layout_pending = False

    def _migrate_to_scoped_ids(self) -> None:
        """Layout 1 -> 2: re-key every ``[namespace, id]`` record under its scoped key."""
        every = self._call("read", lambda: self._records.get(include=[]))
        old = [key for key in every["ids"] if _layout1_key(key)]
        if not old:
            return
        logger.warning(
            "migrating %d records of collection %r in %s to store layout %d (scoped ids)",
            len(old),
            self._name,
            self._location,
            LAYOUT_VERSION,
        )
        unsure = "; the migration is idempotent: open the store again to finish it"
        for start in range(0, len(old), self._batch):
            chunk = old[start : start + self._batch]
            got = self._call(
                "read records to migrate",
                partial(
                    self._records.get,
                    ids=chunk,
                    include=["embeddings", "documents", "metadatas"],
                ),
            )
            metas = [dict(m or {}) for m in got["metadatas"]]
            keys = [record_key(str(m["ns"]), stored_scope(m), str(m["rid"])) for m in metas]
            vectors = [[float(x) for x in vector] for vector in got["embeddings"]]
            documents = [doc if doc is not None else "" for doc in got["documents"]]
            self._call(
                "migrate records",
                partial(
                    self._records.upsert,
                    ids=keys,
                    embeddings=vectors,
                    documents=documents,
                    metadatas=metas,
                ),
                wrote=unsure,
                unsure=unsure,
            )
            self._call(
                "migrate records",
                partial(self._records.delete, ids=list(got["ids"])),
                wrote=unsure,
                unsure=unsure,
            )

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def embedder(self) -> Embedder:
        """The embedder used for records and queries."""
        return self._embedder

    @property
    def location(self) -> str:
        """Where the data is, for messages: the folder or the server URL."""
        return self._location

    def close(self) -> None:
        """Release the Chroma client if the store created it (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self._owns_client:
            close_client(self._client)
        if self._folder_lock is not None:
            self._folder_lock.release()

    def __enter__(self) -> ChromaStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _failure(
        self, what: str, exc: BaseException, tries: int, spent: float, wrote: str = ""
    ) -> StoreError:
        after = f" after {tries} attempts over {spent:.1f} s" if tries > 1 else ""
        problem = None if self._folder is None else write_problem(self._folder)
        if problem is not None:
            reason, fix = problem
            msg = f"cannot write to {self._folder}: {reason}; {what}: {exc}; {fix}, then try again"
            msg += wrote
        else:
            msg = f"{what}{after}: {exc}; {self._hint}{wrote}"
        return StoreError(msg)

    def _call(
        self,
        action: str,
        call: Callable[[], T],
        *,
        wrote: str = "",
        unsure: str = "",
        transient: Callable[[BaseException], bool] = is_transient,
    ) -> T:
        """Run one Chroma call, retried on a server; a failure becomes a StoreError.

        ``wrote`` ends the message when the call certainly changed nothing of its own (it never
        reached the server), ``unsure`` (if given) when it may have been applied in part.
        ``transient`` tells which failures of a server call are worth another try.
        """

        def fail(exc: BaseException, tries: int, spent: float) -> StoreError:
            done = unsure if unsure and not never_sent(exc) else wrote
            return self._failure(f"{self._location} failed to {action}", exc, tries, spent, done)

        def retrying(exc: BaseException, tries: int, wait: float) -> None:
            logger.warning(
                "%s failed to %s (try %d of %d: %s); retrying in %.2f s",
                self._location,
                action,
                tries,
                self._retry.attempts,
                exc,
                wait,
            )

        if self._shared:
            return retry_call(
                call,
                policy=self._retry,
                catch=self._io_errors,
                fail=fail,
                transient=transient,
                on_retry=retrying,
            )
        # An embedded Chroma is not safe for concurrent calls within one process: a query that
        # overlaps a write can read a vector index still being built or saved and fail with
        # "Error creating hnsw segment reader: Nothing found on disk" or "Error finding id"
        # (measured with chromadb 1.5.9: about 1 in 40 runs of 4 writers and 3 readers). So
        # every call on an embedded store holds the store's lock; embedding stays outside it.
        with self._lock:
            return retry_call(call, policy=_NO_RETRY, catch=self._io_errors, fail=fail)

    # -- low-level reads and writes --------------------------------------------------------

    def _rows(
        self,
        collection: Any,
        *,
        ids: Sequence[str] | None = None,
        where: dict[str, Any] | None = None,
        documents: bool = True,
    ) -> list[tuple[str, str, dict[str, Any]]]:
        include = ["metadatas", "documents"] if documents else ["metadatas"]
        chunks: Iterable[Sequence[str] | None] = (
            [None]
            if ids is None
            else (ids[i : i + self._batch] for i in range(0, len(ids), self._batch))
        )
        rows: list[tuple[str, str, dict[str, Any]]] = []
        for chunk in chunks:
            if chunk is not None and not chunk:
                continue
            got = self._call(
                "read",
                partial(
                    collection.get,
                    ids=None if chunk is None else list(chunk),
                    where=where,
                    include=include,
                ),
            )
            docs = got.get("documents") or [""] * len(got["ids"])
            metas = got.get("metadatas") or [{}] * len(got["ids"])
            rows.extend(zip(got["ids"], docs, (dict(m or {}) for m in metas), strict=True))
        return rows

    def _records_where(self, where: dict[str, Any]) -> list[Record]:
        return [decode_record(doc, meta) for _, doc, meta in self._rows(self._records, where=where)]

    def _fetch(self, keys: Sequence[str]) -> dict[str, Record]:
        return {
            key: decode_record(doc, meta) for key, doc, meta in self._rows(self._records, ids=keys)
        }

    def _delete(self, collection: Any, keys: Sequence[str]) -> None:
        for start in range(0, len(keys), self._batch):
            chunk = list(keys[start : start + self._batch])
            self._call(
                "delete",
                partial(collection.delete, ids=chunk),
                wrote="; some records may already be deleted: delete them again",
            )

    def _upsert_meta(
        self,
        entries: dict[str, dict[str, Any]],
        *,
        wrote: str,
        action: str = "write session counters",
    ) -> None:
        keys = list(entries)
        for start in range(0, len(keys), self._batch):
            chunk = keys[start : start + self._batch]
            self._call(
                action,
                partial(
                    self._meta.upsert,
                    ids=chunk,
                    embeddings=[[1.0]] * len(chunk),
                    metadatas=[entries[k] for k in chunk],
                ),
                wrote=wrote,
            )

    def _embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), _EMBED_CHUNK):
            chunk = texts[start : start + _EMBED_CHUNK]
            out = self._embedder.embed_documents(chunk)
            vectors.extend(validate_embeddings(out, count=len(chunk), source=self._embedder.name))
        return vectors

    def _store_info(self) -> tuple[str, int] | None:
        if self._info is None:
            rows = self._rows(self._meta, ids=["store"], documents=False)
            if rows:
                meta = rows[0][2]
                self._info = (str(meta.get("embedder")), int(meta["dim"]))
        return self._info

    def _check_dimension(self, dimension: int) -> None:
        info = self._store_info()
        name = self._embedder.name
        if info is None:
            entry = {"type": "store", "embedder": name, "dim": dimension}
            self._upsert_meta({"store": entry}, action="record the embedder", wrote="")
            self._info = (name, dimension)
            return
        stored_name, stored_dimension = info
        if stored_dimension != dimension:
            msg = (
                f"collection {self._name!r} holds {stored_dimension}-dimension vectors from "
                f"embedder {stored_name!r}, but {name!r} gives {dimension} dimensions; use the "
                "same embedder, or another collection for this one; nothing was written"
            )
            raise StoreInputError(msg)
        if stored_name != name and not self._warned_name:
            self._warned_name = True
            logger.warning(
                "collection %r was written with embedder %r, now used with %r: "
                "similarities across models are not comparable",
                self._name,
                stored_name,
                name,
            )

    # -- writing ---------------------------------------------------------------------------

    def add(self, records: Sequence[Record], *, replace: bool = False) -> list[Record]:
        """Store records; messages get their ``seq``.

        Everything is checked before anything is written. Re-adding a record whose content is
        already stored is a no-op; a stored id with different content is refused unless
        ``replace=True`` (a replaced message keeps its seq). ``seq`` and ``tokens`` do not count
        as content.

        Args:
            records: the records to store.
            replace: overwrite stored records with the same id and different content.

        Returns:
            The stored records, in the order given, with ``seq`` set on messages.

        Raises:
            StoreInputError: a malformed record, a metadata value Chroma cannot keep, an id twice
                in ``records``, a stored id with other content, or vectors of another dimension
                than the stored ones. Nothing was written.
            StoreError: Chroma failed; the message says what may have been written.
        """
        batch = list(records)
        self.check(batch)
        if not batch:
            return []
        keys = [record_key(r.namespace, scope_of(r), r.id) for r in batch]
        # Embedding is the slow part: do it before taking the lock, then plan again under it.
        vectors: dict[str, list[float]] = {}
        with self._unwritten():
            self._embed_needed(batch, keys, self._fetch(keys), vectors, replace=replace)
        with self._lock:
            with self._unwritten():
                stored = self._fetch(keys)
                actions = self._plan(batch, keys, stored, replace=replace)
                self._embed_needed(batch, keys, stored, vectors, replace=replace)
                dimensions = {len(v) for v in vectors.values()}
                if len(dimensions) > 1:
                    msg = (
                        f"embedder {self._embedder.name!r} returned vectors of "
                        f"{sorted(dimensions)} dimensions"
                    )
                    raise StoreInputError(msg + "; nothing was written")
                if dimensions:
                    self._check_dimension(dimensions.pop())
                if self._layout_pending:
                    self._write_layout()
            return self._write(batch, keys, stored, actions, vectors)

    @contextmanager
    def _unwritten(self) -> Iterator[None]:
        try:
            yield
        except StoreInputError:
            raise
        except StoreError as exc:
            msg = f"{exc}; nothing was written"
            raise StoreError(msg) from exc.__cause__

    def _embed_needed(
        self,
        batch: list[Record],
        keys: list[str],
        stored: dict[str, Record],
        vectors: dict[str, list[float]],
        *,
        replace: bool,
    ) -> None:
        todo = [
            (key, embedding_text(record))
            for record, key in zip(batch, keys, strict=True)
            if key not in vectors
            and (key not in stored or (replace and not same_content(record, stored[key])))
        ]
        if todo:
            out = self._embed([text for _, text in todo])
            vectors.update(zip((key for key, _ in todo), out, strict=True))

    def _plan(
        self, batch: list[Record], keys: list[str], stored: dict[str, Record], *, replace: bool
    ) -> list[str]:
        actions: list[str] = []
        conflicts: list[str] = []
        for index, (record, key) in enumerate(zip(batch, keys, strict=True)):
            old = stored.get(key)
            if old is None:
                if record.seq is not None:
                    raise bad_record(index, record, "seq is assigned by the store; pass seq=None")
                actions.append("new")
            elif same_content(record, old):
                actions.append("same")
            elif not replace:
                kind, name = scope_of(record)
                conflicts.append(f"{record.namespace}/{kind} {name}/{record.id}")
                actions.append("conflict")
            else:
                if record.seq is not None and record.seq != old.seq:
                    raise bad_record(
                        index, record, f"seq {record.seq} differs from the stored {old.seq}"
                    )
                actions.append("replace")
        if conflicts:
            msg = (
                f"{len(conflicts)} record(s) are already stored with different content: "
                f"{conflicts[:10]}; pass replace=True to overwrite them or use new ids; "
                "nothing was written"
            )
            raise StoreInputError(msg)
        return actions

    def _write(
        self,
        batch: list[Record],
        keys: list[str],
        stored: dict[str, Record],
        actions: list[str],
        vectors: dict[str, list[float]],
    ) -> list[Record]:
        results: dict[str, Record] = {}
        pending: list[str] = []
        numbering: dict[tuple[str, str], list[str]] = {}
        for record, key, action in zip(batch, keys, actions, strict=True):
            old = stored.get(key)
            if action == "same" and old is not None:
                results[key] = old
                continue
            seq: int | None = None
            if record.kind == "message" and record.session_id is not None:
                if (
                    old is not None
                    and old.kind == "message"
                    and old.session_id == record.session_id
                ):
                    seq = old.seq
                else:
                    numbering.setdefault((record.namespace, record.session_id), []).append(key)
            results[key] = dataclasses.replace(record, seq=seq)
            pending.append(key)
        if not pending:
            return [results[key] for key in keys]
        sessions = {
            (r.namespace, r.session_id) for k in pending if (r := results[k]).session_id is not None
        }
        with self._unwritten():
            counters = self._counters(sessions)
            for (ns, sid), session_keys in sorted(numbering.items()):
                start = self._last_seq(ns, sid, counters.get((ns, sid), -1)) + 1
                seqs = (
                    self._claim(ns, sid, start, len(session_keys))
                    if self._shared
                    else range(start, start + len(session_keys))
                )
                for seq, key in zip(seqs, session_keys, strict=True):
                    results[key] = dataclasses.replace(results[key], seq=seq)
        self._upsert_records(pending, results, vectors)
        self._update_sessions(pending, results, counters)
        return [results[key] for key in keys]

    def _upsert_records(
        self, pending: list[str], results: dict[str, Record], vectors: dict[str, list[float]]
    ) -> None:
        name = self._embedder.name
        total = len(pending)
        for start in range(0, total, self._batch):
            chunk = pending[start : start + self._batch]
            if start:
                done = _some([results[k].id for k in pending[:start]])
                before = f"; {start} of the {total} records were written ({done})"
                wrote = f"{before}, the others not: add() them all again (it is idempotent)"
                unsure = (
                    f"{before} and Chroma may have stored some of the others before failing: "
                    "add() them all again (it is idempotent)"
                )
            else:
                wrote = "; nothing was written"
                unsure = (
                    f"; Chroma may have stored some of these {total} records before failing "
                    "(they can show up once it recovers): add() them again (it is idempotent)"
                )
            self._call(
                "write records",
                partial(
                    self._records.upsert,
                    ids=chunk,
                    embeddings=[vectors[k] for k in chunk],
                    documents=[results[k].text for k in chunk],
                    metadatas=[encode_record(results[k], name) for k in chunk],
                ),
                wrote=wrote,
                unsure=unsure,
            )

    def _counters(self, sessions: Iterable[tuple[str, str]]) -> dict[tuple[str, str], int]:
        ids = [json_key("session", ns, sid) for ns, sid in sessions]
        rows = self._rows(self._meta, ids=ids, documents=False)
        return {(m["ns"], m["sid"]): int(m["last"]) for _, _, m in rows}

    def _last_seq(self, namespace: str, session_id: str, counter: int) -> int:
        # The counter is a hint; messages past it (a failed counter write, another process) win.
        where = self._session_where(namespace, session_id, {"seq": {"$gt": counter}})
        rows = self._rows(self._records, where=where, documents=False)
        return max([counter, *(int(m["seq"]) for _, _, m in rows)])

    def _session_where(
        self, namespace: str, session_id: str, *extra: dict[str, Any]
    ) -> dict[str, Any]:
        return all_of([{"ns": namespace}, {"sid": session_id}, {"kind": "message"}, *extra])

    def _claim(self, namespace: str, session_id: str, start: int, count: int) -> list[int]:
        # Several processes may number one session of a shared server at once. Chroma's add()
        # keeps the first write of an id and ignores later ones, so a claim entry per seq works
        # as compare-and-set: whoever reads its own token back owns the seq.
        token = uuid.uuid4().hex
        owned: list[int] = []
        candidate = start
        for _ in range(_CLAIM_ROUNDS):
            wanted = list(range(candidate, candidate + count - len(owned)))
            ids = [json_key("seq", namespace, session_id, str(seq)) for seq in wanted]
            claims = [
                {"type": "claim", "ns": namespace, "sid": session_id, "seq": seq, "owner": token}
                for seq in wanted
            ]
            self._call(
                "claim seqs",
                partial(self._meta.add, ids=ids, embeddings=[[1.0]] * len(ids), metadatas=claims),
            )
            rows = self._rows(self._meta, ids=ids, documents=False)
            owners = {key: meta.get("owner") for key, _, meta in rows}
            owned += [seq for seq, key in zip(wanted, ids, strict=True) if owners.get(key) == token]
            if len(owned) == count:
                return owned
            candidate = wanted[-1] + 1
        msg = (
            f"could not claim {count} seqs in session {session_id!r} after {_CLAIM_ROUNDS} "
            "rounds: other processes keep writing to it; retry the add"
        )
        raise StoreError(msg)

    def _update_sessions(
        self, pending: list[str], results: dict[str, Record], counters: dict[tuple[str, str], int]
    ) -> None:
        lasts: dict[tuple[str, str], int] = {}
        members: dict[str, dict[str, Any]] = {}
        for key in pending:
            record = results[key]
            if record.session_id is None:
                continue
            session = (record.namespace, record.session_id)
            last = max(lasts.get(session, -1), counters.get(session, -1))
            if record.kind == "message" and record.seq is not None:
                last = max(last, record.seq)
            lasts[session] = last
            if record.user_id is not None:
                member = {"type": "member", "ns": session[0], "sid": session[1]}
                member["uid"] = record.user_id
                members[json_key("member", *session, record.user_id)] = member
        entries = {
            json_key("session", *session): {"type": "session", "ns": ns, "sid": sid, "last": last}
            for session, last in lasts.items()
            if session not in counters or last - counters[session] >= _COUNTER_LAG
            for ns, sid in [session]
        }
        if members:
            known = {k for k, _, _ in self._rows(self._meta, ids=list(members), documents=False)}
            entries.update({k: v for k, v in members.items() if k not in known})
        if entries:
            self._upsert_meta(entries, wrote="; the records were written")

    # -- reading ---------------------------------------------------------------------------

    def _ids(
        self, collection: Any, where: dict[str, Any], *, limit: int | None = None
    ) -> list[str]:
        got = self._call("read", lambda: collection.get(where=where, include=[], limit=limit))
        return list(got["ids"])

    def recent(
        self, *, namespace: str, session_id: str, limit: int, before_seq: int | None = None
    ) -> list[Record]:
        """The last ``limit`` messages of a session, oldest first.

        Reads a ``seq`` range from the session's last seq, not the whole session.

        Args:
            namespace: the tenant.
            session_id: the session.
            limit: at most this many messages.
            before_seq: only messages with a smaller seq (to page backwards).
        """
        require_name("namespace", namespace)
        require_name("session_id", session_id)
        require_count("limit", limit)
        if before_seq is not None:
            require_count("before_seq", before_seq)
        if limit == 0:
            return []
        if before_seq is None:
            end = self._counters([(namespace, session_id)]).get((namespace, session_id), -1) + 1
            upper: list[dict[str, Any]] = []
        else:
            end = before_seq
            upper = [{"seq": {"$lt": before_seq}}]
        low = max(0, end - limit)
        while True:
            where = self._session_where(namespace, session_id, {"seq": {"$gte": low}}, *upper)
            found = self._records_where(where)
            if len(found) >= limit or low == 0:
                break
            # Fewer than asked: seqs have gaps (deleted messages); widen the range.
            low = max(0, end - 2 * (end - low))
        found.sort(key=lambda r: r.seq or 0)
        return found[-limit:]

    def session_messages(self, *, namespace: str, session_id: str) -> list[Record]:
        """Every message of a session, in seq order."""
        require_name("namespace", namespace)
        require_name("session_id", session_id)
        found = self._records_where(self._session_where(namespace, session_id))
        return sorted(found, key=lambda r: r.seq or 0)

    def check(self, records: Sequence[Record]) -> None:
        """Validate records as `add` does, writing nothing (for callers that write in batches).

        Raises:
            StoreInputError: naming the record (its index in ``records``) and what is wrong.
        """
        for index, record in enumerate(records):
            check_record(index, record)
        keys = [record_key(r.namespace, scope_of(r), r.id) for r in records]
        if len(set(keys)) != len(keys):
            counts = Counter(keys)
            twice = sorted({r.id for r, k in zip(records, keys, strict=True) if counts[k] > 1})
            msg = (
                f"ids {twice} appear more than once in one add(), in one scope; give each record "
                "its own id"
            )
            raise StoreInputError(msg + "; nothing was written")

    def find(
        self,
        *,
        namespace: str,
        kinds: Sequence[str] | None = None,
        session_id: str | None = None,
        user_id: str | None = None,
        seqs: Sequence[int] | None = None,
        where: dict[str, Any] | None = None,
    ) -> list[Record]:
        """Records that pass every filter, by metadata alone (no vector search).

        For small sets: a session's pinned facts and summaries, messages at given ``seqs``.
        Results are sorted by kind, seq and id.

        Args:
            namespace: the tenant.
            kinds: only these kinds.
            session_id: only this session's records.
            user_id: only this user's records.
            seqs: only messages at these sequence numbers.
            where: a filter over the records' user ``metadata`` keys (as in `search`).
        """
        clauses = where_filter(namespace, session_id, user_id, None, kinds, where)
        if clauses is None:
            return []
        if seqs is not None:
            numbers = sorted({require_count("seq", n) for n in seqs})
            if not numbers:
                return []
            clauses.append({"seq": {"$in": numbers}})
        found = self._records_where(all_of(clauses))
        found.sort(key=lambda r: (r.kind, -1 if r.seq is None else r.seq, r.id))
        return found

    def get(
        self,
        ids: Sequence[str],
        *,
        namespace: str,
        session_id: str | None = None,
        user_id: str | None = None,
        collection: str | None = None,
    ) -> list[Record]:
        """The records with these ids in one scope, in the order asked; unknown ids are skipped.

        Ids are unique per scope (`store.records.scope_of`), so the call names exactly one:
        ``session_id=`` (messages, session pins, tasks, summaries), ``user_id=`` (user-wide
        pins) or ``collection=`` (documents; ``""`` for records with no session, user or
        collection). A record with the same id in another scope is never returned. An id asked
        twice is returned once.

        Raises:
            StoreInputError: no scope or more than one, or a malformed id.

        >>> store.get(["m1"], namespace="default", session_id="s1")  # doctest: +SKIP
        [Record(id='m1', kind='message', ...)]
        """
        keys = self._scoped_keys("get", ids, namespace, session_id, user_id, collection)
        found = self._fetch(keys)
        return [found[k] for k in keys if k in found]

    def _scoped_keys(
        self,
        what: str,
        ids: Sequence[str],
        namespace: str,
        session_id: str | None,
        user_id: str | None,
        collection: str | None,
    ) -> list[str]:
        require_name("namespace", namespace)
        scope: Scope = scope_arg(what, session_id, user_id, collection)
        if isinstance(ids, str):
            msg = f"ids must be a list of ids, got the str {ids!r}; pass [{ids!r}]"
            raise StoreInputError(msg)
        wanted = list(dict.fromkeys(require_name("id", i) for i in ids))
        return [record_key(namespace, scope, i) for i in wanted]

    def search(
        self,
        query: str | Sequence[float],
        *,
        namespace: str,
        k: int,
        session_id: str | None = None,
        user_id: str | None = None,
        kinds: Sequence[str] | None = None,
        exclude_session_id: str | None = None,
        where: dict[str, Any] | None = None,
    ) -> list[Hit]:
        """The ``k`` records most similar to ``query`` that pass every filter.

        Filters are evaluated by Chroma, so a record outside them is never read.

        Args:
            query: a text (embedded with the store's embedder) or a vector.
            namespace: the tenant.
            k: at most this many hits.
            session_id: only this session's records.
            user_id: only this user's records.
            kinds: only these kinds.
            exclude_session_id: leave out this session (e.g. the one already in the prompt).
            where: a Chroma filter over the records' user ``metadata`` keys, e.g.
                ``{"topic": "travel"}`` or ``{"$or": [{"lang": "en"}, {"lang": "pt"}]}``.

        Returns:
            Hits by similarity, highest first, ties broken by id.
        """
        return self.search_many(
            [query],
            namespace=namespace,
            k=k,
            session_id=session_id,
            user_id=user_id,
            kinds=kinds,
            exclude_session_id=exclude_session_id,
            where=where,
        )[0]

    def search_many(
        self,
        queries: Sequence[str | Sequence[float]],
        *,
        namespace: str,
        k: int | Sequence[int],
        session_id: str | None = None,
        user_id: str | None = None,
        kinds: Sequence[str] | None = None,
        exclude_session_id: str | None = None,
        where: dict[str, Any] | None = None,
    ) -> list[list[Hit]]:
        """`search` for several queries under the same filters, in one call to Chroma.

        Each filtered query costs Chroma about as much as the filter itself, so a caller with
        several phrasings of one question (multi-query retrieval) saves most of the time.

        Args:
            queries: texts (embedded with the store's embedder) or vectors.
            namespace: the tenant.
            k: at most this many hits per query, or one such number per query.
            session_id: only this session's records.
            user_id: only this user's records.
            kinds: only these kinds.
            exclude_session_id: leave out this session.
            where: a Chroma filter over the records' user ``metadata`` keys, as in `search`.

        Returns:
            One list of hits per query, in the order of ``queries``, each by similarity,
            highest first, ties broken by id.
        """
        if isinstance(queries, str):
            msg = f"queries must be a list of queries, got the str {queries!r}; pass [{queries!r}]"
            raise StoreInputError(msg)
        queries = list(queries)
        ks: list[int] = (
            list(k) if isinstance(k, Sequence) and not isinstance(k, str) else [k] * len(queries)
        )
        if len(ks) != len(queries):
            msg = f"k gives {len(ks)} numbers for {len(queries)} queries; give one per query"
            raise StoreInputError(msg)
        for each in ks:
            require_count("k", each)
        clauses = where_filter(namespace, session_id, user_id, exclude_session_id, kinds, where)
        if clauses is None or not queries or max(ks) == 0:
            return [[] for _ in queries]
        vectors = [self._query_vector(q) for q in queries]
        info = self._store_info()
        if info is None:
            return [[] for _ in queries]  # nothing was ever written
        for vector in vectors:
            if info[1] != len(vector):
                msg = (
                    f"the query vector has {len(vector)} dimensions but collection "
                    f"{self._name!r} holds {info[1]}-dimension vectors from {info[0]!r}; "
                    "embed with the same model"
                )
                raise StoreInputError(msg)

        def run_query() -> Any:
            try:
                return self._records.query(
                    query_embeddings=vectors,
                    n_results=max(ks),
                    where=all_of(clauses),
                    include=["documents", "metadatas", "distances"],
                )
            except ValueError as exc:  # chromadb checks filters before sending them
                msg = f"invalid where filter {where!r}: {exc}"
                raise StoreInputError(msg) from exc

        # A server answers a search racing a new collection's first writes with "index not ready"
        # (see _chroma.index_not_ready): a read, so safe to try again once the write is done.
        got = self._call("search", run_query, transient=_search_transient)
        results: list[list[Hit]] = []
        for number, limit in enumerate(ks):
            hits = [
                Hit(
                    decode_record(doc, dict(meta or {})), max(-1.0, min(1.0, 1.0 - float(distance)))
                )
                for doc, meta, distance in zip(
                    got["documents"][number],
                    got["metadatas"][number],
                    got["distances"][number],
                    strict=True,
                )
            ]
            hits.sort(key=lambda h: (-h.similarity, h.record.id))
            results.append(hits[:limit])
        return results

    def _query_vector(self, query: object) -> list[float]:
        if isinstance(query, str):
            if not query.strip():
                msg = "query is empty; search with some text or a vector"
                raise StoreInputError(msg)
            out = [self._embedder.embed_query(query)]
            return validate_embeddings(out, count=1, source=self._embedder.name)[0]
        try:
            vector = [float(x) for x in query]  # type: ignore[attr-defined]
        except (TypeError, ValueError) as exc:
            msg = f"query must be a str or a sequence of floats, got {type(query).__name__}"
            raise StoreInputError(msg) from exc
        if not vector or not all(math.isfinite(x) for x in vector):
            msg = "the query vector must be non-empty and hold only finite numbers"
            raise StoreInputError(msg)
        return vector

    def list_sessions(self, *, namespace: str, user_id: str | None = None) -> list[str]:
        """The sessions of a namespace (or of one user in it) that hold records, sorted."""
        where: list[dict[str, Any]] = [{"ns": require_name("namespace", namespace)}]
        if user_id is None:
            where.append({"type": "session"})
        else:
            where += [{"type": "member"}, {"uid": require_name("user_id", user_id)}]
        rows = self._rows(self._meta, where=all_of(where), documents=False)
        return sorted({str(meta["sid"]) for _, _, meta in rows})

    def count(self, *, namespace: str | None = None) -> int:
        """How many records the store holds, in one namespace or in all."""
        if namespace is None:
            return int(self._call("count", self._records.count))
        return len(self._ids(self._records, {"ns": require_name("namespace", namespace)}))

    def stats(self) -> StoreStats:
        """Counts per kind, namespaces and sessions (reads every record's metadata)."""
        by_kind: dict[str, int] = {}
        namespaces: set[str] = set()
        sessions: set[tuple[str, str]] = set()
        rows = self._rows(self._records, documents=False)
        for _, _, meta in rows:
            by_kind[meta["kind"]] = by_kind.get(meta["kind"], 0) + 1
            namespaces.add(meta["ns"])
            if "sid" in meta:
                sessions.add((meta["ns"], meta["sid"]))
        return StoreStats(
            records=len(rows),
            by_kind=dict(sorted(by_kind.items())),
            namespaces=len(namespaces),
            sessions=len(sessions),
            embedder=self._embedder.name,
            location=self._location,
        )

    # -- deleting --------------------------------------------------------------------------

    def _remember_seqs(self, rows: list[tuple[str, str, dict[str, Any]]]) -> None:
        # The counter may trail the newest messages; before they go, move it past them so a
        # deleted message's seq is never handed out again in that session.
        highest: dict[tuple[str, str], int] = {}
        for _, _, meta in rows:
            if meta.get("kind") == "message" and "sid" in meta and "seq" in meta:
                session = (str(meta["ns"]), str(meta["sid"]))
                highest[session] = max(highest.get(session, -1), int(meta["seq"]))
        counters = self._counters(highest)
        entries = {
            json_key("session", ns, sid): {"type": "session", "ns": ns, "sid": sid, "last": last}
            for (ns, sid), last in highest.items()
            if last > counters.get((ns, sid), -1)
        }
        if entries:
            self._upsert_meta(entries, wrote="; nothing was deleted")

    def delete(
        self,
        ids: Sequence[str],
        *,
        namespace: str,
        session_id: str | None = None,
        user_id: str | None = None,
        collection: str | None = None,
        kinds: Sequence[str] | None = None,
    ) -> int:
        """Delete records by id in one scope (as `get` names it); returns how many existed.

        A record with the same id in another scope is never touched. With ``kinds``, only
        records of those kinds are deleted (``kinds=["pinned"]``: pins only). Session counters
        are kept: a deleted message's seq is not given out again.

        Raises:
            StoreInputError: no scope or more than one, a malformed id or an unknown kind.
        """
        keys = self._scoped_keys("delete", ids, namespace, session_id, user_id, collection)
        allowed: set[str] | None = None
        if kinds is not None:
            allowed = {kinds} if isinstance(kinds, str) else set(kinds)
            if not allowed <= KINDS:
                msg = f"kinds {sorted(allowed - KINDS)} are unknown; use some of {sorted(KINDS)}"
                raise StoreInputError(msg)
        with self._lock:
            rows = self._rows(self._records, ids=keys, documents=False)
            if allowed is not None:
                rows = [row for row in rows if row[2].get("kind") in allowed]
            self._remember_seqs(rows)
            self._delete(self._records, [key for key, _, _ in rows])
        return len(rows)

    def delete_session(self, *, namespace: str, session_id: str) -> int:
        """Delete every record of a session and its counter; returns how many records."""
        scope = all_of(
            [
                {"ns": require_name("namespace", namespace)},
                {"sid": require_name("session_id", session_id)},
            ]
        )
        with self._lock:
            keys = self._ids(self._records, scope)
            self._delete(self._records, keys)
            self._delete(self._meta, self._ids(self._meta, scope))
        return len(keys)

    def delete_user(self, *, namespace: str, user_id: str) -> int:
        """Delete every record of a user (messages, pinned, summaries...); returns how many.

        Sessions left without records lose their counters too.
        """
        ns = require_name("namespace", namespace)
        uid = require_name("user_id", user_id)
        with self._lock:
            rows = self._rows(
                self._records, where=all_of([{"ns": ns}, {"uid": uid}]), documents=False
            )
            members = self._rows(
                self._meta,
                where=all_of([{"type": "member"}, {"ns": ns}, {"uid": uid}]),
                documents=False,
            )
            sessions = {m["sid"] for _, _, m in rows if "sid" in m}
            sessions |= {m["sid"] for _, _, m in members}
            self._remember_seqs(rows)
            self._delete(self._records, [key for key, _, _ in rows])
            self._delete(self._meta, [key for key, _, _ in members])
            for sid in sorted(sessions):
                scope = all_of([{"ns": ns}, {"sid": sid}])
                if not self._ids(self._records, scope, limit=1):
                    self._delete(self._meta, self._ids(self._meta, scope))
        return len(rows)


def _layout1_key(key: str) -> bool:
    """Whether a Chroma id is a layout-1 record key, ``[namespace, id]``."""
    try:
        parts = json.loads(key)
    except ValueError:
        return False
    return isinstance(parts, list) and len(parts) == 2
