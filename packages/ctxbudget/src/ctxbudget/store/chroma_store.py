"""Where memory is kept: `ChromaStore`, over an embedded Chroma or a Chroma server.

The store is the only part of ctxbudget that does I/O; `ChromaStore` is its one public class,
and each part of its work has a module of its own (`ctxbudget.store` lists them).

Isolation and cost: every read takes a namespace and touches only the collections of its
session, user or namespace (`ctxbudget.store.layout`); in them it filters on keys unique to its
scope (`ctxbudget.store.keys`) and checks the full filter on each record. Every warning of a
store (retries, migrations, a changed embedder) is logged as ``ctxbudget.store.chroma_store``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxbudget.embed.base import Embedder, as_embedder, default_embedder
from ctxbudget.errors import StoreError, StoreInputError
from ctxbudget.store.client import (
    Closable,
    import_chromadb,
    run_callbacks,
    valid_collection_name,
)
from ctxbudget.store.connection import Connection
from ctxbudget.store.context_log import ContextLogs
from ctxbudget.store.deletes import DeleteMethods, Deleter
from ctxbudget.store.doc_entities import DocEntities
from ctxbudget.store.journal import JOURNAL_FOLDER, replay
from ctxbudget.store.layout import LAYOUT_VERSION, Collections, scoped_keys
from ctxbudget.store.migration import LayoutVersion
from ctxbudget.store.reads import Reader, SessionView
from ctxbudget.store.records import (
    KINDS,
    Hit,
    Kind,
    MetadataValue,
    Record,
    StoreStats,
)
from ctxbudget.store.retry import RetryPolicy
from ctxbudget.store.search import search_many
from ctxbudget.store.sequences import Sequences
from ctxbudget.store.session_methods import SessionMethods
from ctxbudget.store.sessions import Sessions
from ctxbudget.store.values import ValueStore
from ctxbudget.store.vectors import Vectors
from ctxbudget.store.writes import Writer, check_batch

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
    "SessionView",
    "StoreStats",
]

logger = logging.getLogger(__name__)


class ChromaStore(Closable, SessionMethods, DeleteMethods):
    """Records and their vectors in Chroma: embedded (a local folder) or a Chroma server.

    Which Chroma: an explicit ``client``, else ``url`` (a server), else an embedded Chroma in
    ``path``; with none of the three, the server in the environment variable
    ``CTXBUDGET_CHROMA_URL`` if set, else an embedded Chroma in ``./.ctxbudget``. Telemetry is
    off. The default embedder is `OnnxEmbedder` (`default_embedder`), loaded on first use. A
    store is safe to share between threads; on an embedded Chroma its calls run one at a time
    (chromadb's embedded client can fail a query that overlaps a write), embedding aside.

    Args:
        path: folder of the embedded Chroma.
        url: a Chroma server, e.g. ``http://127.0.0.1:8000``.
        client: a chromadb client to use as is (the store does not close it).
        embedder: an `Embedder`, or anything `as_embedder` accepts.
        collection: the collection name; ``<collection>.meta`` is used too.
        retry: how server calls are retried (unreachable, 429/502/503/504, a search meeting a
            new collection's index still being written): `ctxbudget.store.retry`; default
            `RetryPolicy()`, 3 tries within about 2 s. An embedded Chroma is not retried.

    Raises:
        StoreError: Chroma cannot be opened or reached (after the retries, for a server), or
            the folder of an embedded Chroma is read-only or its disk is full.
        StoreInputError: a malformed URL or collection name.

    >>> hi = Record(id="m1", kind="message", text="hi", session_id="s1")
    >>> ChromaStore("./memory").add([hi])[0].seq  # doctest: +SKIP
    0
    """

    _open_again = "ChromaStore or ContextMemory"  # a memory closes its store with it

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
        chroma = import_chromadb()
        self._embedder: Embedder = default_embedder() if embedder is None else as_embedder(embedder)
        self._conn = Connection(
            chroma, collection, retry, logger, path=path, url=url, client=client
        )
        self._client: Any = self._conn.client
        self._on_close: list[Callable[[], None]] = []
        try:
            cols = self._collections = Collections(self._conn, self._name)
            self._sessions = Sessions(cols)
            self._layout = LayoutVersion(cols, self._sessions)
            self._layout.check()
            self._vectors = Vectors(self._embedder, cols)
            sequences = Sequences(cols)
            self._writer = Writer(cols, self._vectors, self._sessions, sequences, self._layout)
            self._reader = Reader(cols, self._sessions)
            self.values = ValueStore(cols, self._vectors)
            """The store's keyed values (`ctxbudget.store.values`)."""
            self._deleter = Deleter(cols, self._sessions, self.values)
            self.on_close(self._deleter.logs.close)  # queued log records are written first
            if self.folder is not None:  # what a process that died acknowledged, stored first
                replay(self.folder / JOURNAL_FOLDER / self._name, self.add, get=self.get)
        except StoreError:
            self.close()
            raise

    @property
    def embedder(self) -> Embedder:
        """The embedder used for records and queries."""
        return self._embedder

    @property
    def logs(self) -> ContextLogs:
        """The context logs of `ContextMemory` assemblies (`ctxbudget.store.context_log`)."""
        return self._deleter.logs

    @property
    def doc_entities(self) -> DocEntities:
        """The entities documents name (`ctxbudget.store.doc_entities`)."""
        return self._deleter.entities

    @property
    def location(self) -> str:
        """Where the data is, for messages: the folder or the server URL."""
        return self._conn.location

    @property
    def key(self) -> tuple[str, ...]:
        """What names the store in this process: stores with the same key hold the same data."""
        return self._conn.key

    @property
    def folder(self) -> Path | None:
        """The folder of an embedded Chroma opened by this store (None: a server or a client)."""
        return self._conn.folder

    @property
    def collection(self) -> str:
        """The store's name: its collections are named after it (`ctxbudget.store.layout`)."""
        return self._name

    def on_close(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` first when the store closes (a write-behind stores its queue)."""
        self._on_close.append(callback)

    def close(self) -> None:
        """Release the Chroma client if the store created it (idempotent; then see `Closable`)."""
        failed = run_callbacks(getattr(self, "_on_close", []))  # the client is released anyway
        self._closed = True
        self._conn.close()
        if failed is not None:
            raise failed

    def _where(self) -> str:
        return f"{self.location}, collection {self._name!r}"

    def __enter__(self) -> ChromaStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing ---------------------------------------------------------------------------
    def add(self, records: Sequence[Record], *, replace: bool = False) -> list[Record]:
        """Store records; messages get their ``seq``.

        Everything is checked before anything is written. Re-adding a record whose content is
        already stored is a no-op (a message that differs only by its timestamp too: the first
        stays; `ctxbudget.store.validate.same_write`); a stored id with different content is
        refused unless ``replace=True`` (a replaced message keeps its seq). ``seq`` and
        ``tokens`` do not count as content.

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
        return self._writer.add(batch, replace=replace)

    def check(self, records: Sequence[Record]) -> None:
        """Validate records as `add` does, writing nothing; raises `StoreInputError` naming one."""
        check_batch(records)

    # -- reading ---------------------------------------------------------------------------
    def recent(
        self, *, namespace: str, session_id: str, limit: int, before_seq: int | None = None
    ) -> list[Record]:
        """The last ``limit`` messages of a session, oldest first (by their seqs, not a scan).

        Args:
            namespace: the tenant.
            session_id: the session.
            limit: at most this many messages.
            before_seq: only messages with a smaller seq (to page backwards).
        """
        return self._reader.recent(
            namespace=namespace, session_id=session_id, limit=limit, before_seq=before_seq
        )

    def session_messages(self, *, namespace: str, session_id: str) -> list[Record]:
        """Every message of a session, in seq order."""
        return self._reader.session_messages(namespace=namespace, session_id=session_id)

    def message_vectors(
        self, *, namespace: str, session_id: str, seqs: Sequence[int] | None = None
    ) -> list[tuple[Record, list[float]]]:
        """A session's messages (or those at ``seqs``) with their vectors, for a copy in memory."""
        return self._reader.message_vectors(namespace=namespace, session_id=session_id, seqs=seqs)

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

        For small sets: a session's pinned facts and summaries, messages at given ``seqs``;
        sorted by kind, seq and id. Filters as in `search_many`, and ``seqs``: only messages at
        these sequence numbers.
        """
        return self._reader.find(
            namespace=namespace,
            kinds=kinds,
            session_id=session_id,
            user_id=user_id,
            seqs=seqs,
            where=where,
        )

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
        scope, keys = scoped_keys("get", ids, namespace, session_id, user_id, collection)
        return self._reader.get(scope, keys, namespace=namespace)

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
        """The ``k`` records most similar to ``query`` (a text or a vector) passing every filter.

        Filters are evaluated by Chroma, so a record outside them is never read; arguments as in
        `search_many`, e.g. ``where={"$or": [{"lang": "en"}, {"lang": "pt"}]}``. Returns hits by
        similarity, highest first, ties broken by id.
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
        elsewhere: Sequence[str] | None = None,
    ) -> list[list[Hit]]:
        """`search` for several queries under the same filters: one Chroma call per collection.

        Args:
            queries: texts (embedded with the store's embedder) or vectors.
            namespace: the tenant.
            k: at most this many hits per query, or one such number per query.
            session_id: only this session's records.
            user_id: only this user's records.
            kinds: only these kinds.
            exclude_session_id: leave out this session.
            where: a Chroma filter over the records' user ``metadata`` keys, as in `search`.
            elsewhere: the partitions of other owners that hold ``user_id``'s messages, as the
                caller read them just before (`Stamps.elsewhere`, `SessionView.elsewhere`);
                None: read here.

        Returns:
            One list of hits per query, in the order of ``queries``, each by similarity,
            highest first, ties broken by id.
        """
        return search_many(
            self._collections,
            self._sessions,
            self._vectors,
            queries,
            namespace=namespace,
            k=k,
            session_id=session_id,
            user_id=user_id,
            kinds=kinds,
            exclude_session_id=exclude_session_id,
            where=where,
            elsewhere=elsewhere,
        )

    def list_sessions(
        self, *, namespace: str, user_id: str | None = None, holding: bool = True
    ) -> list[str]:
        """The sessions of a namespace (or of one user in it) that hold records, sorted.

        ``holding=False`` (with a user): every session the user wrote in, whether a record of
        theirs is left there or not.
        """
        return self._reader.list_sessions(namespace=namespace, user_id=user_id, holding=holding)

    def count(self, *, namespace: str | None = None) -> int:
        """How many records the store holds, in one namespace or in all."""
        return self._reader.count(namespace=namespace)

    def stats(self) -> StoreStats:
        """Counts per kind, namespaces and sessions (reads every record's metadata)."""
        return self._reader.stats(embedder=self._embedder.name)
