"""LlamaIndex conventions: control metadata stays out of prompts, memories serialize, reports
are per call (instrumentation events, per-task ``last_context``) and describe what was set."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import chromadb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.bridge.pydantic import Field
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.dispatcher import instrument_tags
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events.base import BaseEvent
from llama_index.core.memory import StaticMemoryBlock
from llama_index.core.schema import MetadataMode, NodeWithScore, TextNode

from ctxbudget import ConfigurationError, InvalidItemError, Tier, TokenCounter
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.memory.policy.scoring import Scoring
from ctxbudget.store.chroma_store import ChromaStore
from llama_index.ctxbudget import (
    ContextAssembledEvent,
    CtxBudgetEmbedding,
    CtxBudgetMemory,
    CtxBudgetNodePostprocessor,
    CtxBudgetRetriever,
    set_tier,
)
from llama_index.ctxbudget.assembly import question_of

from .helpers import RecordingLLM, prompt_tokens


def user(text: str) -> ChatMessage:
    return ChatMessage(role=MessageRole.USER, content=text)


def assistant(text: str) -> ChatMessage:
    return ChatMessage(role=MessageRole.ASSISTANT, content=text)


def node(node_id: str, text: str, score: float, **metadata: object) -> NodeWithScore:
    return NodeWithScore(node=TextNode(id_=node_id, text=text, metadata=metadata), score=score)


def memory_on(context_memory: ContextMemory, **options: Any) -> CtxBudgetMemory:
    options.setdefault("session_id", f"s-{uuid.uuid4().hex[:8]}")
    return CtxBudgetMemory.from_defaults(memory=context_memory, **options)


class Collected(BaseEventHandler):
    """Every ContextAssembledEvent dispatched while the test runs (from any thread)."""

    events: list[ContextAssembledEvent] = Field(default_factory=list)

    @classmethod
    def class_name(cls) -> str:
        return "Collected"

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        if isinstance(event, ContextAssembledEvent):
            self.events.append(event)


@pytest.fixture
def assembled() -> Iterator[list[ContextAssembledEvent]]:
    """The events a handler on LlamaIndex's root dispatcher receives; removed afterwards."""
    handler = Collected()
    root = get_dispatcher()
    root.add_event_handler(handler)
    yield handler.events
    root.event_handlers.remove(handler)


# -- control metadata ---------------------------------------------------------------------------
def test_the_tier_key_is_neither_printed_into_the_prompt_nor_embedded(
    embedding: CtxBudgetEmbedding,
) -> None:
    rule = Document(text="House rule: never serve peanuts to Ada.", metadata={"file": "rules"})
    set_tier(rule, "PINNED")
    assert (
        rule.excluded_llm_metadata_keys == rule.excluded_embed_metadata_keys == ["ctxbudget_tier"]
    )
    assert "ctxbudget_tier" not in rule.get_content(MetadataMode.EMBED)
    # Tagged by hand, as a user who never heard of set_tier would: hidden all the same.
    by_hand = Document(text="Ada likes tomato soup.", metadata={"ctxbudget_tier": "ENTITY"})
    filler = [
        Document(text=f"Soup recipe {i}: simmer, blend and season. " * 6, metadata={"n": i})
        for i in range(8)
    ]
    index = VectorStoreIndex.from_documents([rule, by_hand, *filler], embed_model=embedding)
    llm = RecordingLLM(max_tokens=10)
    post = CtxBudgetNodePostprocessor(budget=200)
    engine = index.as_query_engine(llm=llm, similarity_top_k=10, node_postprocessors=[post])

    response = engine.query("Which soup should I cook for Ada?")

    prompt = "\n".join(llm.text_prompts())
    assert "never serve peanuts" in prompt  # PINNED: packed first, whatever its score
    assert "ctxbudget_tier" not in prompt
    assert "file: rules" in prompt  # the user's own metadata is still shown
    tagged = [n for n in response.source_nodes if "ctxbudget_tier" in n.node.metadata]
    assert {n.node.get_content() for n in tagged} >= {rule.text, by_hand.text}
    for kept in tagged:
        assert "ctxbudget_tier" in kept.node.excluded_llm_metadata_keys
        assert "ctxbudget_tier" in kept.node.excluded_embed_metadata_keys
    # The docstore's node is not changed: the postprocessor returns copies.
    stored = index.docstore.get_node(index.ref_doc_info[by_hand.doc_id].node_ids[0])
    assert "ctxbudget_tier" not in stored.excluded_llm_metadata_keys
    with pytest.raises(InvalidItemError, match="tier nodes cannot take"):
        set_tier(Document(text="x"), Tier.RECENT)
    with pytest.raises(InvalidItemError, match="not a tier"):
        set_tier(Document(text="x"), "IMPORTANT")


# -- serialization ------------------------------------------------------------------------------
def test_from_dict_of_to_dict_reopens_the_same_memory(
    tmp_path: Path, embedding: CtxBudgetEmbedding
) -> None:
    block = StaticMemoryBlock(name="core", static_content="The user is Ada.", priority=1)
    config = MemoryConfig(recent_messages=12, retrieved_floor=0.2)
    with CtxBudgetMemory.from_defaults(
        token_limit=400,
        path=tmp_path / "store",
        session_id="chat-1",
        user_id="ada",
        model="gpt-4o-mini",
        embedder=embedding,
        config=config,
        system_prompt="Be brief.",
        memory_blocks=[block],
        block_tiers={"core": int(Tier.ENTITY)},
    ) as first:
        first.put_messages([user("I moved to Lisbon."), assistant("Lovely city.")])
        data = json.loads(first.to_json())
        assert data["memory_blocks"] == ["core"]
        assert data["store"]["path"] == str((tmp_path / "store").resolve())

        with pytest.raises(ConfigurationError, match=r"memory blocks \['core'\].*memory_blocks="):
            CtxBudgetMemory.from_dict(data, embedder=embedding)
        with CtxBudgetMemory.from_dict(data, embedder=embedding, memory_blocks=[block]) as back:
            assert back.to_dict() == data
            assert back.context_memory.config == config
            assert [m.content for m in back.get_all()] == [m.content for m in first.get_all()]
            assert back.get() == first.get()
        # Fields can be overridden, as LlamaIndex's from_dict allows.
        other = CtxBudgetMemory.from_dict(
            data, memory=first.context_memory, memory_blocks=[block], session_id="chat-2"
        )
        assert (other.session_id, other.context_memory) == ("chat-2", first.context_memory)


def test_what_cannot_be_serialized_is_a_clear_error(
    tmp_path: Path, embedding: CtxBudgetEmbedding
) -> None:
    client = chromadb.EphemeralClient()
    with ContextMemory(client=client, embedder=embedding, write_behind=False) as live:
        data = memory_on(live, token_limit=300).to_dict()
        assert data["store"]["path"] is None
        with pytest.raises(ConfigurationError, match="given Chroma client.*memory=ContextMemory"):
            CtxBudgetMemory.from_dict(data)
        assert CtxBudgetMemory.from_dict(data, memory=live).to_dict() == data
        with pytest.raises(ConfigurationError, match="either memory= or embedder"):
            CtxBudgetMemory.from_dict(data, memory=live, embedder=embedding)
    with CtxBudgetMemory.from_defaults(
        token_limit=300, path=tmp_path / "s", embedder=embedding
    ) as memory:
        data = memory.to_dict()
    data["store"]["embedder"] = "some-other-model"
    with pytest.raises(ConfigurationError, match="written with embedder 'some-other-model'"):
        CtxBudgetMemory.from_dict(data, embedder=embedding)
    data["class_name"] = "ChatMemoryBuffer"
    with pytest.raises(ConfigurationError, match="describes a 'ChatMemoryBuffer'"):
        CtxBudgetMemory.from_dict(data, embedder=embedding)


@pytest.fixture
def store(tmp_path: Path, embedding: CtxBudgetEmbedding) -> Iterator[ChromaStore]:
    with ChromaStore(tmp_path / "store", embedder=embedding) as opened:
        yield opened


unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
names = st.text(alphabet="abcdefghij-_0123456789", min_size=1, max_size=12)
configs = st.builds(
    MemoryConfig,
    recent_messages=st.integers(0, 200),
    recent_share=st.tuples(unit, unit).map(lambda pair: (min(pair), max(pair))),
    semantic_k=st.integers(0, 64),
    other_sessions=st.booleans(),
    retrieved_floor=unit,
    episode_gap=st.floats(min_value=1.0, max_value=1e6),
    scoring=st.builds(
        Scoring,
        relevance_weight=st.floats(min_value=0.0, max_value=10.0),
        lexical_weight=unit,
        half_life_days=st.floats(min_value=0.01, max_value=1e4),
    ),
)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    config=configs,
    namespace=names,
    token_limit=st.integers(1, 2_000_000),
    session_id=names,
    user_id=st.none() | names,
    model=st.sampled_from(["gpt-4o", "gpt-4o-mini", "gpt-4.1"]),
    tiers=st.dictionaries(names, st.integers(20, 99).filter(lambda t: t != Tier.RECENT)),
)
def test_property_to_dict_from_dict_round_trips_any_configuration(
    store: ChromaStore,
    embedding: CtxBudgetEmbedding,
    config: MemoryConfig,
    namespace: str,
    token_limit: int,
    session_id: str,
    user_id: str | None,
    model: str,
    tiers: dict[str, int],
) -> None:
    live = ContextMemory(
        store=store, namespace=namespace, model=model, config=config, write_behind=False
    )
    memory = CtxBudgetMemory(
        memory=live,
        token_limit=token_limit,
        session_id=session_id,
        model=model,
        user_id=user_id,
        block_tiers=tiers,
    )
    data = json.loads(memory.to_json())  # JSON-ready, and read back as JSON gives it
    with CtxBudgetMemory.from_dict(data, embedder=embedding) as back:
        assert back.to_dict() == data
        assert back.context_memory.config == config
        assert back.context_memory.namespace == namespace
        assert back.context_memory.store.folder == store.folder
        fields = ("token_limit", "session_id", "model", "user_id", "block_tiers")
        assert [getattr(back, f) for f in fields] == [getattr(memory, f) for f in fields]


# -- what get answers, and what it reports -------------------------------------------------------
def test_get_without_input_answers_the_last_user_message_and_reports_what_it_returns(
    context_memory: ContextMemory, counter: TokenCounter
) -> None:
    memory = memory_on(context_memory, token_limit=260)
    memory.put_messages([user("The code of the blue door is 4711."), assistant("Noted.")])
    for i in range(12):
        memory.put_messages(
            [user(f"Tell me about tram line {i}."), assistant(f"Tram {i} runs all day. " * 4)]
        )
    memory.put_messages(
        [user("What was the code of the blue door?"), assistant("Let me look that up. " * 6)]
    )

    out = memory.get()

    context = memory.last_context
    assert context is not None
    # What was counted is exactly what is returned: no query rendered and then dropped.
    assert prompt_tokens(counter, out) == context.tokens_used <= 260
    assert [m.content for m in out].count(out[-1].content) == 1
    assert out[-1].role is MessageRole.ASSISTANT  # the conversation as it stands
    assert Tier.QUERY not in context.tiers
    # The question searched for is the last user message, not the assistant's reply.
    question = question_of(context_memory, memory.session_id, None)
    assert (question.text, question.pending) == ("What was the code of the blue door?", False)
    assert any("4711" in (m.content or "") for m in out)

    memory.put(user("And the red door?"))
    out = memory.get()
    assert out[-1].content == "And the red door?"  # pending: the question, returned last
    assert prompt_tokens(counter, out) == memory.last_context.tokens_used  # type: ignore[union-attr]


def test_an_input_sent_by_the_caller_comes_off_the_budget_not_the_report(
    context_memory: ContextMemory, counter: TokenCounter
) -> None:
    memory = memory_on(context_memory, token_limit=300)
    memory.put_messages(
        [user(f"Question {i}? " * 5) if i % 2 == 0 else assistant("Yes.") for i in range(20)]
    )
    question = "Please summarize what we said about the trams."

    out = memory.get(input=question)

    context = memory.last_context
    assert context is not None
    assert prompt_tokens(counter, out) == context.tokens_used
    assert context.tokens_available == 300 - counter.count_message("user", question)
    assert prompt_tokens(counter, [*out, user(question)]) <= 300


def test_explain_shows_the_system_prompt_once_and_never_as_its_own_duplicate(
    context_memory: ContextMemory,
) -> None:
    memory = memory_on(context_memory, token_limit=300, system_prompt="You are Ada's agent.")
    memory.pin("Ada is allergic to peanuts.")
    memory.put(user("Hello"))

    memory.get()

    context = memory.last_context
    assert context is not None
    # Sent as put, a message of its own (llama_index.ctxbudget.system): role system, never cut.
    system_ids = [it.id for it in context.included if it.role == "system"]
    assert len(system_ids) == 1
    assert all(p.item.id not in system_ids for p in context.pruned)
    assert sum(1 for it in context.included if it.text.startswith("You are Ada's agent.")) == 1
    assert "duplicate" not in context.explain()


# -- instrumentation and logs -------------------------------------------------------------------
def test_each_get_of_a_chat_engine_dispatches_its_report(
    context_memory: ContextMemory,
    counter: TokenCounter,
    assembled: list[ContextAssembledEvent],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="llama_index.ctxbudget.memory")
    memory = memory_on(context_memory, token_limit=400, session_id="engine-1")
    llm = RecordingLLM(max_tokens=20)
    engine = SimpleChatEngine.from_defaults(llm=llm, memory=memory, system_prompt="Be brief.")

    for turn in range(3):
        engine.chat(f"Tell me about Lisbon, part {turn}.")

    events = [e for e in assembled if e.session_id == "engine-1"]
    assert len(events) == 3
    for event, prompt in zip(events, llm.chat_prompts(), strict=True):
        assert event.component == "CtxBudgetMemory" and event.budget == 400
        # The engine's system prompt comes off what the memory may use.
        assert event.tokens_available < 400
        assert event.tokens_used == prompt_tokens(counter, prompt[1:]) <= event.tokens_available
        assert event.context is not None and event.included == len(event.context.included)
        dumped = event.model_dump()
        assert "context" not in dumped and dumped["class_name"] == "ContextAssembledEvent"
        json.dumps(dumped, default=str)
    logged = [r.getMessage() for r in caplog.records if r.name == "llama_index.ctxbudget.memory"]
    assert len(logged) == 3
    assert logged[-1].startswith("CtxBudgetMemory session 'engine-1' (token_limit=400): ")
    assert events[-1].context is not None
    assert events[-1].context.explain().splitlines()[2] in logged[-1]  # the tier table


def test_postprocessor_and_retriever_report_the_budget_the_user_set(
    guides_memory: ContextMemory,
    assembled: list[ContextAssembledEvent],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="llama_index.ctxbudget")
    nodes = [node(f"n{i}", f"Fact {i} about Lisbon trams. " * 8, 1 - i / 10) for i in range(6)]
    post = CtxBudgetNodePostprocessor(budget=150)
    kept = post.postprocess_nodes(nodes)
    retriever = CtxBudgetRetriever(memory=guides_memory, budget=90)
    found = retriever.retrieve("Which tram climbs through Alfama?")
    nothing = CtxBudgetNodePostprocessor(budget=1).postprocess_nodes(nodes)

    by_component = {(e.component, e.budget): e for e in assembled}
    event = by_component[("CtxBudgetNodePostprocessor", 150)]
    assert (event.tokens_available, event.included) == (150, len(kept))
    assert event.solvers["RETRIEVED"] == event.solver in {"exact", "greedy"}  # some were cut
    assert sum(event.pruned_by_reason.values()) == event.pruned > 0
    assert event.included + event.pruned == len(nodes)
    event = by_component[("CtxBudgetRetriever", 90)]
    assert event.tokens_available == 90 and event.included >= len(found) > 0
    empty = by_component[("CtxBudgetNodePostprocessor", 1)]
    assert (nothing, empty.context, empty.tokens_used, empty.pruned) == ([], None, 0, len(nodes))
    heads = [r.getMessage().splitlines()[0] for r in caplog.records]
    assert any(h.startswith("CtxBudgetNodePostprocessor (budget=150): ") for h in heads)
    assert any(h.startswith("CtxBudgetRetriever (budget=90): ") for h in heads)
    assert not any("token_limit" in h or "window" in h for h in heads)


@pytest.fixture
def guides_memory(context_memory: ContextMemory) -> ContextMemory:
    text = "Lisbon's tram 28 climbs through Alfama. " * 6 + "Pasteis de nata are best warm."
    context_memory.add_documents([("lisbon", text)], collection="travel", chunk_tokens=40)
    return context_memory


# -- per-call results under concurrency -----------------------------------------------------------
def test_concurrent_threads_sharing_a_postprocessor_each_see_their_own_report(
    assembled: list[ContextAssembledEvent],
) -> None:
    post = CtxBudgetNodePostprocessor(budget=120)
    threads = 6
    barrier = threading.Barrier(threads, timeout=60)
    seen: dict[int, tuple[list[NodeWithScore], object]] = {}

    def work(i: int) -> None:
        nodes = [node(f"t{i}-{j}", f"Thread {i} fact {j}. " * 6, 1 - j / 10) for j in range(5)]
        with instrument_tags({"request": i}):
            kept = post.postprocess_nodes(nodes)
        barrier.wait()  # every call is done before any reads its report
        seen[i] = (kept, post.last_context)

    workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()

    assert sorted(seen) == list(range(threads))
    events = {e.tags["request"]: e for e in assembled}
    for i, (kept, context) in seen.items():
        assert context is not None and events[i].context is context
        offered = [*events[i].context.included, *(p.item for p in events[i].context.pruned)]
        assert {it.id for it in offered} == {f"t{i}-{j}" for j in range(5)}
        assert events[i].context.included_ids == [n.node_id for n in kept]


async def test_concurrent_tasks_for_different_sessions_each_see_their_own_result(
    context_memory: ContextMemory,
    counter: TokenCounter,
    assembled: list[ContextAssembledEvent],
) -> None:
    sessions = 4
    memories = [
        memory_on(context_memory, token_limit=300, session_id=f"task-{i}") for i in range(sessions)
    ]
    for i, memory in enumerate(memories):
        memory.put_messages(
            [user(f"My colour is colour-{i}."), assistant("Noted."), user(f"Colour {i}?")]
        )
    barrier = asyncio.Barrier(sessions)

    async def ask(i: int, memory: CtxBudgetMemory) -> tuple[list[ChatMessage], object]:
        with instrument_tags({"task": i}):
            out = await memory.aget()
        await barrier.wait()
        return out, memory.last_context

    results = await asyncio.gather(*(ask(i, m) for i, m in enumerate(memories)))

    events = {e.tags["task"]: e for e in assembled if "task" in e.tags}
    for i, (out, context) in enumerate(results):
        assert any(f"colour-{i}" in (m.content or "") for m in out)
        assert not any(
            f"colour-{j}" in (m.content or "") for m in out for j in range(sessions) if j != i
        )
        assert events[i].session_id == f"task-{i}" and events[i].context is context
        assert events[i].tokens_used == prompt_tokens(counter, out)

    # One memory shared by tasks: each task's last_context is its own call's.
    shared = memories[0]
    questions = ["Why?", "And what about all of the colours we talked about before, in order?"]
    both = asyncio.Barrier(len(questions))

    async def ask_shared(question: str) -> object:
        await shared.aget(input=question)
        await both.wait()
        return shared.last_context

    contexts = await asyncio.gather(*(ask_shared(q) for q in questions))
    for question, context in zip(questions, contexts, strict=True):
        assert context.tokens_available == 300 - counter.count_message("user", question)  # type: ignore[attr-defined]
    assert shared.last_context is None  # this task made no call of its own
