"""`retrieved_items`: a search's records as items in one loop, the items the constructor builds.

The oracle below is `retrieved_item` as it was written before it went through rows
(`ContextItem(...)` with each field said once), so the fast path is checked against code that
does not share it.
"""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from ctxbudget.core.items import ContextItem, Tier
from ctxbudget.memory.reading.record_items import item_id, retrieved_item, retrieved_items
from ctxbudget.store.records import Record, scope_of, scoped_item_id


def _oracle(record: Record, score: float, session_id: str | None) -> ContextItem:
    name = record.metadata.get("_name")
    own = session_id is not None and record.session_id == session_id
    covers = record.summary_of
    scope = scope_of(record)
    if covers and not own:
        covers = tuple(scoped_item_id(scope, i) for i in covers)
    return ContextItem(
        record.id if own else item_id(record, session_id),
        record.text,
        tier=Tier.SUMMARY if record.kind == "summary" else Tier.RETRIEVED,
        score=score,
        role=record.role if record.kind == "message" else None,
        name=str(name) if name else None,
        timestamp=record.timestamp,
        summary_of=covers,
        source=record.kind if record.kind != "document" else (record.source or "document"),
        record_id=record.id,
        scope=scope,
    )


@st.composite
def records(draw: st.DrawFn) -> Record:
    kind = draw(st.sampled_from(["message", "summary", "document", "pinned"]))
    session = None if kind == "document" else draw(st.sampled_from([None, "s1", "s2"]))
    user = None if kind == "document" else draw(st.sampled_from([None, "u1"]))
    if kind in ("message", "summary") and session is None:
        session = "s1"
    metadata: dict[str, object] = {}
    if draw(st.booleans()):
        metadata["_name"] = draw(st.sampled_from(["ana", "", 7]))
    if kind == "document":
        metadata["doc_namespace"] = draw(st.sampled_from(["kb", ""]))
    return Record(
        id=draw(st.sampled_from(["m1", "m2", "d#0"])),
        kind=kind,  # type: ignore[arg-type]
        text=draw(st.text(min_size=1, max_size=5)),
        session_id=session,
        user_id=user,
        role=draw(st.sampled_from(["user", "assistant", "tool"])) if kind == "message" else None,
        timestamp=draw(st.one_of(st.none(), st.floats(0, 2e9))),
        summary_of=tuple(draw(st.lists(st.sampled_from(["m1", "m2"]), max_size=2)))
        if kind == "summary"
        else (),
        source=draw(st.sampled_from([None, "guide.md"])) if kind == "document" else None,
        metadata=metadata,
    )


def _fields(item: ContextItem) -> dict[str, tuple[type, str]]:
    values = {f.name: getattr(item, f.name) for f in dataclasses.fields(item)}
    return {name: (type(v), repr(v)) for name, v in values.items()}


@given(
    found=st.lists(st.tuples(records(), st.floats(-1, 1)), max_size=6),
    session=st.sampled_from([None, "s1", "s2"]),
)
def test_retrieved_items_are_the_constructors_items(
    found: list[tuple[Record, float]], session: str | None
) -> None:
    expected = [_fields(_oracle(r, score, session)) for r, score in found]
    together = retrieved_items([r for r, _ in found], [s for _, s in found], session)
    assert [_fields(it) for it in together] == expected
    assert [_fields(retrieved_item(r, s, session)) for r, s in found] == expected
