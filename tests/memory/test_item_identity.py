"""An item's identity is (scope, the caller's id), and every report names the caller's ids.

Regressions of issue 27 ("Users cannot find their own ids", "Documents with the same id in two
collections"): records of other sessions, users and collections carry their own id and scope
as fields; reports, ``explain()``, ``to_json()`` and the inclusion log name them without a
qualified id being parsed; two records with one id in two scopes are two items; a duplicate's
report names the other item it repeats, never itself.
"""

from __future__ import annotations

import json

import pytest

from ctxbudget import ContextAssembler, ContextItem, Tier
from ctxbudget.core.ids import ItemRef, ref_of_id, scoped_id
from ctxbudget.core.report import PruneReason
from ctxbudget.errors import InvalidItemError
from ctxbudget.memory.context import ContextMemory
from ctxbudget.store.chroma_store import ChromaStore


@pytest.fixture
def memory(store: ChromaStore) -> ContextMemory:
    return ContextMemory(store=store)


def test_records_of_other_scopes_carry_their_own_ids(memory: ContextMemory) -> None:
    memory.add_messages(
        "s3",
        [{"id": "s3-0011", "role": "user", "text": "We decided to drop the upsell screen."}],
        user_id="maya",
        progress=False,
    )
    memory.add_messages(
        "s9", [{"id": "q1", "role": "user", "text": "Hello again."}], user_id="maya", progress=False
    )
    memory.pin(user_id="maya", text="Maya is vegetarian.")
    ctx = memory.assemble("s9", "What did we decide about the upsell screen?", budget=2000)
    wanted = ItemRef("s3-0011", ("session", "s3"))
    assert wanted in ctx.included_refs
    assert ctx.includes("s3-0011", ("session", "s3"))
    assert ctx.includes("s3-0011") and not ctx.includes("s3-0011", ("session", "s9"))
    assert ItemRef("q1", ("session", "s9")) in ctx.included_refs  # the session's own, too
    item = next(i for i in ctx.included if i.record_id == "s3-0011")
    assert (item.scope, item.id) == (("session", "s3"), scoped_id(("session", "s3"), "s3-0011"))
    # JSON report and the inclusion log name the caller's id and scope too.
    report = json.loads(ctx.to_json())
    assert {"id": "s3-0011", "scope": ["session", "s3"]} in report["included_refs"]
    logged = memory.contexts("s9")[0]
    assert wanted in logged.included_refs
    assert logged.ref(item.id) == wanted


def test_explain_names_items_as_their_callers_know_them() -> None:
    scope = ("session", "s3")
    cut = ContextItem(scoped_id(scope, "s3-0011"), "x " * 400, record_id="s3-0011", scope=scope)
    ctx = ContextAssembler(model="gpt-4o").assemble(
        [ContextItem("q", "Hi?", tier=Tier.QUERY, role="user"), cut], budget=40
    )
    text = ctx.explain()
    assert "s3-0011 (session s3) [RETRIEVED] over_budget" in text
    assert "ctxbudget:session" not in text


def test_one_id_in_two_collections_is_two_items(memory: ContextMemory) -> None:
    memory.add_documents([("guide", "Install with pip install lisbon.")], collection="kb1")
    memory.add_documents([("guide", "Porto trains leave every hour.")], collection="kb2")
    ctx = memory.assemble("s1", "guide to installing and to Porto trains", budget=2000)
    refs = {r for r in ctx.included_refs if r.id == "guide#0"}
    assert refs == {
        ItemRef("guide#0", ("collection", "kb1")),
        ItemRef("guide#0", ("collection", "kb2")),
    }
    assert not [p for p in ctx.pruned if p.reason is PruneReason.DUPLICATE]


def test_search_in_no_collection_finds_nothing(memory: ContextMemory) -> None:
    # An empty list reached Chroma as "$in: []" and came back as its raw error.
    memory.add_documents([("guide", "Porto trains leave every hour.")], collection="kb1")
    assert memory.search("Porto trains", collections=[]) == []
    assert [h.hit.record.id for h in memory.search("Porto trains", collections=["kb1"])] == [
        "guide#0"
    ]


def test_a_duplicate_names_the_other_item_it_repeats() -> None:
    scope_a, scope_b = ("collection", "kb1"), ("collection", "kb2")
    a = ContextItem(scoped_id(scope_a, "g"), "Same words.", score=2.0, record_id="g", scope=scope_a)
    b = ContextItem(
        scoped_id(scope_b, "g"), "same  words.", score=1.0, record_id="g", scope=scope_b
    )
    twin = ContextItem("m1", "Other words.", score=0.5)
    again = ContextItem("m1", "Other words, said again.", score=0.1)
    ctx = ContextAssembler(model="gpt-4o").assemble([a, b, twin, again], budget=500)
    by_item = {id(p.item): p for p in ctx.pruned}
    content = by_item[id(b)]
    assert content.reason is PruneReason.DUPLICATE
    assert content.duplicate_of is a
    assert content.detail.startswith("same content as g (collection kb1) [RETRIEVED]")
    same_id = by_item[id(again)]
    assert same_id.duplicate_of is twin  # the other item, not itself
    assert "Other words." in same_id.detail
    assert json.loads(ctx.to_json())["pruned"][0]["duplicate_of"] in {a.id, twin.id}


def test_scopes_are_checked() -> None:
    with pytest.raises(InvalidItemError, match="scope"):
        ContextItem("x", "t", record_id="g", scope=("galaxy", "kb"))
    with pytest.raises(InvalidItemError, match="scope"):
        ContextItem("x", "t", scope=("collection", "kb"))  # a scope without its id
    assert ref_of_id("guide#0") is None
    assert ref_of_id(scoped_id(("user", "u1"), '["odd"]')) == ItemRef('["odd"]', ("user", "u1"))
