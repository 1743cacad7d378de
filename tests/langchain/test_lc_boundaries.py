"""The LangChain adapter's options pass the core's boundaries: numbers, strategies, model names.

Numbers from numpy or a reranker are taken; ``True``, ``"3"`` and ``2.0`` are refused the same
way by a constructor and by ``invoke``; a refusal is a `ConfigurationError`, never pydantic's
``ValidationError``; a chat model named ``ollama/...`` through any client has no window without
``num_ctx``, ``budget`` or ``base_url``.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from langchain.agents import create_agent
from langchain_core.documents import Document
from langchain_core.messages import HumanMessage
from lc_fakes import RecordingChatModel
from pydantic import ValidationError

from ctxbudget import (
    Budget,
    ConfigurationError,
    ContextMemory,
    InvalidBudgetError,
    InvalidItemError,
    StoreInputError,
)
from ctxbudget.core.numbers import shown
from ctxbudget.errors import ConfigurationTypeError
from langchain_ctxbudget import CtxBudgetCompressor, CtxBudgetMiddleware, CtxBudgetRetriever
from langchain_ctxbudget.budget import model_name, model_window

BAD_COUNTS = [True, "3", 2.0, np.float32(2.0), None]


class ChatLiteLLM(RecordingChatModel):
    """Stands in for langchain_litellm.ChatLiteLLM: any provider, by LiteLLM's name."""

    model: str = "ollama/llama3.1:8b"


# -- the retriever ------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [b for b in BAD_COUNTS if b is not None])
@pytest.mark.parametrize("option", ["k", "budget"])
def test_the_retriever_refuses_the_same_numbers_in_its_constructor_and_invoke(
    memory: ContextMemory, option: str, bad: object
) -> None:
    # Before: the constructor turned k=True, "3" and 2.0 into numbers while invoke refused them.
    with pytest.raises(ConfigurationError, match=f"CtxBudgetRetriever: {option} must be an int"):
        CtxBudgetRetriever(memory=memory, **{option: bad})
    retriever = CtxBudgetRetriever(memory=memory)
    with pytest.raises(ConfigurationError, match=f"invoke: {option} must be an int"):
        retriever.invoke("where?", **{option: bad})


def test_the_retriever_takes_numpy_counts(memory: ContextMemory) -> None:
    memory.add_documents(["Ada lives in Lisbon, near the river."])
    retriever = CtxBudgetRetriever(memory=memory, k=np.int64(2), budget=np.int32(500))
    assert (type(retriever.k), type(retriever.budget)) == (int, int)
    docs = retriever.invoke("Where does Ada live?", k=np.int64(1), budget=np.uint16(300))
    assert len(docs) == 1 and "Lisbon" in docs[0].page_content


def test_a_bad_strategy_or_search_is_a_configuration_error_not_a_validation_error(
    memory: ContextMemory,
) -> None:
    for options in ({"strategy": "no-such-preset"}, {"search": "everything"}):
        with pytest.raises(ConfigurationError) as caught:
            CtxBudgetRetriever(memory=memory, **options)
        assert not isinstance(caught.value, ValidationError)


# -- the compressor -----------------------------------------------------------------------------
def test_a_rerankers_float32_relevance_score_ranks_documents() -> None:
    # Before: a numpy float32 relevance_score was refused as "not a number".
    docs = [
        Document("Lisbon is sunny today.", metadata={"relevance_score": np.float32(0.2)}),
        Document("Porto is rainy today.", metadata={"relevance_score": np.float32(0.9)}),
    ]
    kept = CtxBudgetCompressor(budget=np.int64(500)).compress_documents(docs, "weather")
    assert [d.page_content for d in kept] == ["Porto is rainy today.", "Lisbon is sunny today."]


def test_a_nan_relevance_score_is_refused_by_name() -> None:
    docs = [Document("Lisbon.", metadata={"relevance_score": np.float32("nan")})]
    with pytest.raises(InvalidItemError, match=r"metadata\['relevance_score'\] must be a finite"):
        CtxBudgetCompressor(budget=100).compress_documents(docs, "q")


@pytest.mark.parametrize("bad", [True, "3", 2.0, 0])
def test_the_compressor_budget_is_a_count(bad: object) -> None:
    with pytest.raises(InvalidBudgetError, match="CtxBudgetCompressor: budget must be"):
        CtxBudgetCompressor(budget=bad)


# -- the middleware -----------------------------------------------------------------------------
def test_the_middleware_takes_a_numpy_budget_and_refuses_other_kinds() -> None:
    # Before: budget=np.int64(4096) was refused.
    middleware = CtxBudgetMiddleware(model="gpt-4o", budget=np.int64(4096))
    assert middleware._budget is not None and middleware._budget.window == 4096
    for bad in (True, "4096", 4096.0):
        with pytest.raises(InvalidBudgetError, match="CtxBudgetMiddleware: budget must be an int"):
            CtxBudgetMiddleware(model="gpt-4o", budget=bad)  # type: ignore[arg-type]


SERVED_NAMES = [
    "ollama/llama3.1:8b",
    "ollama:llama3.1:8b",
    "vllm:Qwen/Qwen2.5-7B-Instruct",
    "lmstudio:qwen2.5-7b-instruct",
]


@pytest.mark.parametrize("name", SERVED_NAMES)
def test_a_served_model_through_any_client_never_gets_the_model_cards_window(name: str) -> None:
    # Before: ChatLiteLLM named ollama/llama3.1:8b silently got the model card's 131,072 tokens.
    chat = ChatLiteLLM(model=name, messages=iter(["hi", "hi"]))
    assert model_name(chat) == name and model_window(chat) is None
    agent = create_agent(chat, middleware=[CtxBudgetMiddleware()])
    with pytest.raises(InvalidBudgetError, match="base_url="):
        agent.invoke({"messages": [HumanMessage("hi")]})
    given = create_agent(chat, middleware=[CtxBudgetMiddleware(budget=2048)])
    given.invoke({"messages": [HumanMessage("hi")]})
    assert chat.calls  # with its window given, it is called


# -- one boundary: every door refuses a value as the core does ----------------------------------
def core_phrase(error: pytest.ExceptionInfo[BaseException]) -> str:
    """What every door must repeat of the core's message (before its advice, no locator)."""
    return re.sub(r"^message \d+(?: \(id '[^']*'\))?: ", "", str(error.value)).split("; ", 1)[0]


CORE_BAD_BUDGETS = [True, "200", float("nan"), float("inf"), float("-inf"), 10**5000, 0]


@pytest.mark.parametrize("bad", CORE_BAD_BUDGETS, ids=shown)
def test_the_middleware_refuses_a_budget_as_assemble_does(bad: object) -> None:
    # Before: a ConfigurationError of its own wording (not InvalidBudgetError) for each of these.
    with pytest.raises(InvalidBudgetError) as core:
        Budget.coerce(bad)  # type: ignore[arg-type]  # what ContextMemory.assemble(budget=) uses
    with pytest.raises(InvalidBudgetError) as door:
        CtxBudgetMiddleware(model="gpt-4o", budget=bad)  # type: ignore[arg-type]
    assert core_phrase(core) in str(door.value)


def _agent(memory: ContextMemory) -> tuple[Any, RecordingChatModel]:
    model = RecordingChatModel(messages=iter(["noted"] * 4))
    middleware = CtxBudgetMiddleware(model="gpt-4o", budget=4000, memory=memory)
    return create_agent(model, middleware=[middleware]), model


@pytest.mark.parametrize(
    "text", ["x" * 1_000_001, "caf\ud800e"], ids=["over-max_message_chars", "lone-surrogate"]
)
def test_the_middleware_refuses_a_message_the_memory_cannot_store_before_the_model_call(
    memory: ContextMemory, text: str
) -> None:
    # Before: a message over max_message_chars was accepted, the model got the system message
    # only (the question dropped) and the store refused it with a warning.
    with pytest.raises(StoreInputError) as core:
        memory.add_message("reference", "user", text)
    agent, model = _agent(memory)
    config = {"configurable": {"thread_id": "t1"}}
    with pytest.raises(StoreInputError) as door:
        agent.invoke({"messages": [HumanMessage(text)]}, config)
    assert core_phrase(core) in str(door.value)
    assert model.calls == []  # refused before the model was called
    agent.invoke({"messages": [HumanMessage("Still there?")]}, config)  # the door answers on
    assert model.calls


def test_the_retriever_refuses_k_as_search_does(memory: ContextMemory) -> None:
    # Before: "k must be at most 10**100": its own bound, not the one search holds.
    with pytest.raises(ConfigurationError) as core:
        memory.search("where?", k=10**5000)
    with pytest.raises(ConfigurationError) as door:
        CtxBudgetRetriever(memory=memory).invoke("where?", k=10**5000)
    assert core_phrase(core) in str(door.value)


QUERY = "where\udfff now"


def test_the_retriever_and_compressor_refuse_a_query_as_search_does(
    memory: ContextMemory,
) -> None:
    # Before: the retriever's embedder raised TypeError; the compressor took the query.
    with pytest.raises(InvalidItemError) as core:
        memory.search(QUERY)
    with pytest.raises(InvalidItemError) as retrieved:
        CtxBudgetRetriever(memory=memory).invoke(QUERY)
    with pytest.raises(InvalidItemError) as compressed:
        CtxBudgetCompressor(budget=300).compress_documents([Document("Lisbon.")], QUERY)
    for door in (retrieved, compressed):
        assert core_phrase(core) in str(door.value)
        assert str(door.value).startswith("query: ")


def test_a_misspelled_option_is_refused_by_name(memory: ContextMemory) -> None:
    # Before: pydantic dropped an unknown field without a word.
    with pytest.raises(ConfigurationTypeError, match="'bugdet'"):
        CtxBudgetRetriever(memory=memory, bugdet=500)
    with pytest.raises(ConfigurationTypeError, match="'bugdet'"):
        CtxBudgetCompressor(budget=300, bugdet=500)
    # Old names are still options (renamed, with a DeprecationWarning).
    with pytest.warns(DeprecationWarning):
        assert CtxBudgetCompressor(max_tokens=300).budget == 300
