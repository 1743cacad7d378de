"""Ids of ctxbudget's own items, in a space no caller id can reach.

ctxbudget adds items of its own to what callers give (the system prompt, the current query,
tool schemas, pinned facts passed as strings, summaries made on the fly). Their ids all start
with `INTERNAL_PREFIX`, and every place that takes an id from a caller (messages, pins,
records, items passed to the adapters) refuses ids with that prefix through `check_caller_id`,
so a caller's ``"system"`` or ``"query"`` is just another id and can never displace, duplicate
or break an internal item.

A stored record's id is unique in its `Scope` only (a session, a user or a document
collection): two knowledge bases may both hold a ``guide#0``. An item's identity is therefore
(scope, the caller's id): an item built from a record carries both as fields
(`ContextItem.record_id`, `ContextItem.scope`, together its `ItemRef`), and its item id, which
must be unique in one assembly, is `scoped_id` of them whenever the record is not the current
session's own. `ref_of_id` reads such an id back, so a report read later (the inclusion log)
names the caller's ids too.

>>> internal_id("system")
'ctxbudget:system'
>>> internal_id("tool", "search")
'ctxbudget:tool:search'
>>> is_internal("system"), is_internal(internal_id("query"))
(False, True)
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ctxbudget.core.numbers import shown
from ctxbudget.errors import InvalidItemError

__all__ = [
    "INTERNAL_PREFIX",
    "SCOPE_KINDS",
    "ItemRef",
    "Scope",
    "check_caller_id",
    "internal_id",
    "is_internal",
    "ref_of_id",
    "scoped_id",
]

INTERNAL_PREFIX = "ctxbudget:"

Scope = tuple[str, str]
"""Where a record id is unique: ``("session", id)``, ``("user", id)``, ``("collection", name)``."""

SCOPE_KINDS: tuple[str, ...] = ("session", "user", "collection")


@dataclass(frozen=True, slots=True)
class ItemRef:
    """An item as its caller knows it: the caller's own ``id`` and the ``scope`` it is unique in.

    ``scope`` is None for an item the caller passed itself (a message, a node, an
    ``extra=`` item), whose item id is the caller's id.

    >>> str(ItemRef("guide#0", ("collection", "kb")))
    'guide#0 (collection kb)'
    """

    id: str
    scope: Scope | None = None

    def __str__(self) -> str:
        if self.scope is None:
            return self.id
        return f"{self.id} ({self.scope[0]} {self.scope[1]})"


def scoped_id(scope: Scope, record_id: str) -> str:
    """The item id of a record of ``scope``, unique across scopes, in ctxbudget's id space.

    >>> scoped_id(("collection", "kb"), "guide#0")
    'ctxbudget:collection:["kb","guide#0"]'
    """
    kind, name = scope
    key = json.dumps([name, record_id], ensure_ascii=False, separators=(",", ":"))
    return internal_id(kind, key)


def ref_of_id(item_id: str) -> ItemRef | None:
    """The `ItemRef` a `scoped_id` stands for; None for any other id.

    >>> ref_of_id('ctxbudget:session:["s3","s3-0011"]')
    ItemRef(id='s3-0011', scope=('session', 's3'))
    >>> ref_of_id("ctxbudget:system") is None
    True
    """
    if not item_id.startswith(INTERNAL_PREFIX):
        return None
    kind, _, key = item_id[len(INTERNAL_PREFIX) :].partition(":")
    if kind not in SCOPE_KINDS or not key.startswith("["):
        return None
    try:
        parts = json.loads(key)
    except ValueError:
        return None
    if (
        not isinstance(parts, list)
        or len(parts) != 2
        or not all(isinstance(part, str) for part in parts)
    ):
        return None
    return ItemRef(parts[1], (kind, parts[0]))


def internal_id(kind: str, key: str | int | None = None) -> str:
    """The id of one of ctxbudget's own items: ``ctxbudget:<kind>[:<key>]``."""
    return INTERNAL_PREFIX + kind if key is None else f"{INTERNAL_PREFIX}{kind}:{key}"


def is_internal(item_id: str) -> bool:
    """Whether ``item_id`` is in ctxbudget's own id space."""
    return item_id.startswith(INTERNAL_PREFIX)


def check_caller_id(item_id: str, where: str) -> str:
    """Return ``item_id`` if a caller may use it; raise if it is in the internal id space.

    Args:
        item_id: the id a caller gave.
        where: what carried it, for the message (``"message 3"``, ``"pin"``).

    Raises:
        InvalidItemError: the id is not a non-empty str, or starts with `INTERNAL_PREFIX` (a
            ValueError).
    """
    given: object = item_id
    if not isinstance(given, str) or not given:
        msg = f"{where}: an id must be a non-empty str, got {shown(given)}"
        raise InvalidItemError(msg)
    if is_internal(item_id):
        msg = (
            f"{where}: id {item_id!r} starts with {INTERNAL_PREFIX!r}, which ctxbudget keeps for "
            "its own items (system prompt, query, tools); give it another id"
        )
        raise InvalidItemError(msg)
    return item_id
