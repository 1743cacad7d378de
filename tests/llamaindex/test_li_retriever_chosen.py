"""`CtxBudgetRetriever` (LlamaIndex) returns exactly its report's included (issue 39).

Records that repeat ids across scopes and texts across ids: each node is one included item
(its id, text and score), best first, and its metadata names the record it was made from.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget.memory.context import ContextMemory
from llama_index.ctxbudget import CtxBudgetEmbedding, CtxBudgetRetriever

TWINS = "Ana's flat in Alfama has a balcony facing the river."


@pytest.fixture(scope="module")
def twins(
    tmp_path_factory: pytest.TempPathFactory, embedding: CtxBudgetEmbedding
) -> Iterator[ContextMemory]:
    memory = ContextMemory(tmp_path_factory.mktemp("twins"), embedder=embedding)
    memory.add_documents([("guide", TWINS), ("guide2", TWINS), "Same text.", "ÿ ü ñ — 🏠."])
    memory.add_documents(
        [("guide", "Porto trains leave from Campanha."), TWINS, "."], collection="kb2"
    )
    memory.add_messages(
        "s1",
        [{"id": "guide#0", "role": "user", "text": TWINS}, ("assistant", "Same text.")],
        user_id="ana",
    )
    memory.add_messages("s2", [{"id": "guide#0", "role": "user", "text": "Porto?"}], user_id="ana")
    yield memory
    memory.close()


@settings(max_examples=30, deadline=None)
@given(
    query=st.sampled_from(["balcony by the river", "Same text.", "trains", "🏠"]),
    budget=st.integers(min_value=1, max_value=200),
    k=st.one_of(st.none(), st.integers(min_value=0, max_value=6)),
    session=st.sampled_from([None, "s1", "s2"]),
    user=st.sampled_from([None, "ana"]),
)
def test_property_nodes_are_the_reports_included(
    twins: ContextMemory,
    query: str,
    budget: int,
    k: int | None,
    session: str | None,
    user: str | None,
) -> None:
    retriever = CtxBudgetRetriever(twins, budget=budget, k=k, session_id=session, user_id=user)
    nodes = retriever.retrieve(query)
    context = retriever.last_context
    included = [] if context is None else context.included
    best_first = sorted(included, key=lambda item: (-item.score, item.id))
    assert [(n.node_id, n.node.get_content(), n.score) for n in nodes] == [
        (item.id, item.text, item.score) for item in best_first
    ]
    for node, item in zip(nodes, best_first, strict=True):
        assert item.ref is not None
        meta = node.node.metadata
        assert (meta["id"], (meta["scope"], meta["scope_id"])) == (item.ref.id, item.ref.scope)
