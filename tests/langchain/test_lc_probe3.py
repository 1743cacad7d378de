"""What a third probe of the LangChain adapter's non-middleware doors found, fixed: one test each.

The retriever: ``user_id``/``session_id`` scope memories only, never hiding the documents
(which belong to no user); ``budget=`` with its old name ``max_tokens=`` at ``invoke`` is
refused, as when made. The retriever's and compressor's options of the wrong type are
ctxbudget's errors when made, not pydantic's (a bad session or user id: the core's own). The
compressor refuses what is not a list of Documents (naming a document with a lone surrogate),
and embeddings that answer too few vectors. The summarizer and the entity extractor refuse a
chain that answers neither a message nor text (never ``str(None)`` kept as a summary).
``budget_messages``: ``pinned`` is checked as the middleware checks it; an ``extra`` item may
not take a message's id; a ``ChatMessage`` of a standard role is the message it stands for (the
question is never dropped for an older one, a system message never cut as history); an image's
``width``/``height`` given on its block are counted; Anthropic's images by URL are counted and
stored. The chat history refuses what is not a message and a bad ``user_id`` when made, and
stores a ``developer`` message as the system message it is. A LangGraph ``thread_id`` or user
id given as a number names the session and the user; a run without a session reports LangMem's
user. Real tiktoken, embedded Chroma and the real embedder; the chat model is the one fake.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.messages import (
    AIMessage,
    ChatMessage,
    HumanMessage,
)
from langchain_core.runnables import RunnableLambda
from langgraph.checkpoint.memory import InMemorySaver
from lc_fakes import RecordingChatModel

from ctxbudget import (
    AssembledContext,
    BudgetExceededError,
    ConfigurationError,
    ContextItem,
    InvalidItemError,
    StoreInputError,
    Tier,
)
from ctxbudget.errors import ConfigurationTypeError, SessionOwnerError
from ctxbudget.memory.context import ContextMemory
from ctxbudget.tokens.images import image_tokens
from langchain_ctxbudget import (
    CallContext,
    ChatModelSummarizer,
    CtxBudgetChatMessageHistory,
    CtxBudgetCompressor,
    CtxBudgetMiddleware,
    CtxBudgetRetriever,
    budget_messages,
)
from langchain_ctxbudget.entities import LLMEntityExtractor


def contexts(seen: list[AssembledContext]) -> Any:
    def keep(call: CallContext) -> None:
        seen.append(call.context)

    return keep


def answers(n: int = 8) -> RecordingChatModel:
    return RecordingChatModel(messages=iter([AIMessage(f"answer {i}") for i in range(n)]))


# -- 1. the retriever: a user's retriever still finds the documents --------------------------------
@pytest.fixture
def kb(memory: ContextMemory) -> ContextMemory:
    memory.add_documents(["Lisbon trams are yellow."], collection="kb")
    memory.add_messages(
        "s-ana", [{"role": "user", "text": "Ana loves Lisbon trams"}], user_id="ana"
    )
    memory.add_messages(
        "s-bo", [{"role": "user", "text": "Bo finds Lisbon trams slow"}], user_id="bo"
    )
    memory.flush()
    return memory


@pytest.mark.parametrize(
    "options",
    [
        {"user_id": "ana"},
        {"session_id": "s-ana"},
        {"search": "all", "user_id": "ana"},
        {"search": "all", "session_id": "s-ana"},
        {"search": "all", "user_id": "ana", "collections": ["kb"]},
    ],
)
def test_a_retriever_scoped_to_a_user_or_session_still_finds_the_documents(
    kb: ContextMemory, options: dict[str, Any]
) -> None:
    docs = CtxBudgetRetriever(memory=kb, k=10, **options).invoke("Lisbon trams")
    texts = {d.page_content for d in docs}
    assert "Lisbon trams are yellow." in texts  # documents belong to no user: never hidden
    assert "Bo finds Lisbon trams slow" not in texts  # another user's memories stay out
    if options.get("search") == "all":
        assert "Ana loves Lisbon trams" in texts


# -- 2. options of the wrong type: ctxbudget's errors, not pydantic's, when made ------------------
@pytest.mark.parametrize(
    ("make", "error", "words"),
    [
        (
            lambda m: CtxBudgetRetriever(memory=m, search="memories", user_id=3),
            StoreInputError,
            "user_id must be a non-empty str, got 3",
        ),
        (
            lambda m: CtxBudgetRetriever(memory=m, search="memories", user_id=""),
            StoreInputError,
            "user_id must be a non-empty str",
        ),
        (
            lambda m: CtxBudgetRetriever(memory=m, session_id="s\ud800"),
            StoreInputError,
            "session_id holds a lone surrogate",
        ),
        (lambda m: CtxBudgetRetriever(memory=m, counter=len), ConfigurationError, "counter"),
        (
            lambda m: CtxBudgetCompressor(budget=100, near_duplicate_threshold=float("nan")),
            ConfigurationError,
            "near_duplicate_threshold",
        ),
        (lambda m: CtxBudgetCompressor(budget=100, model=3), ConfigurationError, "model"),
    ],
)
def test_options_of_the_wrong_type_are_ctxbudget_errors_naming_the_option_when_made(
    memory: ContextMemory, make: Any, error: type[Exception], words: str
) -> None:
    with pytest.raises(error, match=words):
        make(memory)


def test_the_retriever_refuses_budget_and_its_old_name_together_as_when_made(
    kb: ContextMemory,
) -> None:
    retriever = CtxBudgetRetriever(memory=kb, k=10)
    for call in (retriever.invoke, lambda q, **kw: asyncio.run(retriever.ainvoke(q, **kw))):
        with pytest.raises(ConfigurationError, match="pass budget= only"):
            call("Lisbon trams", max_tokens=500, budget=5)  # never the larger one, quietly
    with pytest.raises(ConfigurationError, match="pass budget= only"):
        CtxBudgetRetriever(memory=kb, max_tokens=500, budget=5)


# -- 3. the compressor refuses what is not a list of Documents -------------------------------------
@pytest.mark.parametrize(
    ("documents", "words"),
    [
        ("Lisbon is sunny.", "a list of Documents, got str"),
        ([Document("ok"), {"page_content": "x"}], "document 1 is a dict"),
        ([None], "document 0 is a NoneType"),
        ([Document("ok"), Document("Lisbon \ud800", id="d2")], r"document 1 \(id 'd2'\)"),
    ],
)
def test_the_compressor_refuses_what_is_not_a_list_of_documents(documents: Any, words: str) -> None:
    with pytest.raises(InvalidItemError, match=words):
        CtxBudgetCompressor(budget=100).compress_documents(documents, "weather")


class OneVector(Embeddings):
    """An embedding model that answers one vector whatever it is given (a broken batch)."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[1.0, 0.0]]

    def embed_query(self, text: str) -> list[float]:
        return [1.0, 0.0]


def test_embeddings_that_answer_too_few_vectors_are_named() -> None:
    docs = [Document("Lisbon is sunny."), Document("Porto has wine.")]
    with pytest.raises(ConfigurationError, match="returned 1 vectors for 2 documents"):
        CtxBudgetCompressor(budget=100, embeddings=OneVector()).compress_documents(docs, "q")


# -- 4. the summarizer and the entity extractor keep only a model's text, never str(None) ----------
@pytest.mark.parametrize("reply", [None, {"output": "User lives in Lisbon."}, 42])
def test_a_chain_that_answers_neither_a_message_nor_text_is_refused(reply: object) -> None:
    model = RunnableLambda(lambda _: reply)
    summarizer = ChatModelSummarizer(model)
    with pytest.raises(ConfigurationTypeError, match="must answer a message or a str"):
        summarizer.summarize(["I moved to Lisbon in May."], 20)
    with pytest.raises(ConfigurationTypeError, match="must answer a message or a str"):
        asyncio.run(summarizer.asummarize(["I moved to Lisbon in May."], 20))
    with pytest.raises(ConfigurationTypeError, match="LLMEntityExtractor"):
        LLMEntityExtractor(model).extract(["We moved to Lisbon."], speakers=["Ana"])
    parsed = RunnableLambda(lambda _: "User lives in Lisbon.")  # llm | StrOutputParser()
    assert ChatModelSummarizer(parsed).summarize(["I moved to Lisbon."], 20) == (
        "User lives in Lisbon."
    )


# -- 5. budget_messages checks pinned facts as the middleware does ---------------------------------
@pytest.mark.parametrize(
    ("pinned", "words"),
    [
        ("Ana is vegetarian.", "pinned must be a list of facts, got .Ana is vegetarian"),
        (["  "], "pinned fact 0 must be non-empty text"),
        (["ok", None], "pinned fact 1 must be non-empty text"),
        (["Ana \ud800"], "pinned fact 0 holds a lone surrogate"),
    ],
)
def test_budget_messages_checks_pinned_facts_as_the_middleware_does(
    pinned: Any, words: str
) -> None:
    with pytest.raises(ConfigurationError, match=words):
        budget_messages([HumanMessage("Where do we eat?")], max_tokens=200, pinned=pinned)
    with pytest.raises(ConfigurationError):
        CtxBudgetMiddleware(model="gpt-4o", pinned=pinned)


# -- 6. an extra item may not take a message's id --------------------------------------------------
def test_an_extra_item_with_an_id_of_ctxbudgets_own_is_refused() -> None:
    taken = ContextItem("ctxbudget:message:0", "Ana is vegetarian.", tier=Tier.PINNED)
    with pytest.raises(InvalidItemError, match=r"extra\[0\].*ctxbudget:message:0"):
        budget_messages([HumanMessage("Where do we eat?")], max_tokens=200, extra=[taken])


# -- 7. a ChatMessage with a standard role is the message it stands for ----------------------------
def test_a_chat_message_of_the_user_is_the_question_and_of_the_system_the_system() -> None:
    old = [HumanMessage("Old question about trams in Lisbon?"), AIMessage("Trams " * 30)]
    question = ChatMessage(role="user", content="Where do we eat?")
    seen: list[AssembledContext] = []
    out = budget_messages([*old, question], max_tokens=30, on_context=contexts(seen))
    assert out == [question] and out[0] is question  # the question, never an old one alone
    assert {p.item.text for p in seen[0].pruned} == {m.text for m in old}
    with pytest.raises(BudgetExceededError):
        budget_messages([ChatMessage(role="user", content="trams " * 100)], max_tokens=30)
    system = ChatMessage(role="system", content="Be brief.")
    out = budget_messages([system, question], max_tokens=100)
    assert out[0] is system and out[1] is question  # the system prompt is not cut as history
    joined = budget_messages([system, question], max_tokens=100, pinned=["Ana is vegan."])
    assert joined[0].content == "Be brief.\n\n## Pinned facts\n- Ana is vegan.\n"
    assert budget_messages([*old, question], max_tokens=500, end_on="human")[-1] is question


# -- 8. an image's width and height, given on its block, are counted -------------------------------
@pytest.mark.parametrize(
    "image",
    [
        {"type": "image", "url": "https://example.com/a.png", "width": 512, "height": 512},
        {
            "type": "image",
            "url": "https://example.com/a.png",
            "extras": {"width": 512, "height": 512},
        },
        {
            "type": "image",
            "source": {"type": "url", "url": "https://example.com/a.png"},
            "width": 512,
            "height": 512,
        },
    ],
)
def test_an_images_declared_size_is_counted_not_the_most_an_image_can_cost(
    image: dict[str, Any],
) -> None:
    message = HumanMessage([{"type": "text", "text": "What is this?"}, image])
    text_only = HumanMessage([{"type": "text", "text": "What is this?"}])
    seen: list[AssembledContext] = []
    out = budget_messages([message], max_tokens=2000, on_context=contexts(seen))
    assert out == [message] and out[0] is message
    budget_messages([text_only], max_tokens=2000, on_context=contexts(seen))
    assert seen[0].tokens_used - seen[1].tokens_used == image_tokens(512, 512)
    assert not seen[0].estimated


# -- 9. Anthropic's image by URL can be counted and stored -----------------------------------------
def test_an_anthropic_image_by_url_is_counted_and_its_text_stored(memory: ContextMemory) -> None:
    message = HumanMessage(
        [
            {"type": "text", "text": "What is in this picture?"},
            {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}},
        ],
        id="h1",
    )
    seen: list[AssembledContext] = []
    assert budget_messages([message], max_tokens=2000, on_context=contexts(seen)) == [message]
    assert seen[0].estimated  # size unknown: counted as the most an image can cost
    history = CtxBudgetChatMessageHistory(memory, "s1", user_id="ana")
    history.add_messages([message, AIMessage("A cat.", id="a1")])
    assert [m.text for m in history.messages] == ["What is in this picture?", "A cat."]


# -- 10. the chat history refuses what is not a message, and a bad user when made ------------------
@pytest.mark.parametrize(
    ("messages", "words"),
    [
        ([HumanMessage("ok"), None], "message 1 is a NoneType"),
        ([{"role": "user", "content": "hi"}], "message 0 is a dict"),
        ("hello", "a list of messages, got str"),
        (HumanMessage("hello"), "a list of messages, got HumanMessage"),
    ],
)
def test_the_chat_history_refuses_what_is_not_a_message(
    memory: ContextMemory, messages: Any, words: str
) -> None:
    history = CtxBudgetChatMessageHistory(memory, "s1", user_id="ana")
    with pytest.raises(StoreInputError, match=words):
        history.add_messages(messages)
    with pytest.raises(StoreInputError, match=words):
        asyncio.run(history.aadd_messages(messages))
    assert history.messages == []  # nothing was written


def test_a_developer_message_is_stored_as_the_system_message_it_is(memory: ContextMemory) -> None:
    history = CtxBudgetChatMessageHistory(memory, "s1", user_id="ana")
    history.add_messages([ChatMessage(role="developer", content="Be brief."), HumanMessage("hi")])
    back = history.messages
    assert [(type(m).__name__, m.text) for m in back] == [
        ("SystemMessage", "Be brief."),
        ("HumanMessage", "hi"),
    ]


@pytest.mark.parametrize("user", ["", 3, "ana\ud800"])
def test_the_chat_history_checks_its_user_id_when_made(memory: ContextMemory, user: Any) -> None:
    CtxBudgetChatMessageHistory(memory, "s1", user_id="ana").add_user_message("hi")
    with pytest.raises(StoreInputError, match="user_id"):
        CtxBudgetChatMessageHistory(memory, "s1", user_id=user)


# -- 11. a thread or user id given as a number names the session and the user ----------------------
def test_a_numeric_thread_id_names_the_session_and_a_numeric_user_is_checked(
    memory: ContextMemory,
) -> None:
    llm = answers()
    agent = create_agent(
        llm,
        middleware=[CtxBudgetMiddleware(model="gpt-4o", memory=memory)],
        checkpointer=InMemorySaver(),
    )
    agent.invoke(
        {"messages": [("user", "My PIN is 1234")]},
        {"configurable": {"thread_id": 1, "user_id": 42}},
    )
    memory.flush()
    assert [r.text for r in memory.history("1")] == ["My PIN is 1234", "answer 0"]
    assert {r.user_id for r in memory.history("1")} == {"42"}
    with pytest.raises(SessionOwnerError, match="'1' belongs to another user"):
        agent.invoke(
            {"messages": [("user", "What is my PIN?")]},
            {"configurable": {"thread_id": 1, "user_id": 43}},
        )
    assert len(llm.calls) == 1  # the other user's run never reached the model


def test_a_run_without_a_session_reports_langmems_user() -> None:
    seen: list[CallContext] = []
    agent = create_agent(
        answers(), middleware=[CtxBudgetMiddleware(model="gpt-4o", on_context=seen.append)]
    )
    agent.invoke({"messages": [("user", "hi")]}, {"configurable": {"langgraph_user_id": "ana"}})
    assert [(c.session_id, c.user_id) for c in seen] == [(None, "ana")]
