"""The names of a store's partitions: one Chroma collection per tenant and kind of data.

Every partition is named ``<store>.<letter>-<digest>``, the digest a hash of its namespace, kind
and owner, so any user id or session id makes a valid collection name. The record partitions
(`ctxbudget.store.layout`): ``u`` a user's, ``s`` a session's own (its first records had no
user), ``d`` a namespace's documents. Beside them, holding no records: ``l`` a session's context
log, ``e`` a namespace's documents' entity index, ``v`` keyed values (one per user and one shared
per namespace).
"""

from __future__ import annotations

import hashlib
import json

__all__ = [
    "docs_partition",
    "entity_partition",
    "log_partition",
    "partition_name",
    "session_partition",
    "user_partition",
    "values_partition",
]

_DIGEST = 32  # hex digits of a partition's digest: 128 bits


def partition_name(store: str, kind: str, namespace: str, owner: str) -> str:
    """The collection of one partition: ``<store>.<u|s|d>-<digest of namespace and owner>``.

    >>> partition_name("ctxbudget", "user", "default", "u1")[:12]
    'ctxbudget.u-'
    """
    digest = hashlib.sha256(json.dumps([namespace, kind, owner]).encode()).hexdigest()
    return f"{store}.{kind[0]}-{digest[:_DIGEST]}"


def user_partition(store: str, namespace: str, user_id: str) -> str:
    """The partition of a user: the user's pins and the sessions the user started."""
    return partition_name(store, "user", namespace, user_id)


def session_partition(store: str, namespace: str, session_id: str) -> str:
    """The partition of a session whose first records had no user."""
    return partition_name(store, "session", namespace, session_id)


def docs_partition(store: str, namespace: str) -> str:
    """The partition of a namespace's records with no session and no user (documents)."""
    return partition_name(store, "docs", namespace, "")


def values_partition(store: str, namespace: str, user_id: str | None) -> str:
    """The keyed values of a user (None: the namespace's shared ones; `ctxbudget.store.values`)."""
    return partition_name(store, "values", namespace, user_id or "")


def log_partition(store: str, namespace: str, session_id: str) -> str:
    """A session's context log (no records: see `ctxbudget.store.context_log`)."""
    return partition_name(store, "log", namespace, session_id)


def entity_partition(store: str, namespace: str) -> str:
    """A namespace's documents' entity index (no records: see `ctxbudget.store.doc_entities`)."""
    return partition_name(store, "entities", namespace, "")
