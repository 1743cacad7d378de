"""Selective keys: what reads filter on, so that Chroma's cost follows the session, not the store.

Chroma 1.5 (embedded and server alike) keeps the metadata of every collection of a folder in one
SQLite index and evaluates each clause of a ``where`` against that whole index: a clause that
many records match anywhere in the store (``kind == "message"``, ``ns == "default"``,
``seq >= 0``) costs in proportion to all of them, even inside a collection of a few hundred
records. Measured in a store of 500,000 records over 2,500 collections (docs/architecture.md):
a ``get`` in a 1,000-record collection took 190-205 ms with a ``kind`` or ``ns`` clause and
2-4 ms with a clause only that session's records match.

So every record carries keys unique to its scope, reads filter on those alone (`where_keys`),
and what comes back is checked against the whole filter (`matches`), so results are exact:

- ``at``: its scope and kind, ``<digest of namespace and scope>/<kind>``;
- ``uk``: for a record with a user, ``<digest of namespace and user>/<kind>``;
- ``nk``: for a record with neither session nor user, ``<digest of namespace>/<kind>``;
- ``sk``: for a message in a session, an integer: the session's digest (39 bits) then its seq
  (24 bits), so a range of a session's messages is an ``$in`` of a few integers.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = [
    "KEY_FIELDS",
    "address",
    "key_fields",
    "matches",
    "seq_keys",
    "where_keys",
]

KEY_FIELDS = ("at", "uk", "nk", "sk")
"""The metadata fields that hold selective keys (not part of a `Record`)."""

_KINDS = ("document", "message", "pinned", "summary")
_SEQ_BITS = 24
_SESSION_BITS = 39


def _digest(*parts: str) -> str:
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]


def address(namespace: str, scope: tuple[str, str], kind: str) -> str:
    """The ``at`` key of a record of ``kind`` in ``scope`` (`store.records.scope_of`)."""
    return f"{_digest(namespace, *scope)}/{kind}"


def _user_key(namespace: str, user_id: str, kind: str) -> str:
    return f"{_digest(namespace, 'uid', user_id)}/{kind}"


def _namespace_key(namespace: str, kind: str) -> str:
    return f"{_digest(namespace)}/{kind}"


def seq_keys(namespace: str, session_id: str, seqs: Iterable[int]) -> list[int]:
    """The ``sk`` keys of a session's messages at these seqs."""
    base = int(_digest(namespace, "session", session_id), 16) >> (64 - _SESSION_BITS)
    return [(base << _SEQ_BITS) | (seq & ((1 << _SEQ_BITS) - 1)) for seq in seqs]


def key_fields(
    namespace: str,
    scope: tuple[str, str],
    kind: str,
    session_id: str | None,
    user_id: str | None,
    seq: int | None,
) -> dict[str, Any]:
    """The selective keys of a record (see the module docstring)."""
    keys: dict[str, Any] = {"at": address(namespace, scope, kind)}
    if user_id is not None:
        keys["uk"] = _user_key(namespace, user_id, kind)
    if session_id is None and user_id is None:
        keys["nk"] = _namespace_key(namespace, kind)
    if session_id is not None and kind == "message" and seq is not None:
        keys["sk"] = seq_keys(namespace, session_id, [seq])[0]
    return keys


def where_keys(
    namespace: str,
    session_id: str | None,
    user_id: str | None,
    exclude_session_id: str | None,
    kinds: Sequence[str] | None,
    where: dict[str, Any] | None = None,
) -> dict[str, Any] | None:
    """The ``where`` of a read on selective keys only, and the caller's metadata filter.

    A superset of what the full filter selects (`matches` checks the rest); None: no filter.
    """
    wanted = list(kinds) if kinds is not None else list(_KINDS)
    clauses: list[dict[str, Any]] = []
    if session_id is not None:
        clauses.append(
            {"at": {"$in": [address(namespace, ("session", session_id), k) for k in wanted]}}
        )
    elif user_id is not None:
        clauses.append({"uk": {"$in": [_user_key(namespace, user_id, k) for k in wanted]}})
    elif set(wanted) <= {"document"}:
        clauses.append({"nk": {"$in": [_namespace_key(namespace, k) for k in wanted]}})
    if exclude_session_id is not None:
        away = [address(namespace, ("session", exclude_session_id), k) for k in _KINDS]
        clauses.append({"at": {"$nin": away}})
    if where is not None:
        clauses.append(where)
    if not clauses:
        return None  # a read of a whole namespace: every partition of it, checked by `matches`
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


def matches(
    meta: dict[str, Any],
    namespace: str,
    session_id: str | None,
    user_id: str | None,
    exclude_session_id: str | None,
    kinds: Sequence[str] | None,
) -> bool:
    """Whether a stored record's metadata passes the full filter (`where_keys` is looser)."""
    return (
        meta.get("ns") == namespace
        and (session_id is None or meta.get("sid") == session_id)
        and (user_id is None or meta.get("uid") == user_id)
        and (exclude_session_id is None or meta.get("sid") != exclude_session_id)
        and (kinds is None or meta.get("kind") in kinds)
    )
