"""What LangChain sends fits, and is what the report counted (issue 27, "fit as sent").

Messages are serialized the way LangChain sends them (``convert_to_openai_messages``, the
framework's own OpenAI conversion) and counted with the model's tokenizer, independently of the
adapter. For ``budget_messages`` and ``CtxBudgetMiddleware`` (a real ``create_agent``), over
sessions with non-ASCII tool arguments, invalid calls, call ids reused across turns, dangling
calls and results, images and empty contents: what is sent is at most the budget and exactly the
report's ``tokens_used``. For ``CtxBudgetRetriever``: the documents are the report's included
items, and two collections' ``guide#0`` are two documents.
"""

from __future__ import annotations

import base64
import itertools
import struct
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.utils import convert_to_openai_messages
from lc_fakes import RecordingChatModel

from ctxbudget import AssembledContext, ContextAssembler, TokenCounter
from ctxbudget.embed.local import LocalEmbedder
from ctxbudget.memory.context import ContextMemory
from langchain_ctxbudget import (
    CallContext,
    CtxBudgetMiddleware,
    CtxBudgetRetriever,
    budget_messages,
)

COUNTER = TokenCounter.for_model("gpt-4o")
WORDS = ["lisbon", "train", "porto", "visa", "ok", "Ärger", "日本語", "ação", "😀"]
TEXTS = st.lists(st.sampled_from(WORDS), min_size=0, max_size=10).map(" ".join)
WORDY = st.lists(st.sampled_from(WORDS), min_size=1, max_size=10).map(" ".join)


def png(width: int, height: int) -> str:
    """A data URL of a real PNG of that size (so the image is counted exactly)."""
    raw = b"".join(b"\x00" + b"\x00\x00\x00" * width for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    data = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw))
    return "data:image/png;base64," + base64.b64encode(data + chunk(b"IEND", b"")).decode()


IMAGE = png(4, 3)


@st.composite
def sessions(draw: st.DrawFn) -> list[BaseMessage]:
    """An agent session (oldest first) ending with the user's question."""
    messages: list[BaseMessage] = []
    counter = itertools.count()
    used: list[str] = []
    for _ in range(draw(st.integers(1, 6))):
        text = draw(TEXTS)
        if draw(st.integers(0, 3)) == 0:
            content: Any = [
                {"type": "text", "text": text},
                {"type": "image_url", "image_url": {"url": IMAGE}},
            ]
            messages.append(HumanMessage(content=content))
        else:
            messages.append(HumanMessage(text))  # empty ones too
        for _step in range(draw(st.integers(0, 2))):
            valid: list[dict[str, Any]] = []
            invalid: list[dict[str, Any]] = []
            for _call in range(draw(st.integers(1, 2))):
                reuse = used and draw(st.integers(0, 4)) == 0
                call_id = draw(st.sampled_from(used)) if reuse else f"call_{next(counter)}"
                if call_id in [c["id"] for c in [*valid, *invalid]]:
                    continue
                if draw(st.integers(0, 4)) == 0:
                    bad = '{"q": "' + draw(WORDY)
                    invalid.append(
                        {
                            "type": "invalid_tool_call",
                            "id": call_id,
                            "name": "search",
                            "args": bad,
                            "error": None,
                        }
                    )
                else:
                    args = {"q": draw(WORDY), "n": draw(st.integers(0, 9))}
                    valid.append(
                        {"type": "tool_call", "id": call_id, "name": "search", "args": args}
                    )
            ids = [c["id"] for c in [*valid, *invalid]]
            used.extend(i for i in ids if i not in used)
            messages.append(AIMessage(draw(TEXTS), tool_calls=valid, invalid_tool_calls=invalid))
            answered = draw(st.lists(st.sampled_from(ids), unique=True))  # dangling calls
            if draw(st.integers(0, 5)) == 0:
                answered.append("call_nowhere")  # a result whose call was never made
            for call_id in answered:
                messages.append(ToolMessage(draw(TEXTS), tool_call_id=call_id, name="search"))
        if draw(st.booleans()):
            messages.append(AIMessage(draw(TEXTS)))
    messages.append(HumanMessage(draw(WORDY)))
    return messages


def sent_tokens(messages: list[BaseMessage]) -> int:
    """Prompt tokens of the messages as LangChain sends them to an OpenAI-style API.

    ``convert_to_openai_messages`` is LangChain's own conversion; it leaves out an
    ``AIMessage``'s ``invalid_tool_calls``, which ``langchain_openai`` (not installed here)
    sends among the ``tool_calls`` with their raw arguments: they are added the same way.
    """
    converted = convert_to_openai_messages(messages)
    for message, sent in zip(messages, converted, strict=True):
        invalid = getattr(message, "invalid_tool_calls", None) or []
        if invalid:
            sent.setdefault("tool_calls", []).extend(
                {
                    "type": "function",
                    "id": call["id"],
                    "function": {"name": call["name"], "arguments": call["args"]},
                }
                for call in invalid
            )
    return COUNTER.count_messages(converted)


@contextmanager
def reports() -> Iterator[list[AssembledContext]]:
    made: list[AssembledContext] = []
    original = ContextAssembler.assemble

    def spy(self: ContextAssembler, *args: Any, **kwargs: Any) -> AssembledContext:
        context = original(self, *args, **kwargs)
        made.append(context)
        return context

    with patch.object(ContextAssembler, "assemble", spy):
        yield made


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session=sessions(), limit=st.integers(min_value=40, max_value=600))
def test_budget_messages_sends_what_it_counted(session: list[BaseMessage], limit: int) -> None:
    calls: list[CallContext] = []
    out = budget_messages(
        [("system", "Be brief."), *session],
        max_tokens=limit,
        model="gpt-4o",
        on_context=calls.append,
    )
    assert len(calls) == 1
    sent = sent_tokens(out)
    assert sent <= limit
    assert sent == calls[0].context.tokens_used


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session=sessions(), window=st.integers(min_value=120, max_value=700))
def test_the_middleware_sends_what_it_counted(session: list[BaseMessage], window: int) -> None:
    model = RecordingChatModel(messages=itertools.repeat(AIMessage("ok")))
    reserve = 30
    middleware = CtxBudgetMiddleware(
        model="gpt-4o", budget=window, reserve=reserve, pinned=["Ana is vegetarian."]
    )
    agent = create_agent(model, system_prompt="Be brief.", middleware=[middleware])
    with reports() as made:
        agent.invoke({"messages": session})
    sent, tools = model.calls[-1]
    assert tools == []
    tokens = sent_tokens(sent)
    assert tokens <= window - reserve
    assert tokens == made[-1].tokens_used


# -- the retriever: two collections' "guide#0" -------------------------------------------------
@pytest.fixture(scope="module")
def two_kbs(tmp_path_factory: pytest.TempPathFactory, embedder: LocalEmbedder) -> Any:
    folder: Path = tmp_path_factory.mktemp("two-kbs")
    memory = ContextMemory(path=folder / "chroma", embedder=embedder)
    memory.add_documents(
        [("guide", "Install the Lisbon app with pip install lisbon, then run lisbon serve.")],
        namespace="kb1",
    )
    memory.add_documents(
        [
            (
                "guide",
                "The Porto train guide: trains leave every hour from Campanha to Lisbon. "
                "Buy tickets at the station or online; bikes travel free outside peak hours, and "
                "dogs need a muzzle and a ticket of their own on every long distance train.",
            )
        ],
        namespace="kb2",
    )
    yield memory
    memory.close()


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(budget=st.integers(min_value=10, max_value=200), k=st.integers(1, 4))
def test_retrieved_documents_are_the_report_and_fit(
    two_kbs: ContextMemory, budget: int, k: int
) -> None:
    retriever = CtxBudgetRetriever(memory=two_kbs, k=k, budget=budget)
    docs = retriever.invoke("Lisbon install guide and the Porto train")
    assert sum(COUNTER.count(d.page_content) for d in docs) <= budget
    for doc in docs:
        assert doc.metadata["tokens"] == COUNTER.count(doc.page_content)
    refs = [(d.metadata["id"], d.metadata["scope"], d.metadata["scope_id"]) for d in docs]
    assert len(set(refs)) == len(refs) == len({d.id for d in docs})
    if budget >= 120 and k >= 2:  # room for both: both are returned, each with its own text
        assert sorted(refs) == [
            ("guide#0", "collection", "kb1"),
            ("guide#0", "collection", "kb2"),
        ]
        for doc in docs:
            own = "pip install" if doc.metadata["scope_id"] == "kb1" else "Campanha"
            assert own in doc.page_content


def test_two_collections_one_id_regression(two_kbs: ContextMemory) -> None:
    # Issue 27: only one "guide#0" came back with room for both, its metadata said the other's
    # tokens (22 said, 106 real), and the documents at budget=60 held 106 tokens.
    docs = CtxBudgetRetriever(memory=two_kbs, k=4, budget=400).invoke(
        "Lisbon install guide and the Porto train"
    )
    assert sorted(d.metadata["scope_id"] for d in docs) == ["kb1", "kb2"]
    for doc in docs:
        assert doc.metadata["tokens"] == COUNTER.count(doc.page_content)
    small = CtxBudgetRetriever(memory=two_kbs, k=4, budget=60).invoke(
        "Lisbon install guide and the Porto train"
    )
    assert small and sum(COUNTER.count(d.page_content) for d in small) <= 60
    for doc in small:
        assert doc.metadata["tokens"] == COUNTER.count(doc.page_content)
