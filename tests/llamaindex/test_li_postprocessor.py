"""CtxBudgetNodePostprocessor: a query engine's prompt stays within budget; packing rules."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.prompts.default_prompts import DEFAULT_TEXT_QA_PROMPT
from llama_index.core.schema import MetadataMode, NodeWithScore, TextNode

from ctxbudget import InvalidBudgetError, InvalidItemError, TokenCounter
from llama_index.ctxbudget import CtxBudgetEmbedding, CtxBudgetNodePostprocessor

from .helpers import RecordingLLM

TOPICS = {
    "tomato soup": "Simmer the tomato soup for twenty minutes, then blend it until smooth.",
    "bread": "Knead the bread dough for ten minutes and let it rise for an hour.",
    "rice": "Rinse the rice twice and cook it covered for eighteen minutes.",
    "pesto": "Blend basil, pine nuts, garlic and olive oil; add the cheese at the end.",
    "omelette": "Whisk three eggs, cook them on low heat and fold the omelette in half.",
    "curry": "Fry the spices first, then add lentils and coconut milk and simmer.",
}


def node(node_id: str, text: str, score: float | None, **metadata: object) -> NodeWithScore:
    return NodeWithScore(node=TextNode(id_=node_id, text=text, metadata=metadata), score=score)


def llm_tokens(counter: TokenCounter, nodes: list[NodeWithScore]) -> int:
    return sum(counter.count(n.node.get_content(MetadataMode.LLM)) for n in nodes)


def test_a_query_engine_prompt_stays_within_budget_and_is_over_without_it(
    embedding: CtxBudgetEmbedding, counter: TokenCounter
) -> None:
    documents = [
        Document(
            text=f"{dish.title()}, variation {v}. {tip} " + "Season to taste and serve warm. " * 10,
            metadata={"dish": dish, "variation": v},
        )
        for dish, tip in TOPICS.items()
        for v in range(4)
    ]
    index = VectorStoreIndex.from_documents(documents, embed_model=embedding)
    question = "How long should I simmer the tomato soup?"
    budget = 500

    def ask(postprocessors: list[CtxBudgetNodePostprocessor]) -> tuple[list[str], int]:
        llm = RecordingLLM(max_tokens=20)
        engine = index.as_query_engine(
            llm=llm, similarity_top_k=12, node_postprocessors=postprocessors
        )
        response = engine.query(question)
        return llm.text_prompts(), len(response.source_nodes)

    packed, kept = ask([CtxBudgetNodePostprocessor(budget=budget, model="gpt-4o")])
    unpacked, retrieved = ask([])

    template = counter.count(DEFAULT_TEXT_QA_PROMPT.format(context_str="", query_str=question))
    assert len(packed) == 1
    assert counter.count(packed[0]) <= template + budget
    assert counter.count(unpacked[0]) > template + budget  # the same engine without it
    assert counter.count(packed[0]) < counter.count(unpacked[0])
    assert retrieved == 12 and 0 < kept < retrieved
    assert "Simmer the tomato soup for twenty minutes" in packed[0]


def test_nodes_are_kept_by_score_within_budget_in_their_given_order(
    counter: TokenCounter,
) -> None:
    nodes = [
        node(f"n{i}", f"Fact number {i}. " + "Some detail about it. " * 8, score)
        for i, score in enumerate([0.2, 0.9, 0.5, 0.8, 0.1])
    ]
    one = llm_tokens(counter, nodes[:1])
    post = CtxBudgetNodePostprocessor(budget=2 * one + 12, truncate=False)

    out = post.postprocess_nodes(nodes)

    assert [n.node_id for n in out] == ["n1", "n3"]  # the two best, in the order given
    assert all(n.node is m.node for n, m in zip(out, [nodes[1], nodes[3]], strict=True))
    assert llm_tokens(counter, out) <= post.budget
    assert post.last_context is not None and post.last_context.tokens_used <= post.budget


def test_duplicates_are_dropped(counter: TokenCounter) -> None:
    nodes = [
        node("a", "Knead the dough for ten minutes.", 0.4),
        node("b", "Knead the dough for ten minutes.", 0.7),  # same text, other id
        node("c", "Let the dough rise for an hour.", 0.5),
        node("c", "Let the dough rise for an hour.", 0.6),  # same node twice (fusion)
    ]
    out = CtxBudgetNodePostprocessor(budget=1000).postprocess_nodes(nodes)
    assert [(n.node_id, n.score) for n in out] == [("b", 0.7), ("c", 0.6)]


def test_a_node_found_twice_comes_back_as_the_copy_the_report_kept(
    counter: TokenCounter,
) -> None:
    # Issue 39 ("returned is chosen"): one id and one content twice, the copies differing in
    # tier, score and metadata the LLM does not read. The core kept the PINNED copy; the node
    # returned used to be the other one (the higher score), with its own metadata.
    text = "Let the dough rise for an hour."
    plain = node("c", text, 0.9, source="a.pdf")
    pinned = node("c", text, 0.1, source="b.pdf", ctxbudget_tier="PINNED")
    for nodes in ([plain, pinned], [pinned, plain]):
        post = CtxBudgetNodePostprocessor(budget=200, metadata_mode=MetadataMode.NONE)
        out = post.postprocess_nodes(nodes)
        context = post.last_context
        assert context is not None
        [kept] = context.included
        assert (kept.tier, kept.score) == (20, 0.1)
        assert [(n.node_id, n.score, n.node.metadata["source"]) for n in out] == [
            ("c", 0.1, "b.pdf")
        ]
        [dropped] = context.pruned
        assert dropped.duplicate_of is kept and dropped.item.score == 0.9
        assert "same id as c [PINNED, score 0.1], same content" in context.explain()


def test_a_node_that_does_not_fit_whole_is_cut_at_a_sentence(counter: TokenCounter) -> None:
    long_text = " ".join(f"Step {i}: stir the sauce and taste it again." for i in range(40))
    nodes = [
        node("short", "Preheat the oven to 200 degrees.", 0.9),
        node("long", long_text, 0.8, source="cookbook.pdf", page=12),
    ]
    post = CtxBudgetNodePostprocessor(budget=120)

    out = post.postprocess_nodes(nodes)

    assert [n.node_id for n in out] == ["short", "long"]
    cut = out[1].node.get_content(MetadataMode.LLM)
    assert cut.endswith("again. …") and len(cut) < len(long_text)
    assert "source: cookbook.pdf" in cut  # the metadata header was counted and kept, once
    assert cut.count("cookbook.pdf") == 1
    assert out[1].node.metadata == {"source": "cookbook.pdf", "page": 12}
    assert nodes[1].node.get_content(MetadataMode.NONE) == long_text  # the input is untouched
    assert llm_tokens(counter, out) <= 120
    assert post.last_context is not None and post.last_context.truncated == ("long",)


def test_metadata_tiers_come_first(counter: TokenCounter) -> None:
    filler = " It matters for the recipe." * 6
    nodes = [
        node("best", "A very relevant passage." + filler, 0.95),
        node("rule", "House rule: never serve peanuts." + filler, 0.1, ctxbudget_tier="PINNED"),
        node("next", "Another relevant passage." + filler, 0.9),
    ]
    budget = llm_tokens(counter, nodes[:2]) + 20  # each node's line and the tiers' headers
    assert budget < llm_tokens(counter, nodes)
    post = CtxBudgetNodePostprocessor(budget=budget, truncate=False)
    out = post.postprocess_nodes(nodes)
    # Tier by tier, as the report lists them (what is returned is its included, in order).
    assert [n.node_id for n in out] == ["rule", "best"]
    assert post.last_context is not None
    assert [n.node_id for n in out] == [item.id for item in post.last_context.included]

    numeric = [node("x", "text", 0.5, ctxbudget_tier=55)]
    assert CtxBudgetNodePostprocessor(budget=50).postprocess_nodes(numeric)
    for bad in ("SYSTEM", "RECENT", "nonsense", 5, True):
        with pytest.raises(InvalidItemError, match="tier"):
            CtxBudgetNodePostprocessor(budget=50).postprocess_nodes(
                [node("x", "text", 0.5, ctxbudget_tier=bad)]
            )


def test_nodes_without_scores_and_bad_budgets() -> None:
    out = CtxBudgetNodePostprocessor(budget=100).postprocess_nodes(
        [node("a", "no score here", None)]
    )
    assert [n.node_id for n in out] == ["a"]
    for budget in (0, -5, 1.5, True):
        with pytest.raises(InvalidBudgetError, match="budget"):
            CtxBudgetNodePostprocessor(budget=budget)
    with pytest.warns(DeprecationWarning, match="token_budget= is now budget="):
        assert CtxBudgetNodePostprocessor(token_budget=100).budget == 100


async def test_async_matches_sync() -> None:
    nodes = [node(f"n{i}", f"Sentence {i}. " * 20, i / 10) for i in range(8)]
    post = CtxBudgetNodePostprocessor(budget=150)
    sync = post.postprocess_nodes(nodes, query_str="anything")
    assert [n.node_id for n in await post.apostprocess_nodes(nodes, query_str="anything")] == [
        n.node_id for n in sync
    ]


SENTENCE = st.text(
    st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]), min_size=1, max_size=40
).map(lambda s: s.strip() + ".")


@settings(max_examples=60, deadline=None)
@given(
    texts=st.lists(st.lists(SENTENCE, min_size=1, max_size=8).map(" ".join), max_size=12),
    scores=st.lists(st.floats(min_value=0, max_value=1), min_size=12, max_size=12),
    budget=st.integers(min_value=1, max_value=400),
    with_metadata=st.booleans(),
)
def test_property_kept_nodes_fit_the_budget_as_the_llm_reads_them(
    counter: TokenCounter,
    texts: list[str],
    scores: list[float],
    budget: int,
    with_metadata: bool,
) -> None:
    metadata = {"file": "notes.md"} if with_metadata else {}
    nodes = [node(f"n{i}", text, scores[i], **metadata) for i, text in enumerate(texts)]
    post = CtxBudgetNodePostprocessor(budget=budget)
    out = post.postprocess_nodes(nodes)
    assert llm_tokens(counter, out) <= budget
    ids = [n.node_id for n in nodes]
    assert [n.node_id for n in out] == [i for i in ids if i in {n.node_id for n in out}]
    again = post.postprocess_nodes(nodes)
    assert [n.node.get_content(MetadataMode.LLM) for n in again] == [
        n.node.get_content(MetadataMode.LLM) for n in out
    ]


NODE_TEXTS = st.one_of(
    st.sampled_from(
        ["", " ", "\n", "Same text.", "same  TEXT.", "Ünïcødé — ok. 🍞", "x", "Step one. " * 30]
    ),
    st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=0, max_size=60),
)


@settings(max_examples=40, deadline=None)
@given(
    given_nodes=st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "c", "guide#0", "ñ"]),  # ids repeat
            NODE_TEXTS,
            st.one_of(st.none(), st.floats(min_value=0, max_value=1)),
            st.sampled_from([None, "PINNED", "ENTITY"]),
            st.sampled_from([{}, {"file": "notes.md"}, {"file": "other.md"}]),
        ),
        max_size=10,
    ),
    budget=st.integers(min_value=1, max_value=300),
    mode=st.sampled_from(list(MetadataMode)),
    truncate=st.booleans(),
)
def test_property_returned_nodes_are_the_reports_included(
    given_nodes: list[tuple[str, str, float | None, str | None, dict[str, str]]],
    budget: int,
    mode: MetadataMode,
    truncate: bool,
) -> None:
    # Issue 39: whatever comes back is exactly what the report includes: ids, the text as the
    # mode reads it, scores and order (duplicate ids, duplicate texts, empty-ish texts).
    nodes = []
    for node_id, text, score, tier, metadata in given_nodes:
        extra = {} if tier is None else {"ctxbudget_tier": tier}
        nodes.append(node(node_id, text, score, **metadata, **extra))
    post = CtxBudgetNodePostprocessor(budget=budget, metadata_mode=mode, truncate=truncate)
    out = post.postprocess_nodes(nodes)
    context = post.last_context
    included = [] if context is None else context.included
    assert [(n.node_id, n.node.get_content(mode), n.score or 0.0) for n in out] == [
        (item.ref.id if item.ref else item.id, item.text, item.score) for item in included
    ]
