"""`stored_item`: a `ContextItem` of a stored record's fields, built at search speed.

A search offers hundreds of stored records per call (`ctxbudget.memory.reading.retrieval`),
and the dataclass's constructor sets each of a frozen item's twenty fields through
``object.__setattr__``. `stored_item` sets them through the slots themselves and then asks
`is_plain`, the check the constructor's ``__post_init__`` starts with: the same item in about
60% of the time. Anything `is_plain` does not accept goes through the constructor, with its
conversions and errors (tests/reliability/test_boundaries.py checks both agree).
"""

from __future__ import annotations

from dataclasses import fields

from ctxbudget.core.items import ContextItem, Shrink, is_plain

__all__ = ["stored_item"]

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
    item: ContextItem = object.__new__(ContextItem)
    (s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, s12, s13, s14, s15, s16, s17, s18, s19, s20) = (
        _SET
    )
    s1(item, id)
    s2(item, text)
    s3(item, tier)
    s4(item, score)
    s5(item, role)
    s6(item, timestamp)
    s7(item, summary_of)
    s8(item, source)
    s9(item, name)
    s10(item, record_id)
    s11(item, scope)
    s12(item, None)
    s13(item, None)
    s14(item, None)
    s15(item, None)
    s16(item, None)
    s17(item, ())
    s18(item, ())
    s19(item, {})
    s20(item, Shrink.DROP)
    if is_plain(item):
        return item
    return ContextItem(
        id,
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
