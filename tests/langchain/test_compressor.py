"""`CtxBudgetCompressor`: dedupe, priority by score, sentence truncation, and the budget."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.runnables import RunnableLambda, RunnableParallel, RunnablePassthrough

from ctxbudget import InvalidItemError, TokenCounter
from ctxbudget.embed.local import LocalEmbedder
from langchain_ctxbudget import CtxBudgetCompressor

COUNTER = TokenCounter.for_model("gpt-4o")
PIECES = [
    "Lisbon is sunny.",
    "The train is late!",
    "Ana runs on Tuesdays?",
    "café 東京 🙂",
    "  ",
    "\n\n",
    "x=1;",
    "naïve",
]

documents = st.lists(
    st.builds(
        lambda parts, score: Document(" ".join(parts), metadata={"score": score}),
        st.lists(st.sampled_from(PIECES), min_size=1, max_size=30),
        st.floats(min_value=0.0, max_value=1.0),
    ),
    max_size=12,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=documents, budget=st.integers(min_value=1, max_value=400), truncate=st.booleans())
def test_the_budget_holds_and_documents_are_the_given_ones(
    docs: list[Document], budget: int, truncate: bool
) -> None:
    out = CtxBudgetCompressor(budget=budget, truncate=truncate).compress_documents(docs, "q")
    assert sum(d.metadata["tokens"] for d in out) <= budget
    assert sum(COUNTER.count(d.page_content) for d in out) <= budget
    originals = {d.page_content for d in docs}
    for doc in out:
        if doc.metadata["truncated"]:
            assert truncate and doc.page_content.endswith(" …")
        else:
            assert doc.page_content in originals
    scores = [d.metadata["score"] for d in out]
    assert scores == sorted(scores, reverse=True)
    assert sum(d.metadata["truncated"] for d in out) <= 1


def test_everything_that_fits_is_kept_unchanged_and_duplicates_go() -> None:
    docs = [
        Document("Ana lives in Lisbon.", metadata={"score": 0.9, "source": "a"}),
        Document("ana lives in   lisbon.", metadata={"score": 0.5}),
        Document("She runs on Tuesdays.", metadata={"score": 0.7}),
    ]
    out = CtxBudgetCompressor(budget=500).compress_documents(docs, "q")
    assert [d.page_content for d in out] == ["Ana lives in Lisbon.", "She runs on Tuesdays."]
    assert out[0].metadata["source"] == "a" and out[0].metadata["truncated"] is False
    assert docs[0].metadata == {"score": 0.9, "source": "a"}  # the inputs are not modified


def test_higher_scores_win_and_one_document_is_cut_at_a_sentence() -> None:
    long = " ".join(f"Fact number {i} about the Porto trip." for i in range(40))
    docs = [
        Document("Low value note about nothing much at all.", metadata={"relevance_score": 0.1}),
        Document(long, metadata={"relevance_score": 0.8}),
        Document("Ana is vegetarian.", metadata={"relevance_score": 0.95}),
    ]
    out = CtxBudgetCompressor(budget=120).compress_documents(docs, "q")
    assert out[0].page_content == "Ana is vegetarian."
    cut = out[1]
    assert cut.metadata["truncated"] is True
    assert cut.page_content.endswith(". …") and long.startswith(cut.page_content[:-2])
    assert sum(d.metadata["tokens"] for d in out) <= 120
    whole = CtxBudgetCompressor(budget=120, truncate=False).compress_documents(docs, "q")
    assert all(not d.metadata["truncated"] for d in whole)


def test_scores_from_a_key_or_from_the_order() -> None:
    docs = [Document("first " * 30), Document("second " * 30), Document("third " * 30)]
    kept = CtxBudgetCompressor(budget=80, truncate=False).compress_documents(docs, "q")
    assert [d.page_content for d in kept] == [docs[0].page_content, docs[1].page_content]
    ranked = [
        Document(d.page_content, metadata={"rank": r}) for d, r in zip(docs, [1, 5, 9], strict=True)
    ]
    kept = CtxBudgetCompressor(budget=80, truncate=False, score_key="rank").compress_documents(
        ranked, "q"
    )
    assert [d.metadata["rank"] for d in kept] == [9, 5]
    with pytest.raises(InvalidItemError, match="rank"):
        CtxBudgetCompressor(budget=80, score_key="rank").compress_documents(docs, "q")
    with pytest.raises(InvalidItemError, match="number"):
        CtxBudgetCompressor(budget=80).compress_documents(
            [Document("x", metadata={"score": "high"})], "q"
        )


class MiniLM(Embeddings):
    """The real local model, as a LangChain `Embeddings`."""

    def __init__(self, model: LocalEmbedder) -> None:
        self.model = model

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [list(v) for v in self.model.embed_documents(texts)]

    def embed_query(self, text: str) -> list[float]:
        return list(self.model.embed_query(text))


def test_near_duplicates_go_with_embeddings(embedder: LocalEmbedder) -> None:
    docs = [
        Document("The train from Lisbon to Porto takes three hours.", metadata={"score": 0.9}),
        Document("The train from Lisbon to Porto takes 3 hours.", metadata={"score": 0.8}),
        Document("Ana is vegetarian.", metadata={"score": 0.5}),
    ]
    plain = CtxBudgetCompressor(budget=500).compress_documents(docs, "q")
    assert len(plain) == 3
    semantic = CtxBudgetCompressor(
        budget=500, embeddings=MiniLM(embedder), near_duplicate_threshold=0.9
    )
    assert [d.page_content for d in semantic.compress_documents(docs, "q")] == [
        docs[0].page_content,
        docs[2].page_content,
    ]


async def test_in_a_compression_pipeline() -> None:
    corpus = [
        Document(f"Note {i}: " + "words " * (5 + 3 * i), metadata={"score": 1 / (1 + i)})
        for i in range(10)
    ]
    retrieve = RunnableLambda(lambda query: corpus)
    compressor = CtxBudgetCompressor(budget=100)
    pipeline = RunnableParallel(docs=retrieve, query=RunnablePassthrough()) | RunnableLambda(
        lambda x: compressor.compress_documents(x["docs"], x["query"])
    )
    out = pipeline.invoke("notes")
    assert out and sum(d.metadata["tokens"] for d in out) <= 100
    assert out[0].page_content.startswith("Note 0")
    assert [d.page_content for d in await compressor.acompress_documents(corpus, "notes")] == [
        d.page_content for d in out
    ]


def normalized(text: str) -> str:
    return " ".join(text.split()).casefold()


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    given_docs=st.lists(
        st.tuples(
            st.sampled_from([None, "a", "b", "guide#0"]),  # ids repeat
            st.lists(st.sampled_from(PIECES), min_size=1, max_size=12).map(" ".join),
            st.floats(min_value=0.0, max_value=1.0),
        ),
        max_size=10,
    ),
    budget=st.integers(min_value=1, max_value=200),
    truncate=st.booleans(),
)
def test_property_each_document_returned_is_the_copy_the_core_kept(
    given_docs: list[tuple[str | None, str, float]], budget: int, truncate: bool
) -> None:
    # Issue 39: repeated ids and texts, empty-ish texts; what comes back is each document the
    # core kept (of one text, the best-scored copy, the earlier on a tie), mapped by position.
    docs = [
        Document(text, id=doc_id, metadata={"score": score, "position": index})
        for index, (doc_id, text, score) in enumerate(given_docs)
    ]
    out = CtxBudgetCompressor(budget=budget, truncate=truncate).compress_documents(docs, "q")
    assert len({d.metadata["position"] for d in out}) == len(out)
    assert len({normalized(d.page_content) for d in out if not d.metadata["truncated"]}) == sum(
        not d.metadata["truncated"] for d in out
    )
    for doc in out:
        original = docs[doc.metadata["position"]]
        assert doc.id == original.id and original.page_content.strip()
        if doc.metadata["truncated"]:
            assert normalized(original.page_content).startswith(normalized(doc.page_content[:-2]))
        else:
            assert doc.page_content == original.page_content
        same = [d for d in docs if normalized(d.page_content) == normalized(original.page_content)]
        best = max(same, key=lambda d: (d.metadata["score"], -d.metadata["position"]))
        assert best is original
    scores = [d.metadata["score"] for d in out]
    assert scores == sorted(scores, reverse=True)
