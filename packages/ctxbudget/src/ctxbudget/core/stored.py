"""`stored_item`, `stored_items`: `ContextItem`s of stored records' fields, built at search speed.

A search offers hundreds of stored records per call (`ctxbudget.memory.reading.retrieval`),
and the dataclass's constructor sets each of a frozen item's twenty fields through
``object.__setattr__``, one call at a time. `stored_items` builds a call's hundreds in one
loop: a row whose fields pass the checks `is_plain` makes of them (`_plain`, the check the
constructor's ``__post_init__`` starts with) has its slots set there; any other row goes through
the constructor, with its conversions and errors (tests/reliability/test_boundaries.py checks
both agree, for every class of values). `stored_item` is one row's.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import fields

from ctxbudget.core.ids import SCOPE_KINDS
from ctxbudget.core.items import ROLES, ContextItem, Shrink, Tier

__all__ = ["Row", "stored_item", "stored_items"]

Row = tuple[
    str,  # id
    str,  # text
    int,  # tier
    float,  # score
    str | None,  # role
    float | None,  # timestamp
    tuple[str, ...],  # summary_of
    str | None,  # source
    str | None,  # name
    str | None,  # record_id
    tuple[str, str] | None,  # scope
]
"""`stored_item`'s fields in its order: a row of `stored_items`."""

_SETTERS = {f.name: getattr(ContextItem, f.name).__set__ for f in fields(ContextItem)}
_ORDER = (
    *("id", "text", "tier", "score", "role", "timestamp", "summary_of", "source", "name"),
    *("record_id", "scope", "cluster_id", "tool_call_id", "embedding", "tokens", "parts"),
    *("tool_calls", "newer", "metadata", "shrink"),
)
_SET = tuple(_SETTERS[n] for n in _ORDER)  # every field: a new one fails the test named above


def stored_item(
    id: str,  # noqa: A002 - the field's name
    text: str,
    *,
    tier: int,
    score: float,
    role: str | None,
    timestamp: float | None,
    summary_of: tuple[str, ...],
    source: str | None,
    name: str | None,
    record_id: str | None,
    scope: tuple[str, str] | None,
) -> ContextItem:
    """``ContextItem(id, text, tier=..., ...)``: these fields given, the others their defaults."""
    row = (id, text, tier, score, role, timestamp, summary_of, source, name, record_id, scope)
    return stored_items([row])[0]


_TIERS = frozenset({int, Tier})
_OPTIONAL = frozenset({str, type(None)})


def stored_items(rows: Iterable[Row]) -> list[ContextItem]:
    """The item of each row: set slot by slot if plain (`_plain`), else by the constructor."""
    new = object.__new__
    (s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, s12, s13, s14, s15, s16, s17, s18, s19, s20) = (
        _SET
    )
    drop = Shrink.DROP
    made: list[ContextItem] = []
    for row in rows:
        if not _plain(*row):
            made.append(_checked(row))
            continue
        item: ContextItem = new(ContextItem)
        s1(item, row[0])
        s2(item, row[1])
        s3(item, row[2])
        s4(item, row[3])
        s5(item, row[4])
        s6(item, row[5])
        s7(item, row[6])
        s8(item, row[7])
        s9(item, row[8])
        s10(item, row[9])
        s11(item, row[10])
        s12(item, None)
        s13(item, None)
        s14(item, None)
        s15(item, None)
        s16(item, None)
        s17(item, ())
        s18(item, ())
        s19(item, {})
        s20(item, drop)
        made.append(item)
    return made


def _checked(row: Row) -> ContextItem:
    """The constructor's item of a row that is not plain: converted, or refused."""
    key, text, tier, score, role, timestamp, summary_of, source, name, record_id, scope = row
    return ContextItem(
        key,
        text,
        tier=tier,
        score=score,
        role=role,
        timestamp=timestamp,
        summary_of=summary_of,
        source=source,
        name=name,
        record_id=record_id,
        scope=scope,
    )


def _plain(  # noqa: PLR0913 - a row's fields
    id: object,  # noqa: A002 - the field's name
    text: object,
    tier: object,
    score: object,
    role: object,
    timestamp: object,
    summary_of: object,
    source: object,
    name: object,
    record_id: object,
    scope: object,
) -> bool:
    """`is_plain` of an item of these fields (the others at their defaults), without the item."""
    return (
        type(id) is str
        and id != ""
        and type(text) is str
        and type(tier) in _TIERS
        and type(score) is float
        and math.isfinite(score)
        and (timestamp is None or (type(timestamp) is float and math.isfinite(timestamp)))
        and (role is None or (type(role) is str and role in ROLES))
        and type(summary_of) is tuple
        and (not summary_of or all(type(v) is str for v in summary_of))
        and type(source) in _OPTIONAL
        and type(name) in _OPTIONAL
        and (
            (record_id is None and scope is None)
            or (
                type(record_id) is str
                and type(scope) is tuple
                and len(scope) == 2
                and scope[0] in SCOPE_KINDS
                and type(scope[1]) is str
            )
        )
    )
