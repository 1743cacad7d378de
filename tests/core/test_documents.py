"""`pack_documents` with ``k``: a retriever's limit applied in the core, reported truly.

Properties over any documents (sizes, scores, repeated ids and texts), budgets and ``k``: what
is kept fits, is at most ``k`` items, is the ``k`` best-scored of what fits without ``k`` (each
kept again), and every offered item is included or pruned once, those cut by ``k`` as
``over_limit`` and never above a kept one; without ``k`` nothing changes.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.fidelity import check_sent
from ctxbudget import ContextAssembler, ContextItem, Shrink, Tier, TokenCounter
from ctxbudget.core.documents import pack_documents
from ctxbudget.core.report import PruneReason
from ctxbudget.errors import InvalidItemError

COUNTER = TokenCounter.for_model("gpt-4o")
WORDS = ["ledger", "harbor", "Lisbon", "quarterly", "freight", "arm", "depot", "rail", "note"]

documents = st.lists(
    st.builds(
        lambda i, n, score, truncate: ContextItem(
            f"d{i}",
            " ".join(WORDS[(i + j) % len(WORDS)] for j in range(n)) + ".",
            tier=Tier.RETRIEVED,
            score=score,
            shrink=Shrink.TRUNCATE if truncate else Shrink.DROP,
        ),
        st.integers(0, 14),  # repeated ids and texts happen
        st.integers(1, 50),
        st.floats(0, 1, allow_nan=False),
        st.booleans(),
    ),
    max_size=14,
)


@settings(max_examples=300, deadline=None)
@given(items=documents, tokens=st.integers(20, 900), k=st.none() | st.integers(0, 4))
def test_k_keeps_the_best_that_fit_and_reports_the_rest(
    items: list[ContextItem], tokens: int, k: int | None
) -> None:
    assembler = ContextAssembler(COUNTER)
    whole = pack_documents(items, assembler, tokens)
    packed = pack_documents(items, assembler, tokens, k=k)
    if whole is None:
        assert packed is None
        return
    assert packed is not None
    check_sent(packed, items)  # fits, is what the report includes, each item once
    assert packed.tokens_used <= tokens
    if k is None or len(whole.included) <= k:
        assert [i.id for i in packed.included] == [i.id for i in whole.included]
        assert not any(p.reason is PruneReason.OVER_LIMIT for p in packed.pruned)
        return
    best = sorted(whole.included, key=lambda it: (-it.score, it.id))[:k]
    assert sorted(i.id for i in packed.included) == sorted(i.id for i in best)
    limited = [p.item for p in packed.pruned if p.reason is PruneReason.OVER_LIMIT]
    assert sorted(i.id for i in limited) == sorted(
        i.id for i in whole.included if i.id not in {b.id for b in best}
    )
    if best:
        lowest = min(it.score for it in best)
        assert all(it.score <= lowest for it in limited)
    assert sum(u.offered for u in packed.tiers.values()) == len(items)
    assert sum(u.kept for u in packed.tiers.values()) == len(packed.included)
    assert sum(u.pruned for u in packed.tiers.values()) == len(packed.pruned)


@pytest.mark.parametrize("k", [-1, 1.5, True, "2"])
def test_a_bad_k_is_refused(k: object) -> None:
    item = ContextItem("d", "text", tier=Tier.RETRIEVED)
    with pytest.raises(InvalidItemError, match="k must be a non-negative int"):
        pack_documents([item], ContextAssembler(COUNTER), 100, k=k)  # type: ignore[arg-type]


def test_the_report_explains_an_item_cut_by_k() -> None:
    items = [
        ContextItem(f"d{i}", f"Document {i} about freight.", tier=Tier.RETRIEVED, score=s)
        for i, s in enumerate([0.9, 0.5, 0.7])
    ]
    packed = pack_documents(items, ContextAssembler(COUNTER), 500, k=2)
    assert packed is not None
    assert [i.id for i in packed.included] == ["d0", "d2"]
    (cut,) = packed.pruned
    assert (cut.item.id, cut.reason.value) == ("d1", "over_limit")
    assert "k=2" in cut.detail and "over_limit" in packed.explain()
