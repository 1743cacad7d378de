"""How a store lays out its data in Chroma: its collections, and the Chroma id of each record.

Two collections per store:

- ``<collection>`` holds every `Record` (messages, pinned facts, documents, summaries) with its
  vector (cosine space) and flat metadata: ``ns``, ``rid``, ``kind``, ``sid``, ``uid``, ``role``,
  ``seq``, ``ts``... Tuples and token counts are JSON strings; user metadata keys get an ``m.``
  prefix so they never clash with the store's own. The Chroma id is
  ``[namespace, scope kind, scope name, id]`` as JSON (`store.records.record_key`): ids are
  unique per namespace and scope (a record's session, else its user, else its document
  collection), so two sessions, users or namespaces may use the same id and never touch each
  other's records. `get` and `delete` name the scope of the ids they take (`scoped_keys`).
- ``<collection>.meta`` holds one entry per session (its last ``seq``, rewritten every few
  messages, so `recent` reads a ``seq >= last - n`` range instead of scanning the session), one
  per (session, user) pair (for `list_sessions` and `delete_user`) and one for the store (the
  embedder's name and dimension), and one for the store layout (``layout``: its version).

`Collections` is the one place that opens them and knows which holds what; every other part of
the store reaches them through it, at the time of each call. Layout versions: 1 keyed records
``[namespace, id]``; 2 (`LAYOUT_VERSION`, this one) adds the scope. Opening a store of another
version: `ctxbudget.store.migration`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import partial
from typing import Any

from ctxbudget.errors import StoreError, StoreInputError
from ctxbudget.store.connection import Connection
from ctxbudget.store.records import (
    Record,
    Scope,
    decode_record,
    record_key,
    require_name,
    scope_arg,
)

__all__ = ["LAYOUT_VERSION", "Collections", "Row", "scoped_keys"]

LAYOUT_VERSION = 2
"""The store layout this code writes (see the module docstring); older ones are migrated."""

Row = tuple[str, str, dict[str, Any]]
"""A row read from a collection: its Chroma id, its document and its metadata."""


class Collections:
    """The Chroma collections of one store, opened (created if new) on its connection.

    ``records`` holds every record, whatever its namespace, scope or user; ``meta`` holds the
    store's own entries (session counters, members, the embedder, the layout version). No other
    part of the store keeps a collection: each reads ``records`` or ``meta`` here when it calls
    Chroma, so a layout that puts records in several collections changes this class and the
    places that read ``records``.

    Raises:
        StoreError: Chroma failed, or ``records`` exists with another distance than cosine.
    """

    def __init__(self, conn: Connection, name: str) -> None:
        self.conn = conn
        self.name = name
        action = f"open collection {name!r}"
        self.records: Any = conn.call(
            action,
            lambda: conn.client.get_or_create_collection(
                name, embedding_function=None, metadata={"hnsw:space": "cosine"}
            ),
        )
        self.meta: Any = conn.call(
            action,
            lambda: conn.client.get_or_create_collection(
                f"{name}.meta", embedding_function=None, metadata={"ctxbudget": 1}
            ),
        )
        self.batch = max(1, int(conn.call(action, conn.client.get_max_batch_size)))
        space = (self.records.metadata or {}).get("hnsw:space")
        if space != "cosine":
            msg = (
                f"collection {name!r} in {conn.location} uses the {space or 'l2'} distance "
                "but the store needs cosine; pass another collection name"
            )
            raise StoreError(msg)

    def rows(
        self,
        collection: Any,
        *,
        ids: Sequence[str] | None = None,
        where: dict[str, Any] | None = None,
        documents: bool = True,
    ) -> list[Row]:
        """The rows of ``collection`` with these ids and/or passing ``where``."""
        include = ["metadatas", "documents"] if documents else ["metadatas"]
        chunks: Iterable[Sequence[str] | None] = (
            [None]
            if ids is None
            else (ids[i : i + self.batch] for i in range(0, len(ids), self.batch))
        )
        rows: list[Row] = []
        for chunk in chunks:
            if chunk is not None and not chunk:
                continue
            got = self.conn.call(
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

    def ids(self, collection: Any, where: dict[str, Any], *, limit: int | None = None) -> list[str]:
        """The ids of the rows of ``collection`` that pass ``where`` (at most ``limit``)."""
        got = self.conn.call("read", lambda: collection.get(where=where, include=[], limit=limit))
        return list(got["ids"])

    def records_where(self, where: dict[str, Any]) -> list[Record]:
        """The records that pass ``where``."""
        return [decode_record(doc, meta) for _, doc, meta in self.rows(self.records, where=where)]

    def fetch(self, keys: Sequence[str]) -> dict[str, Record]:
        """The stored records with these Chroma ids, by id (unknown ids left out)."""
        return {
            key: decode_record(doc, meta) for key, doc, meta in self.rows(self.records, ids=keys)
        }

    def delete(self, collection: Any, keys: Sequence[str]) -> None:
        """Delete these ids from ``collection``."""
        for start in range(0, len(keys), self.batch):
            chunk = list(keys[start : start + self.batch])
            self.conn.call(
                "delete",
                partial(collection.delete, ids=chunk),
                wrote="; some records may already be deleted: delete them again",
            )

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
) -> list[str]:
    """The Chroma ids of the records ``what`` (`get`, `delete`) names: ids in one scope.

    Raises:
        StoreInputError: no scope or more than one, ``ids`` a str, or a malformed id.
    """
    require_name("namespace", namespace)
    scope: Scope = scope_arg(what, session_id, user_id, collection)
    if isinstance(ids, str):
        msg = f"ids must be a list of ids, got the str {ids!r}; pass [{ids!r}]"
        raise StoreInputError(msg)
    wanted = list(dict.fromkeys(require_name("id", i) for i in ids))
    return [record_key(namespace, scope, i) for i in wanted]
