"""`CtxBudgetRetriever`: LangChain's standard retriever suite, then the budget it promises."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough
from langchain_tests.integration_tests import RetrieversIntegrationTests
from lc_fakes import RecordingChatModel

from ctxbudget import InvalidBudgetError, TokenCounter
from ctxbudget.core.ids import scoped_id
from ctxbudget.embed.local import LocalEmbedder
from ctxbudget.memory.context import ContextMemory
from langchain_ctxbudget import CtxBudgetRetriever

COUNTER = TokenCounter.for_model("gpt-4o")
DOCS = [
    ("lisbon", "Ana lives in Lisbon, in the Alfama district, since May 2025."),
    ("porto", "The train from Lisbon to Porto takes about three hours. It leaves from Oriente."),
    ("food", "Ana is vegetarian. Her favourite restaurant serves grilled vegetables and rice."),
    ("run", "Ana is training for a 10k race in October; she runs along the river on Tuesdays."),
    ("work", "Ana works as a product designer for a booking app, mostly from home."),
    ("sister", "Beatriz, Ana's sister, lives in Coimbra and visits every other weekend."),
    ("lessons", "Ana takes Portuguese lessons on Thursday evenings with a tutor named Rui."),
    ("flat", "The flat has a small balcony facing the river and a noisy neighbour upstairs."),
    ("long", " ".join(f"Sentence {i} about the budget for the trip to Porto." for i in range(60))),
]


@pytest.fixture(scope="module")
def standard_memory(
    tmp_path_factory: pytest.TempPathFactory, embedder: LocalEmbedder
) -> Iterator[ContextMemory]:
    memory = ContextMemory(path=tmp_path_factory.mktemp("standard"), embedder=embedder)
    memory.add_documents(DOCS)
    yield memory
    memory.close()


class TestStandardRetrieverSuite(RetrieversIntegrationTests):
    """LangChain's own view of a correct retriever, on a real embedded Chroma."""

    memory: ContextMemory

    @pytest.fixture(autouse=True)
    def _memory(self, standard_memory: ContextMemory) -> None:
        self.memory = standard_memory

    @property
    def retriever_constructor(self) -> type[CtxBudgetRetriever]:
        return CtxBudgetRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"memory": self.memory, "budget": 1500}

    @property
    def retriever_query_example(self) -> str:
        return "Where does Ana live?"


@pytest.fixture
def kb(any_memory: ContextMemory) -> ContextMemory:
    any_memory.add_documents(DOCS, collection="kb")
    any_memory.add_documents(
        [("other", "Ana's cat is called Pastel and lives in Lisbon.")], collection="pets"
    )
    return any_memory


def test_documents_fit_the_budget_and_carry_scores_and_counts(kb: ContextMemory) -> None:
    retriever = CtxBudgetRetriever(memory=kb, k=20, budget=120)
    docs = retriever.invoke("Where does Ana live?")
    assert docs, "nothing retrieved"
    assert sum(d.metadata["tokens"] for d in docs) <= 120
    for doc in docs:
        assert doc.metadata["tokens"] == COUNTER.count(doc.page_content)
        assert doc.metadata["kind"] == "document"
        assert -1.0 <= doc.metadata["similarity"] <= 1.0
        # The caller's own id and its scope; the Document's id is unique across collections.
        scope = (doc.metadata["scope"], doc.metadata["scope_id"])
        assert scope == ("collection", doc.metadata["doc_namespace"])
        assert doc.id == scoped_id(scope, doc.metadata["id"])
    scores = [d.metadata["score"] for d in docs]
    assert scores == sorted(scores, reverse=True)
    assert "Alfama" in docs[0].page_content
    # A larger budget keeps more; k caps the count whatever the budget.
    more = retriever.invoke("Where does Ana live?", budget=2000)
    assert len(more) > len(docs)
    assert len(retriever.invoke("Where does Ana live?", k=2, budget=2000)) == 2


@pytest.mark.parametrize("budget", [15, 40, 90, 250])
def test_the_budget_holds_for_every_size(kb: ContextMemory, budget: int) -> None:
    docs = CtxBudgetRetriever(memory=kb, k=50, budget=budget).invoke("the trip to Porto")
    assert sum(d.metadata["tokens"] for d in docs) <= budget


def test_collections_and_memories(kb: ContextMemory) -> None:
    pets = CtxBudgetRetriever(memory=kb, collections=["pets"], k=5).invoke("Where does Ana live?")
    assert [d.metadata["id"] for d in pets] == ["other#0"]
    kb.add_messages(
        "s1",
        [("user", "My cat Pastel hates the vacuum cleaner."), ("assistant", "Poor Pastel!")],
        user_id="ana",
    )
    kb.add_messages("s2", [("user", "Pastel is my neighbour's dog.")], user_id="bob")
    memories = CtxBudgetRetriever(memory=kb, search="memories", user_id="ana", k=5).invoke("Pastel")
    assert {d.metadata["session_id"] for d in memories} == {"s1"}
    assert all(d.metadata["kind"] == "message" for d in memories)


def test_bad_arguments(kb: ContextMemory) -> None:
    retriever = CtxBudgetRetriever(memory=kb)
    with pytest.raises(InvalidBudgetError):
        retriever.invoke("x", budget=0)
    with pytest.raises(ValueError, match="k must be"):
        retriever.invoke("x", k=-1)
    assert retriever.invoke("x", k=0) == []


def test_in_an_lcel_chain(tmp_path: Path, embedder: LocalEmbedder) -> None:
    memory = ContextMemory(path=tmp_path / "m", embedder=embedder)
    memory.add_documents(DOCS)
    retriever = CtxBudgetRetriever(memory=memory, k=3, budget=80)
    model = RecordingChatModel(messages=iter(["She lives in Lisbon."]))
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Answer from the context:\n{context}"), ("human", "{question}")]
    )

    def join(docs: list[Document]) -> str:
        return "\n\n".join(d.page_content for d in docs)

    chain = (
        {"context": retriever | join, "question": RunnablePassthrough()}
        | prompt
        | model
        | StrOutputParser()
    )
    assert chain.invoke("Where does Ana live?") == "She lives in Lisbon."
    sent = model.calls[0][0]
    assert "Alfama" in sent[0].text
    assert COUNTER.count(sent[0].text) <= 80 + COUNTER.count("Answer from the context:\n")
    memory.close()


# -- returned is chosen (issue 39) --------------------------------------------------------------

TWINS = "Ana's flat in Alfama has a balcony facing the river."


@pytest.fixture(scope="module")
def twins(
    tmp_path_factory: pytest.TempPathFactory, embedder: LocalEmbedder
) -> Iterator[ContextMemory]:
    """Records that repeat: one id in two collections and a session, one text under many ids."""
    memory = ContextMemory(path=tmp_path_factory.mktemp("twins"), embedder=embedder)
    memory.add_documents([("guide", TWINS), ("guide2", TWINS), "Same text.", "ÿ ü ñ — 🏠."])
    memory.add_documents(
        [("guide", "Porto trains leave from Campanha."), TWINS, "."], collection="kb2"
    )
    memory.add_documents(["Same text.", "Same text."], collection="kb2")
    memory.add_messages(
        "s1",
        [{"id": "guide#0", "role": "user", "text": TWINS}, ("assistant", "Same text.")],
        user_id="ana",
    )
    memory.add_messages("s2", [{"id": "guide#0", "role": "user", "text": "Porto?"}], user_id="ana")
    memory.pin(user_id="ana", text=TWINS)
    yield memory
    memory.close()


def stored_text(memory: ContextMemory, doc: Document) -> str:
    scope, name = doc.metadata["scope"], doc.metadata["scope_id"]
    [record] = memory.store.get(
        [doc.metadata["id"]],
        namespace=memory.namespace,
        session_id=name if scope == "session" else None,
        user_id=name if scope == "user" else None,
        collection=name if scope == "collection" else None,
    )
    return record.text


@settings(max_examples=30, deadline=None)
@given(
    query=st.sampled_from(["balcony by the river", "Same text.", "trains", "🏠", "x"]),
    budget=st.integers(min_value=1, max_value=200),
    k=st.integers(min_value=0, max_value=8),
    search=st.sampled_from(["documents", "memories", "all"]),
    session=st.sampled_from([None, "s1", "s2"]),
)
def test_property_each_document_is_the_record_it_names(
    twins: ContextMemory, query: str, budget: int, k: int, search: str, session: str | None
) -> None:
    # Ids repeat across scopes and texts across ids: every document returned carries the text
    # of the very record its metadata names (never another record with the same id), once.
    retriever = CtxBudgetRetriever(
        memory=twins, k=k, budget=budget, search=search, session_id=session, user_id="ana"
    )
    docs = retriever.invoke(query)
    assert len(docs) <= k
    assert len({d.id for d in docs}) == len(docs)
    assert sum(d.metadata["tokens"] for d in docs) <= budget
    for doc in docs:
        text = stored_text(twins, doc)
        if doc.page_content != text:  # cut to fit, at a sentence
            assert doc.page_content.endswith(" …")
            assert " ".join(text.split()).startswith(" ".join(doc.page_content[:-2].split()))
    scores = [d.metadata["score"] for d in docs]
    assert scores == sorted(scores, reverse=True)
