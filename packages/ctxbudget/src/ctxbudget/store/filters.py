"""Chroma where-filters: combining clauses, the caller's metadata filters, document collections."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctxbudget.errors import StoreInputError
from ctxbudget.store.records import KINDS, USER_PREFIX, require_name

__all__ = ["all_of", "document_filter", "user_where", "where_filter"]


def all_of(clauses: list[dict[str, Any]]) -> dict[str, Any]:
    """Chroma's ``$and`` of these clauses (one clause alone, as Chroma requires)."""
    # Chroma rejects an $and of fewer than two clauses.
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


def where_filter(
    namespace: str,
    session_id: str | None,
    user_id: str | None,
    exclude_session_id: str | None,
    kinds: Sequence[str] | None,
    where: dict[str, Any] | None,
) -> list[dict[str, Any]] | None:
    """The Chroma ``where`` clauses of a read (None: nothing can match, e.g. no kinds)."""
    clauses: list[dict[str, Any]] = [{"ns": require_name("namespace", namespace)}]
    if session_id is not None:
        clauses.append({"sid": require_name("session_id", session_id)})
    if user_id is not None:
        clauses.append({"uid": require_name("user_id", user_id)})
    if exclude_session_id is not None:
        clauses.append({"sid": {"$ne": require_name("exclude_session_id", exclude_session_id)}})
    if kinds is not None:
        wanted = [kinds] if isinstance(kinds, str) else list(kinds)
        unknown = [kind for kind in wanted if kind not in KINDS]
        if unknown:
            msg = f"kinds {unknown} are unknown; use some of {sorted(KINDS)}"
            raise StoreInputError(msg)
        if not wanted:
            return None
        clauses.append({"kind": {"$in": wanted}})
    if where is not None:
        clauses.append(_user_where(where))
    return clauses


def user_where(where: dict[str, Any] | None) -> dict[str, Any] | None:
    """The caller's filter over user metadata keys, as Chroma evaluates it (None: none).

    Raises:
        StoreInputError: not a non-empty dict of metadata keys, ``$and`` and ``$or``.
    """
    return None if where is None else _user_where(where)


def _user_where(where: object) -> dict[str, Any]:
    if not isinstance(where, dict) or not where:
        msg = f"where must be a non-empty dict over metadata keys, got {where!r}"
        raise StoreInputError(msg)
    if len(where) > 1:
        return {"$and": [_user_where({key: value}) for key, value in where.items()]}
    ((key, value),) = where.items()
    if key in ("$and", "$or"):
        if not isinstance(value, list) or not value:
            msg = f"where {key} needs a non-empty list of filters, got {value!r}"
            raise StoreInputError(msg)
        if len(value) == 1:
            return _user_where(value[0])
        return {key: [_user_where(item) for item in value]}
    if not isinstance(key, str) or not key or key.startswith("$"):
        msg = f"where key {key!r} is not a metadata key, $and or $or"
        raise StoreInputError(msg)
    return {USER_PREFIX + key: value}


def document_filter(collections: bool | str | Sequence[str]) -> dict[str, Any] | None:
    """The ``where`` that restricts a search to document collections (None: all of them).

    ``collections`` is what ``ContextMemory.assemble(documents=...)`` takes: True for every
    collection, a name, or a list of names (`ContextMemory.add_documents` ``collection=``).

    >>> document_filter(["kb", "faq"])
    {'doc_namespace': {'$in': ['kb', 'faq']}}
    """
    if isinstance(collections, bool):
        return None
    names = [collections] if isinstance(collections, str) else list(collections)
    if not names:
        msg = (
            "collections is an empty list: name at least one document collection, or pass "
            "True for all of them (False: no documents)"
        )
        raise StoreInputError(msg)
    if len(names) == 1:
        return {"doc_namespace": names[0]}
    return {"doc_namespace": {"$in": names}}
