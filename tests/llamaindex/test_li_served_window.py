"""CtxBudgetMemory's default token limit from the window a local server serves (stand-in server).

``from_defaults(model=..., base_url=...)`` asks the server (Ollama, vLLM, LM Studio) instead of
taking the model card's window; the server is `served_stub.StubServer` on 127.0.0.1, the memory
a real embedded Chroma with the real local embedding model.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from served_stub import Served, StubServer, closed_port_url

from ctxbudget import Budget, InvalidBudgetError, WindowDetectionError
from ctxbudget.memory.context import ContextMemory
from ctxbudget.tokens.served import clear_window_cache
from llama_index.ctxbudget import CtxBudgetMemory


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    clear_window_cache()
    yield
    clear_window_cache()


def test_the_token_limit_is_what_ollama_serves(context_memory: ContextMemory) -> None:
    with StubServer(kind="ollama") as ollama:
        ollama.add(Served("llama3.1:8b", num_ctx=8192, trained=131_072))
        memory = CtxBudgetMemory.from_defaults(
            memory=context_memory,
            session_id=f"s-{uuid.uuid4().hex[:8]}",
            model="ollama:llama3.1:8b",
            base_url=ollama.url,
        )
    assert memory.token_limit == Budget.for_model("ollama:llama3.1:8b", window=8192).available
    assert memory.token_limit == 8192 - 2048


def test_an_openai_compatible_server_and_get_fits(context_memory: ContextMemory) -> None:
    with StubServer(kind="vllm") as vllm:
        vllm.add(Served("Qwen/Qwen2.5-7B-Instruct", max_model_len=1024))
        memory = CtxBudgetMemory.from_defaults(
            memory=context_memory,
            session_id=f"s-{uuid.uuid4().hex[:8]}",
            model="Qwen/Qwen2.5-7B-Instruct",
            base_url=f"{vllm.url}/v1",  # as OpenAILike(api_base=...) is configured
        )
    assert memory.token_limit == 1024 - 256  # a quarter kept for the reply
    filler = "we talked about the trams and the weather in Lisbon " * 6
    for i in range(12):
        memory.put(ChatMessage(role=MessageRole.USER, content=f"Question {i}: {filler}"))
        memory.put(ChatMessage(role=MessageRole.ASSISTANT, content=f"Answer {i}: {filler}"))
    memory.put(ChatMessage(role=MessageRole.USER, content="And the last one?"))
    sent = memory.get()
    context = memory.last_context
    assert context is not None and context.tokens_used <= memory.token_limit
    assert sent[-1].content == "And the last one?" and len(sent) < 25


def test_an_unreachable_server_raises_before_opening_a_store(tmp_path: Path) -> None:
    url = closed_port_url()
    with pytest.raises(WindowDetectionError) as caught:
        CtxBudgetMemory.from_defaults(
            path=tmp_path / "store", model="ollama:llama3.1:8b", base_url=url
        )
    assert url in str(caught.value) and isinstance(caught.value, InvalidBudgetError)
    assert not (tmp_path / "store").exists()  # nothing opened, nothing left open


def test_a_given_token_limit_asks_nothing(context_memory: ContextMemory) -> None:
    with StubServer(kind="ollama") as ollama:
        memory = CtxBudgetMemory.from_defaults(
            memory=context_memory, token_limit=3000, model="llama3.1:8b", base_url=ollama.url
        )
    assert memory.token_limit == 3000 and ollama.hits == []
