"""Ids of ctxbudget's own items, in a space no caller id can reach.

ctxbudget adds items of its own to what callers give (the system prompt, the current query,
tool schemas, pinned facts passed as strings, summaries made on the fly). Their ids all start
with `INTERNAL_PREFIX`, and every place that takes an id from a caller (messages, pins,
records, items passed to the adapters) refuses ids with that prefix through `check_caller_id`,
so a caller's ``"system"`` or ``"query"`` is just another id and can never displace, duplicate
or break an internal item.

>>> internal_id("system")
'ctxbudget:system'
>>> internal_id("tool", "search")
'ctxbudget:tool:search'
>>> is_internal("system"), is_internal(internal_id("query"))
(False, True)
"""

from __future__ import annotations

from ctxbudget.errors import InvalidItemError

__all__ = ["INTERNAL_PREFIX", "check_caller_id", "internal_id", "is_internal"]

INTERNAL_PREFIX = "ctxbudget:"


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
        msg = f"{where}: an id must be a non-empty str, got {given!r:.80}"
        raise InvalidItemError(msg)
    if is_internal(item_id):
        msg = (
            f"{where}: id {item_id!r} starts with {INTERNAL_PREFIX!r}, which ctxbudget keeps for "
            "its own items (system prompt, query, tools); give it another id"
        )
        raise InvalidItemError(msg)
    return item_id
