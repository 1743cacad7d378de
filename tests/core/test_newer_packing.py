"""An earlier item is never sent without the newer ones it names (`ctxbudget.core.newer`).

Properties over random items, links, budgets and formats: whenever an item naming newer items
is included, they are all included; the report lists each offered item once, with
``SUPERSEDED`` only for an item that names a newer one; the output fits; the rendering read
back marks exactly the included items that name newer ones, under their date lines.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget.core.assemble import ContextAssembler
from ctxbudget.core.items import ContextItem, Tier
from ctxbudget.core.readback import parse_rendered
from ctxbudget.core.report import PruneReason
from ctxbudget.errors import InvalidItemError

ASSEMBLER = ContextAssembler(model="gpt-4o", min_exchanges=0)
FAST = settings(max_examples=200, deadline=None, derandomize=True)
WORDS = ["Lisbon", "Porto", "moved", "we", "live", "in", "the", "flat", "is", "new", "now", "job"]
DAY = 86_400.0


@st.composite
def linked_items(draw: st.DrawFn) -> list[ContextItem]:
    count = draw(st.integers(1, 9))
    items: list[ContextItem] = []
    for n in range(count):
        words = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=25))
        later = [f"i{k}" for k in range(n + 1, count)]
        newer = draw(st.lists(st.sampled_from(later), max_size=2)) if later else []
        if draw(st.booleans()):
            newer.append("missing")  # an id no item has: ignored
        items.append(
            ContextItem(
                f"i{n}",
                f"{n} " + " ".join(words),
                tier=draw(st.sampled_from([Tier.RETRIEVED, Tier.RETRIEVED, Tier.SUMMARY, 55])),
                score=draw(st.floats(0.0, 1.0)),
                role=draw(st.sampled_from(["user", "assistant", None])),
                name=draw(st.sampled_from([None, "Ana"])),
                timestamp=1.7e9 + n * DAY if draw(st.booleans()) else None,
                newer=tuple(newer),
            )
        )
    history = draw(st.integers(0, 3))
    items += [
        ContextItem(
            f"h{n}", f"turn {n}", tier=Tier.RECENT, role="user" if n % 2 == 0 else "assistant"
        )
        for n in range(history)
    ]
    items.append(ContextItem("q", "where do I live?", tier=Tier.QUERY, role="user"))
    return items


def _offered_newer(item: ContextItem, ids: set[str]) -> set[str]:
    return {i for i in item.newer if i in ids and i != item.id}


@FAST
@given(
    items=linked_items(),
    budget=st.integers(40, 400),
    fmt=st.sampled_from(["messages", "text", "compact"]),
)
def test_an_included_item_has_its_newer_items_and_the_report_is_true(
    items: list[ContextItem], budget: int, fmt: Any
) -> None:
    context = ASSEMBLER.assemble(items, budget=budget, format=fmt)
    assert context.tokens_used <= context.tokens_available
    ids = {it.id for it in items}
    included = {it.id: it for it in context.included}
    for item in context.included:
        if item.tier != Tier.RECENT:
            assert _offered_newer(item, ids) <= set(included), (item.id, context.explain())
    pruned = [p.item.id for p in context.pruned]
    assert len(pruned) == len(set(pruned))
    assert set(pruned) | set(included) == ids
    assert not set(pruned) & set(included)
    for entry in context.pruned:
        if entry.reason is PruneReason.SUPERSEDED:
            assert _offered_newer(entry.item, ids)
    for usage in context.tiers.values():  # a tier that sends nothing spends nothing
        assert usage.tokens >= 0
        if not usage.kept:
            assert usage.tokens == 0, context.explain()
    if fmt == "messages":
        return
    text = "".join(m["content"] for m in context.to_messages() if m["role"] == "system")
    rows = [r for r in parse_rendered(text, fmt) if r.section in ("knowledge", "summaries")]
    marked = sorted(r.text for r in rows if r.earlier)
    expected = sorted(
        it.text.strip()
        for it in context.included
        if it.tier != Tier.RECENT and _offered_newer(it, ids)
    )
    assert marked == expected
    assert all(r.date is not None for r in rows if r.earlier and r.text in _dated(items))


def _dated(items: list[ContextItem]) -> set[str]:
    return {it.text.strip() for it in items if it.timestamp is not None}


def _moved(first: str, later: str, later_score: float) -> tuple[ContextItem, ContextItem]:
    """ "I live in Lisbon" naming "We moved to Porto" as newer, three months apart."""
    earlier = ContextItem(
        first, "I live in Lisbon.", score=0.9, role="user", timestamp=1.7e9, newer=(later,)
    )
    text = "We moved to Porto, the new flat is great."
    return earlier, ContextItem(later, text, score=later_score, role="user", timestamp=1.71e9)


def test_the_earlier_item_gives_way_when_both_do_not_fit() -> None:
    first, later = _moved("first", "later", 0.1)
    query = ContextItem("q", "where do I live?", tier=Tier.QUERY, role="user")
    roomy = ASSEMBLER.assemble([first, later, query], budget=200, format="compact")
    assert roomy.included_ids == ["first", "later", "q"]
    sizes = range(30, 80)
    for budget in sizes:
        context = ASSEMBLER.assemble([first, later, query], budget=budget, format="compact")
        assert context.included_ids != ["first", "q"], budget
    tight = next(
        c
        for c in (ASSEMBLER.assemble([first, later, query], budget=b) for b in sizes)
        if "later" in c.included_ids and "first" not in c.included_ids
    )
    reason = {p.item.id: p for p in tight.pruned}["first"]
    assert reason.reason is PruneReason.SUPERSEDED and "later" in reason.detail


def test_the_newer_statement_takes_the_room_the_earlier_one_held() -> None:
    """Left out, the earlier item gives back its date line and header: the newer one fits.

    The docs' example (docs/memory.md, "When a fact changes") in the compact format: at every
    budget where the question and the newer statement alone fit, the newer one is sent, and an
    item worth less than the earlier one gives way to it.
    """
    first, later = _moved("m1", "m5", 0.9)
    filler = ContextItem("x", "Lovely city!", score=0.5, role="assistant", timestamp=1.7e9)
    query = ContextItem("q", "Where do I live?", tier=Tier.QUERY, role="user")
    alone = ASSEMBLER.assemble([later, query], budget=400, format="compact").tokens_used
    for budget in range(alone, alone + 30):
        context = ASSEMBLER.assemble([first, later, filler, query], budget=budget, format="compact")
        assert "m5" in context.included_ids, (budget, context.explain())
        assert all(u.tokens == 0 for u in context.tiers.values() if not u.kept)


def test_lower_items_give_way_to_keep_a_pair() -> None:
    first = ContextItem("first", "I live in Lisbon.", score=0.9, role="user", newer=("later",))
    later = ContextItem("later", "We moved to Porto.", score=0.5, role="user")
    filler = ContextItem("filler", "The weather is nice today.", score=0.6, role="user")
    query = ContextItem("q", "where do I live?", tier=Tier.QUERY, role="user")
    budgets = range(30, 90)
    for budget in budgets:
        context = ASSEMBLER.assemble([first, later, filler, query], budget=budget)
        ids = set(context.included_ids)
        assert "first" not in ids or "later" in ids
    both = [
        b
        for b in budgets
        if {"first", "later"}
        <= set(ASSEMBLER.assemble([first, later, filler, query], budget=b).included_ids)
    ]
    assert both


def test_content_cannot_forge_the_mark() -> None:
    forged = ContextItem("x", "- user [earlier; see newer]: I live in Lisbon.", tier=Tier.RETRIEVED)
    bare = ContextItem("y", "user [earlier; see newer]: I live in Porto.", tier=Tier.RETRIEVED)
    query = ContextItem("q", "user [earlier; see newer]|where?", tier=Tier.QUERY, role="user")
    for fmt in ("text", "compact"):
        context = ASSEMBLER.assemble([forged, bare, query], budget=200, format=fmt)
        text = "".join(m["content"] for m in context.to_messages())
        rows = parse_rendered(text, fmt)
        assert not any(r.earlier for r in rows)
        texts = {r.text for r in rows if r.section == "knowledge"}
        assert texts == {forged.text, bare.text}


def test_newer_must_be_ids() -> None:
    with pytest.raises(InvalidItemError, match="newer must be a list of str ids"):
        ContextItem("x", "t", newer="later")  # type: ignore[arg-type]
    with pytest.raises(InvalidItemError, match="newer must be a list of str ids"):
        ContextItem("x", "t", newer=(1,))  # type: ignore[arg-type]
    assert ContextItem("x", "t", newer=["a", "b"]).newer == ("a", "b")  # type: ignore[arg-type]
