"""The LangChain adapter budgets to the window a local server serves: asked from a stand-in server.

A ``ChatOllama`` without ``num_ctx`` asks its own server; any chat model asks the server of the
middleware's ``base_url``. The chat models are the LangChain fake (`RecordingChatModel`), the
servers `served_stub.StubServer` on 127.0.0.1.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from lc_fakes import RecordingChatModel
from served_stub import Served, StubServer, closed_port_url

from ctxbudget import Budget, UnknownModelError, WindowDetectionError
from ctxbudget.tokens.served import clear_window_cache
from langchain_ctxbudget import CtxBudgetMiddleware
from langchain_ctxbudget.budget import model_window

HISTORY = [HumanMessage("word " * 300, id="old"), AIMessage("ok", id="a"), HumanMessage("hi")]


class ChatOllama(RecordingChatModel):
    """Stands in for langchain_ollama.ChatOllama: ``num_ctx`` and ``base_url`` as it has them."""

    model: str = "llama3.1:8b"
    num_ctx: int | None = None
    base_url: str | None = None


class ChatOpenAI(RecordingChatModel):
    """Stands in for langchain_openai.ChatOpenAI pointed at a local OpenAI-compatible server."""

    model_name: str = "Qwen/Qwen2.5-7B-Instruct"


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    clear_window_cache()
    yield
    clear_window_cache()


def sent_ids(model: RecordingChatModel) -> list[str | None]:
    return [m.id for m in model.calls[-1][0]]


def test_a_chat_ollama_without_num_ctx_is_budgeted_to_what_its_server_serves() -> None:
    with StubServer(kind="ollama") as ollama:
        ollama.add(Served("llama3.1:8b", num_ctx=200, trained=131_072))
        chat = ChatOllama(messages=iter(["hi", "hi"]), base_url=ollama.url)
        agent = create_agent(chat, middleware=[CtxBudgetMiddleware()])
        for _ in range(2):
            agent.invoke({"messages": HISTORY})
            assert "old" not in sent_ids(chat)  # 300 words do not fit in 200 tokens
            assert sent_ids(chat)[-1] == HISTORY[-1].id
        assert ollama.count("POST", "/api/show") == 1  # asked once, not on every call


def test_a_chat_ollama_given_as_model_and_its_loaded_context() -> None:
    with StubServer(kind="ollama") as ollama:
        ollama.add(Served("llama3.1:8b", num_ctx=200, loaded=4096))
        chat = ChatOllama(messages=iter(["hi"]), base_url=ollama.url)
        middleware = CtxBudgetMiddleware(model=chat)
        assert middleware._budget is not None and middleware._budget.window == 4096


def test_num_ctx_wins_and_asks_nothing() -> None:
    with StubServer(kind="ollama") as ollama:
        chat = ChatOllama(messages=iter(["hi"]), num_ctx=200, base_url=ollama.url)
        assert model_window(chat) == 200
        assert model_window(chat, base_url=ollama.url) == 200
        assert ollama.hits == []


def test_an_unreachable_ollama_says_so_and_how_to_avoid_asking() -> None:
    url = closed_port_url()
    chat = ChatOllama(messages=iter(["hi"]), base_url=url)
    with pytest.raises(WindowDetectionError) as caught:
        create_agent(chat, middleware=[CtxBudgetMiddleware()]).invoke({"messages": HISTORY})
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, ConnectionError)
    assert url in str(caught.value) and "num_ctx" in str(caught.value)


def test_any_chat_model_asks_the_server_of_base_url_when_told() -> None:
    with StubServer(kind="vllm") as vllm:
        vllm.add(Served("Qwen/Qwen2.5-7B-Instruct", max_model_len=200))
        chat = ChatOpenAI(messages=iter(["hi"]))
        middleware = CtxBudgetMiddleware(base_url=f"{vllm.url}/v1")
        create_agent(chat, middleware=[middleware]).invoke({"messages": HISTORY})
        assert "old" not in sent_ids(chat) and sent_ids(chat)[-1] == HISTORY[-1].id
        unasked = ChatOpenAI(messages=iter(["hi"]))  # without base_url: the model card's 32,768
        create_agent(unasked, middleware=[CtxBudgetMiddleware()]).invoke({"messages": HISTORY})
        assert "old" in sent_ids(unasked)
        assert vllm.count("GET", "/v1/models") == 1


def test_a_model_the_registry_does_not_know_gets_its_window_from_base_url() -> None:
    with StubServer(kind="lmstudio") as studio:
        studio.add(Served("acme-tiny-7b", trained=32_768, loaded=200))
        chat = ChatOpenAI(model_name="acme-tiny-7b", messages=iter(["hi"]))
        middleware = CtxBudgetMiddleware(base_url=f"{studio.url}/v1")
        create_agent(chat, middleware=[middleware]).invoke({"messages": HISTORY})
        assert "old" not in sent_ids(chat)
        with pytest.raises(UnknownModelError, match="acme-tiny-7b"):  # not asked without it
            unasked = ChatOpenAI(model_name="acme-tiny-7b", messages=iter(["hi"]))
            create_agent(unasked, middleware=[CtxBudgetMiddleware()]).invoke({"messages": HISTORY})


def test_a_model_named_by_string_with_base_url() -> None:
    with StubServer(kind="ollama") as ollama:
        ollama.add(Served("llama3.1:8b", num_ctx=8192))
        middleware = CtxBudgetMiddleware(model="ollama:llama3.1:8b", base_url=ollama.url)
        assert middleware._budget == Budget.for_model("ollama:llama3.1:8b", window=8192)
        given = CtxBudgetMiddleware(model="ollama:llama3.1:8b", budget=4096, base_url=ollama.url)
        assert given._budget is not None and given._budget.window == 4096
        assert ollama.count("POST", "/api/show") == 1
