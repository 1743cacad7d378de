"""What LlamaIndex sends fits, and is what the report counted (issue 27, "fit as sent").

For every path of the adapter that hands messages or nodes back, the messages or node texts are
serialized the way LlamaIndex sends them (`helpers.openai_messages`: an OpenAI-style LLM's
conversion, dict tool kwargs through ``json.dumps`` as LlamaIndex's LLM classes do, str kwargs
as they are) and counted with the model's tokenizer, independently of the adapter:

* ``CtxBudgetMemory.get``: at most ``token_limit`` and exactly the report's ``tokens_used``;
* ``CtxBudgetMemory.get_all``: each call's arguments as sent are the text stored;
* ``CtxBudgetRetriever`` and ``CtxBudgetNodePostprocessor``: the node texts as the LLM reads
  them are the report's included items, and fit ``budget``.

Inputs cover tool calls with non-ASCII and compactly written arguments (as dicts and as text),
call ids reused across turns, dangling calls and results, images and empty contents.
"""

from __future__ import annotations

import itertools
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llama_index.core.base.llms.types import (
    ChatMessage,
    ImageBlock,
    MessageRole,
    TextBlock,
    ToolCallBlock,
)
from llama_index.core.schema import MetadataMode, NodeWithScore, TextNode

from ctxbudget import TokenCounter
from ctxbudget.memory.context import ContextMemory
from llama_index.ctxbudget import (
    CtxBudgetEmbedding,
    CtxBudgetMemory,
    CtxBudgetNodePostprocessor,
    CtxBudgetRetriever,
)

from .helpers import openai_messages, prompt_tokens

WORDS = ["lisbon", "train", "porto", "visa", "ok", "weather", "Ärger", "日本語", "ação", "😀"]
TEXTS = st.lists(st.sampled_from(WORDS), min_size=0, max_size=10).map(" ".join)
WORDY = st.lists(st.sampled_from(WORDS), min_size=1, max_size=10).map(" ".join)
IMAGE = "https://example.com/cat.png"


@st.composite
def kwargs_forms(draw: st.DrawFn) -> dict[str, Any] | str:
    """Tool kwargs as models and writers give them: dicts, JSON text of any layout, bad JSON."""
    value = {"q": draw(WORDY), "n": draw(st.integers(0, 99))}
    form = draw(st.sampled_from(["dict", "compact", "spaced", "unicode", "malformed"]))
    if form == "dict":
        return value
    if form == "compact":
        return json.dumps(value, separators=(",", ":"))
    if form == "spaced":
        return json.dumps(value)
    if form == "unicode":
        return json.dumps(value, ensure_ascii=False)
    return '{"q": "' + draw(WORDY)


@st.composite
def sessions(draw: st.DrawFn) -> list[ChatMessage]:
    """An agent session with what LlamaIndex puts into memory, ending with a user question."""
    messages: list[ChatMessage] = []
    counter = itertools.count()
    used: list[str] = []
    for _ in range(draw(st.integers(1, 6))):
        blocks: list[Any] = [TextBlock(text=draw(TEXTS))]
        if draw(st.integers(0, 3)) == 0:
            blocks.append(ImageBlock(url=IMAGE))
        messages.append(ChatMessage(role=MessageRole.USER, blocks=blocks))
        for _step in range(draw(st.integers(0, 2))):
            calls: list[str] = []
            for _call in range(draw(st.integers(1, 2))):
                # A call id used by an earlier turn, as some providers number calls per turn.
                reuse = used and draw(st.integers(0, 4)) == 0
                call_id = draw(st.sampled_from(used)) if reuse else f"call_{next(counter)}"
                if call_id not in calls:
                    calls.append(call_id)
            used.extend(c for c in calls if c not in used)
            parts: list[Any] = []
            if draw(st.booleans()):
                parts.append(TextBlock(text=draw(TEXTS)))
            parts += [
                ToolCallBlock(tool_call_id=c, tool_name="search", tool_kwargs=draw(kwargs_forms()))
                for c in calls
            ]
            messages.append(ChatMessage(role=MessageRole.ASSISTANT, blocks=parts))
            answered = draw(st.lists(st.sampled_from(calls), unique=True))  # dangling calls
            if draw(st.integers(0, 5)) == 0:
                answered.append("call_nowhere")  # a result whose call is not stored
            for call_id in answered:
                messages.append(
                    ChatMessage(
                        role=MessageRole.TOOL,
                        content=draw(TEXTS),  # empty results too
                        additional_kwargs={"tool_call_id": call_id},
                    )
                )
        if draw(st.booleans()):
            messages.append(ChatMessage(role=MessageRole.ASSISTANT, content=draw(TEXTS)))
    messages.append(ChatMessage(role=MessageRole.USER, content=draw(WORDY)))
    return messages


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory, embedding: CtxBudgetEmbedding) -> Any:
    folder: Path = tmp_path_factory.mktemp("li-sent-tokens")
    memory = ContextMemory(folder / "chroma", embedder=embedding)
    memory.add_documents(
        [("guide", "Trains to Porto leave hourly. Tickets: ação, 日本語 guide, Ärger desk.")],
        collection="kb1",
    )
    memory.add_documents(
        [("guide", "The visa office opens at nine; bring a photo.")], collection="kb2"
    )
    yield memory
    memory.close()


@pytest.mark.slow
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(session=sessions(), limit=st.integers(min_value=60, max_value=700))
def test_get_and_get_all_send_what_was_counted(
    shared: ContextMemory, counter: TokenCounter, session: list[ChatMessage], limit: int
) -> None:
    memory = CtxBudgetMemory.from_defaults(
        memory=shared, token_limit=limit, session_id=f"s-{uuid.uuid4().hex[:8]}"
    )
    memory.put_messages(session)
    try:
        out = memory.get()
    except Exception as exc:  # noqa: BLE001 - only "the question alone does not fit" may fail
        assert type(exc).__name__ == "BudgetExceededError", repr(exc)
        return
    report = memory.last_context
    assert report is not None
    sent = prompt_tokens(counter, out)
    assert sent <= limit
    assert sent == report.tokens_used
    # Stored and read back: each call's arguments are sent as the text that was stored.
    stored = {
        (record.id, call["id"]): call["function"]["arguments"]
        for record in shared.history(memory.session_id)
        for call in json.loads(str(record.metadata.get("_tool_calls") or "[]"))
    }
    records = [r.id for r in shared.history(memory.session_id)]
    back = [m for m in memory.get_all() if m.role != MessageRole.SYSTEM]
    assert len(back) == len(records)
    for record_id, message in zip(records, openai_messages(back), strict=True):
        for call in message.get("tool_calls", []):
            assert call["function"]["arguments"] == stored[(record_id, call["id"])]


@pytest.mark.slow
@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(budget=st.integers(min_value=20, max_value=300), k=st.one_of(st.none(), st.integers(1, 3)))
def test_retrieved_nodes_are_the_report_and_fit(
    shared: ContextMemory, counter: TokenCounter, budget: int, k: int | None
) -> None:
    retriever = CtxBudgetRetriever(shared, budget=budget, k=k)
    nodes = retriever.retrieve("guide to Porto trains and the visa office")
    context = retriever.last_context
    texts = [n.node.get_content(metadata_mode=MetadataMode.LLM) for n in nodes]
    assert sum(counter.count(t) for t in texts) <= budget
    if context is None:
        assert nodes == []
        return
    assert context.tokens_used <= budget
    kept = sorted(context.included, key=lambda item: (-item.score, item.id))
    assert texts == [item.text for item in kept]
    assert [n.node_id for n in nodes] == [item.id for item in kept]
    # Two collections' "guide#0" are two nodes, each with its own metadata.
    for node, item in zip(nodes, kept, strict=True):
        assert item.ref is not None and item.ref.scope is not None
        meta = node.node.metadata
        assert (meta["id"], (meta["scope"], meta["scope_id"])) == (item.ref.id, item.ref.scope)


@settings(max_examples=60, deadline=None)
@given(
    nodes=st.lists(
        st.tuples(st.sampled_from(["a", "b", "guide#0"]), TEXTS, st.floats(0, 1)),
        min_size=1,
        max_size=8,
    ),
    budget=st.integers(min_value=10, max_value=200),
)
def test_postprocessed_nodes_are_the_report_and_fit(
    counter: TokenCounter, nodes: list[tuple[str, str, float]], budget: int
) -> None:
    given_nodes = [
        NodeWithScore(node=TextNode(id_=node_id, text=text, metadata={"kb": "x"}), score=score)
        for node_id, text, score in nodes
    ]
    post = CtxBudgetNodePostprocessor(budget=budget)
    out = post.postprocess_nodes(given_nodes)
    context = post.last_context
    texts = [n.node.get_content(metadata_mode=MetadataMode.LLM) for n in out]
    assert sum(counter.count(t) for t in texts) <= budget
    if context is None:
        assert out == []
        return
    included = {item.id: item.text for item in context.included}
    assert sorted(texts) == sorted(included.values())
    # Every node offered is included or pruned, once (nodes sharing an id and a content are
    # one node found twice: one is pruned as its duplicate; one id with two contents, two).
    assert len(context.included) + len(context.pruned) == len(given_nodes)
    assert len(out) == len(context.included)


# -- regressions (issue 27) -------------------------------------------------------------------
def test_tool_calls_written_compactly_or_in_unicode_are_sent_as_counted(
    context_memory: ContextMemory, counter: TokenCounter
) -> None:
    # The report said 94 of 96 tokens; LlamaIndex re-encoded the parsed kwargs (ASCII escapes,
    # spaces) and sent 230.
    note = "明日の朝、東京駅から京都まで新幹線で行きます。天気を調べてください。"
    arguments = json.dumps(
        {"city": "東京", "note": note}, separators=(",", ":"), ensure_ascii=False
    )
    context_memory.add_messages(
        "tools",
        [
            {"role": "user", "text": "Weather?"},
            {
                "role": "assistant",
                "text": "",
                "tool_calls": [{"id": "c1", "function": {"name": "w", "arguments": arguments}}],
            },
            {"role": "tool", "text": "晴れ", "tool_call_id": "c1"},
            {"role": "user", "text": "Thanks"},
        ],
        progress=False,
    )
    memory = CtxBudgetMemory.from_defaults(
        memory=context_memory, token_limit=96, session_id="tools"
    )
    out = memory.get()
    report = memory.last_context
    assert report is not None
    assert [m.role.value for m in out] == ["user", "assistant", "tool", "user"]
    assert prompt_tokens(counter, out) == report.tokens_used <= 96
    call = openai_messages(out)[1]["tool_calls"][0]
    assert call["function"]["arguments"] == arguments


def test_two_collections_one_id_two_nodes_each_with_its_own_metadata(
    context_memory: ContextMemory,
) -> None:
    context_memory.add_documents([("guide", "Install with pip install lisbon.")], collection="kb1")
    context_memory.add_documents(
        [("guide", "Porto trains leave every hour from Campanha.")], collection="kb2"
    )
    retriever = CtxBudgetRetriever(context_memory, budget=300)
    nodes = retriever.retrieve("install guide and Porto trains")
    by_kb = {n.node.metadata["scope_id"]: n for n in nodes}
    assert set(by_kb) == {"kb1", "kb2"}
    assert "pip install" in by_kb["kb1"].node.text and "Campanha" in by_kb["kb2"].node.text
    assert all(n.node.metadata["id"] == "guide#0" for n in nodes)
    assert len({n.node_id for n in nodes}) == 2
    context = retriever.last_context
    assert context is not None and context.pruned == []  # nothing pruned as a "duplicate"
    # The postprocessor, given the nodes of two indexes that share an id: two nodes kept.
    twins = [
        NodeWithScore(node=TextNode(id_="guide#0", text=n.node.text), score=n.score) for n in nodes
    ]
    kept = CtxBudgetNodePostprocessor(budget=300).postprocess_nodes(twins)
    assert sorted(n.node.text for n in kept) == sorted(n.node.text for n in nodes)
