"""What a values search or listing asks for, checked before anything is read.

`search_args` and `listing_args` are the checks `ContextMemory.search_values` and
`ContextMemory.list_value_namespaces` make of their arguments, without a store: a door that
runs several operations at once (LangGraph's ``batch``) checks them all first, so a refused
one leaves the store as it was (a read before it would refresh ttls).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from ctxbudget.core.numbers import count, shown
from ctxbudget.errors import InvalidValueError
from ctxbudget.memory.inputs import check_query
from ctxbudget.memory.values.matching import check_filter
from ctxbudget.memory.values.model import check_prefix, page_args

__all__ = ["Listing", "Search", "listing_args", "search_args"]


class Search(NamedTuple):
    """A values search's arguments, checked (`search_args`)."""

    space: tuple[str, ...]
    query: str | None
    wanted: dict[str, Any] | None
    first: int
    skip: int


class Listing(NamedTuple):
    """A namespace listing's arguments, checked (`listing_args`)."""

    head: tuple[str, ...] | None
    tail: tuple[str, ...] | None
    depth: int | None
    first: int
    skip: int


def search_args(
    prefix: object,
    query: object,
    filter: object,
    limit: object,
    offset: object,  # noqa: A002
) -> Search:
    """A search's prefix, query (None: none), filter, limit and offset, or `InvalidValueError`."""
    space = check_prefix(prefix)
    wanted = check_filter(filter)
    first, skip = page_args(limit, offset)
    if query is not None and (not isinstance(query, str) or not query.strip()):
        msg = f"query must be a non-empty str or None, got {shown(query)}"
        raise InvalidValueError(msg)
    if query is not None:
        check_query(query)  # a lone surrogate refused as every door refuses it
    return Search(space, query, wanted, first, skip)


def listing_args(
    prefix: Sequence[str] | None,
    suffix: Sequence[str] | None,
    max_depth: object,
    limit: object,
    offset: object,
) -> Listing:
    """A listing's prefix, suffix, max_depth, limit and offset, or `InvalidValueError`."""
    head = None if prefix is None else check_prefix(prefix, "prefix")
    tail = None if suffix is None else check_prefix(suffix, "suffix")
    depth = (
        None
        if max_depth is None
        else count(max_depth, "max_depth", least=0, error=InvalidValueError)
    )
    first, skip = page_args(limit, offset)
    return Listing(head, tail, depth, first, skip)
