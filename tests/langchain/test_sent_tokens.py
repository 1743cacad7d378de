"""What LangChain sends fits, and is what the report counted (issue 27, "fit as sent").

Messages are serialized the way LangChain sends them (``convert_to_openai_messages``, the
framework's own OpenAI conversion) and counted with the model's tokenizer, independently of the
adapter. For ``budget_messages`` and ``CtxBudgetMiddleware`` (a real ``create_agent``), over
sessions with non-ASCII tool arguments, invalid calls, call ids reused across turns, dangling
calls and results, images and empty contents: what is sent is at most the budget and exactly the
report's ``tokens_used``; with a memory (pins, documents, other sessions), the report, the span
and the run metadata say exactly what the model received (issue 39). For
``CtxBudgetRetriever``: the documents are the report's included items, and two collections'
``guide#0`` are two documents.
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
from core.strategies import item_sets
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.utils import convert_to_openai_messages
from langgraph.checkpoint.memory import InMemorySaver
from lc_fakes import RecordingChatModel
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ctxbudget import (
    AssembledContext,
    BudgetExceededError,
    ConfigurationError,
    ContextAssembler,
    ContextItem,
    Tier,
    TokenCounter,
)
from ctxbudget.core.split import one_system_layouts, split_prefix
from ctxbudget.embed.local import LocalEmbedder
from ctxbudget.memory.context import ContextMemory
from langchain_ctxbudget import (
    CallContext,
    CtxBudgetMiddleware,
    CtxBudgetRetriever,
    budget_messages,
)
from langchain_ctxbudget.observe import METADATA_KEY

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
        collection="kb1",
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
        collection="kb2",
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


# -- with memory: the report, the span and the run metadata count what the model receives ------
# Issue 39 ("counting as sent"): the middleware sends everything before the conversation as one
# system message, but its assembly rendered and counted memories as a second one: the report,
# the span and the run metadata said 4 tokens (one message's overhead) more than was sent.
# (``traced``: tests/langchain/conftest.py.)


class RunMetadata(BaseCallbackHandler):
    """The ``ctxbudget`` summary of each chat model run (what LangSmith shows)."""

    def __init__(self) -> None:
        self.summaries: list[dict[str, Any]] = []

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self.summaries.append(dict((metadata or {})[METADATA_KEY]))


def answers() -> Iterator[AIMessage]:
    for number in itertools.count():
        yield AIMessage(f"Answer {number}: the train leaves at 9.")


def test_with_memory_the_report_span_and_metadata_count_what_the_model_receives(
    memory: ContextMemory, traced: InMemorySpanExporter
) -> None:
    # Several system parts: the prompt, the middleware's pinned fact, a user pin, a session
    # pin, documents and another session of the user (memories).
    memory.pin(None, "Ana is vegetarian and lives in Lisbon.", user_id="ana")
    memory.pin("lisbon-trip", "Ana travels with her dog.", user_id="ana")
    memory.add_documents(
        [("trains", "The Lisbon to Porto train leaves Oriente station at 9, every day.")],
        collection="kb",
    )
    memory.add_messages(
        "older-trip",
        [("user", "I booked the Porto train for Friday."), ("assistant", "Noted: Friday.")],
        user_id="ana",
    )
    model = RecordingChatModel(messages=answers())
    calls: list[CallContext] = []
    middleware = CtxBudgetMiddleware(
        model="gpt-4o",
        budget=2000,
        memory=memory,
        pinned=["Answer in one sentence."],
        on_context=calls.append,
    )
    agent = create_agent(
        model, system_prompt="Be brief.", middleware=[middleware], checkpointer=InMemorySaver()
    )
    metadata = RunMetadata()
    config: Any = {"configurable": {"thread_id": "lisbon-trip"}, "callbacks": [metadata]}
    questions = [
        "When does the Porto train leave?",
        "Which day did I book it for?",
        "Can my dog come along on the train?",
    ]
    for question in questions:
        traced.clear()
        agent.invoke({"messages": [HumanMessage(question)]}, config, context={"user_id": "ana"})
        sent, _ = model.calls[-1]
        # One system message, holding memories as well as the prompt and the pins.
        assert [m.type for m in sent].count("system") == 1 and sent[0].type == "system"
        assert "Oriente" in sent[0].text and "vegetarian" in sent[0].text
        tokens = sent_tokens(sent)  # from scratch: LangChain's conversion, tiktoken
        assert calls[-1].context.tokens_used == tokens
        assert metadata.summaries[-1]["tokens_used"] == tokens
        spans = [s for s in traced.get_finished_spans() if s.name == "ctxbudget.assemble"]
        assert spans and (spans[-1].attributes or {})["ctxbudget.tokens.used"] == tokens
    assert len(model.calls) == len(questions)


def test_budget_messages_with_pinned_facts_and_extra_items_counts_what_it_returns() -> None:
    calls: list[CallContext] = []
    out = budget_messages(
        [("system", "Be brief."), ("user", "When does the train leave?")],
        max_tokens=500,
        model="gpt-4o",
        pinned=["Ana is vegetarian."],
        extra=[ContextItem("timetable", "The train leaves at 9.", tier=Tier.RETRIEVED)],
        on_context=calls.append,
    )
    assert [m.type for m in out] == ["system", "human"]
    assert "leaves at 9" in out[0].text
    assert sent_tokens(out) == calls[0].context.tokens_used


@settings(max_examples=50, deadline=None)
@given(items=item_sets(), budget=st.integers(min_value=40, max_value=700))
def test_one_system_layout_counts_its_messages_and_says_the_same_text(
    items: list[ContextItem], budget: int
) -> None:
    merged = ContextAssembler(COUNTER, layouts=one_system_layouts(COUNTER))
    try:
        ctx = merged.assemble(items, budget=budget)
    except BudgetExceededError:
        return
    messages = ctx.to_messages()
    assert ctx.tokens_used == COUNTER.count_messages(messages) <= ctx.tokens_available
    lead = list(itertools.takewhile(lambda m: m["role"] == "system", messages))
    assert len(lead) <= 1
    # The same text as the default layout's (one or two system messages) put together.
    default = ContextAssembler(COUNTER).assemble(items, budget=budget)
    if default.included_ids == ctx.included_ids:
        two = list(itertools.takewhile(lambda m: m["role"] == "system", default.to_messages()))
        assert "".join(m["content"] for m in two) == "".join(m["content"] for m in lead)


def test_split_prefix_refuses_an_assembly_with_two_system_messages_before_the_callers() -> None:
    items = [
        ContextItem("sys", "Be brief.", tier=Tier.SYSTEM),
        ContextItem("doc", "The train leaves at 9.", tier=Tier.RETRIEVED),
        ContextItem("m0", "When?", tier=Tier.RECENT, role="user"),
    ]
    two = ContextAssembler(COUNTER).assemble(items, budget=200)
    with pytest.raises(ConfigurationError, match="one_system_layouts"):
        split_prefix(two, {"m0"})
    one = ContextAssembler(COUNTER, layouts=one_system_layouts(COUNTER)).assemble(items, budget=200)
    prefix, kept = split_prefix(one, {"m0"})
    head = two.to_messages()[:2]
    assert [m["role"] for m in head] == ["system", "system"]
    assert kept == ["m0"] and prefix == "".join(m["content"] for m in head)
    assert one.tokens_used == two.tokens_used - COUNTER.per_message - COUNTER.count("system")
