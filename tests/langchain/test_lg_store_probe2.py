"""`CtxBudgetStore` probed again as a demanding LangGraph user would (many identical texts).

- a store holding more than 300 values (`ctxbudget.store.value_reads._EXACT`), most with one
  same text, lost the one distinct value: a query for its own text never returned it, at any
  limit, nor a search of its own namespace (Chroma's HNSW graph strands a vector among
  identical ones, the where-filtered query as well). A read that ends inside a tie now
  searches the prefix's values exactly;
- items with one same text tie on score and go to the newest (the ranking's rule): past 50 of
  them (the word-match pool), the exact search cut the tie by key first, so ``limit=1``
  answered another item than the first of ``limit=70``, and the newest was not first.
"""

from __future__ import annotations

from langgraph.store.base import PutOp

from ctxbudget.memory.context import ContextMemory
from langchain_ctxbudget.store import CtxBudgetStore


def _fill(store: CtxBudgetStore, copies: int) -> None:
    """One distinct item ("M") put first, then ``copies`` items with one same text."""
    store.put(("r", "M"), "M", {"text": "mmm"})
    half = copies // 2
    ops = [PutOp(("r", "A"), f"A{i:04d}", {"text": "no"}) for i in range(half)]
    ops += [PutOp(("r", "Z"), f"Z{i:04d}", {"text": "no"}) for i in range(copies - half)]
    for start in range(0, len(ops), 500):
        store.batch(ops[start : start + 500])


# -- 1. a distinct item among many identical ones is found -----------------------------------
def test_a_distinct_item_among_hundreds_of_identical_ones_is_found(
    any_memory: ContextMemory,
) -> None:
    store = CtxBudgetStore(any_memory)  # an embedded Chroma, then a server
    _fill(store, 1000)  # 1,001 values in one partition: past the exact search's 300
    for limit in (1, 10, 100):
        found = store.search(("r",), query="mmm", limit=limit)
        assert [item.key for item in found[:1]] == ["M"], limit
        assert len(found) == limit
    alone = store.search(("r", "M"), query="mmm")  # its own namespace: a filtered query
    assert [item.key for item in alone] == ["M"]
    assert alone[0].score is not None
    rest = store.search(("r",), query="mmm", limit=5)[1:]
    assert len({item.score for item in rest}) == 1  # the same text scores the same
    # ...and a tie goes to the newest: the last put first, as a search without a query lists
    assert [item.key for item in rest] == ["Z0499", "Z0498", "Z0497", "Z0496"]


def test_a_tie_read_past_the_first_page_still_goes_to_the_newest(memory: ContextMemory) -> None:
    store = CtxBudgetStore(memory)
    _fill(store, 400)
    found = store.search(("r", "Z"), query="no", limit=3)
    assert [item.key for item in found] == ["Z0199", "Z0198", "Z0197"]
    page = store.search(("r", "Z"), query="no", limit=3, offset=3)
    assert [item.key for item in page] == ["Z0196", "Z0195", "Z0194"]


# -- 2. ties go to the newest whatever the limit ---------------------------------------------
def test_items_with_one_same_text_rank_newest_first_at_any_limit(memory: ContextMemory) -> None:
    store = CtxBudgetStore(memory)
    for n in range(70):  # more than the 50 the word match reads: the exact search's own cut
        store.put(("notes",), f"k{n:02d}", {"text": "same words"})
    store.put(("notes",), "other", {"text": "a completely different thing"})
    whole = store.search(("notes",), query="same words", limit=71)
    assert [item.key for item in whole[:70]] == [f"k{n:02d}" for n in reversed(range(70))]
    assert whole[70].key == "other"
    for limit in (1, 3, 20):
        assert store.search(("notes",), query="same words", limit=limit) == whole[:limit]
    for offset in (1, 49, 60):
        page = store.search(("notes",), query="same words", limit=5, offset=offset)
        assert page == whole[offset : offset + 5]
