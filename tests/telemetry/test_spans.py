"""OpenTelemetry spans: what each says matches the call's own report, and nothing private leaks.

The spans go to the SDK's in-memory exporter through a provider given to
`ctxbudget.telemetry.configure` (the global provider can be set once per process; the suite
never sets it). Everything else is real: tiktoken, an embedded Chroma in ``tmp_path``, the
default embedder; the only fake is the LangChain chat model.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from core.strategies import item_sets
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from lc_fakes import RecordingChatModel
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from ctxbudget import (
    BudgetExceededError,
    ConfigurationError,
    ContextAssembler,
    ContextItem,
    StoreInputError,
    Tier,
    telemetry,
)
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.memory.context import ContextMemory
from ctxbudget.telemetry import hashed_id
from ctxbudget.telemetry.spans import active
from langchain_ctxbudget import CtxBudgetMiddleware, budget_messages
from llama_index.ctxbudget import CtxBudgetMemory

EXPORTER = InMemorySpanExporter()
PROVIDER = TracerProvider()
PROVIDER.add_span_processor(SimpleSpanProcessor(EXPORTER))
TRACER = PROVIDER.get_tracer("tests")  # the application's or framework's own spans
ASSEMBLER = ContextAssembler(model="gpt-4o")
ENV = (
    "CTXBUDGET_OTEL",
    "CTXBUDGET_OTEL_HASH_IDS",
    "CTXBUDGET_OTEL_CAPTURE_CONTENT",
    "CTXBUDGET_OTEL_ID_SALT",
)
PROPERTY = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture(autouse=True)
def traced(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """ctxbudget's spans go to `EXPORTER`; the defaults again after the test."""
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    telemetry.configure(tracer_provider=PROVIDER)
    EXPORTER.clear()
    yield EXPORTER
    telemetry.configure()
    EXPORTER.clear()


@pytest.fixture
def memory(tmp_path: Path, embedder: OnnxEmbedder) -> Iterator[ContextMemory]:
    mem = ContextMemory(tmp_path / "chroma", embedder=embedder)
    yield mem
    mem.close()


def finished(name: str | None = None) -> list[ReadableSpan]:
    spans = list(EXPORTER.get_finished_spans())
    return [s for s in spans if name is None or s.name == name]


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def everything_recorded() -> str:
    """Every attribute, event and status of every span, as one text."""
    found = []
    for span in finished():
        found += [f"{key}={value!r}" for key, value in attributes(span).items()]
        found += [f"{e.name} {dict(e.attributes or {})!r}" for e in span.events]
        found.append(f"{span.status.status_code} {span.status.description}")
    return "\n".join(found)


def ancestors(span: ReadableSpan) -> list[int]:
    """The span ids above ``span``, nearest first."""
    by_id = {s.context.span_id: s for s in finished()}
    found: list[int] = []
    parent = span.parent
    while parent is not None:
        found.append(parent.span_id)
        above = by_id.get(parent.span_id)
        parent = above.parent if above is not None else None
    return found


# -- the core assembly -------------------------------------------------------------------------


@PROPERTY
@given(items=item_sets(), budget=st.integers(min_value=40, max_value=700))
def test_an_assembly_span_says_what_the_report_says(items: list[ContextItem], budget: int) -> None:
    EXPORTER.clear()
    try:
        ctx = ASSEMBLER.assemble(items, budget=budget)
    except BudgetExceededError:
        (span,) = finished("ctxbudget.assemble")
        assert span.status.status_code is StatusCode.ERROR
        assert attributes(span)["error.type"] == "BudgetExceededError"
        return
    (span,) = finished("ctxbudget.assemble")
    got = attributes(span)
    assert span.parent is None
    assert got["ctxbudget.tokens.used"] == ctx.tokens_used <= got["ctxbudget.budget.available"]
    assert got["ctxbudget.budget.available"] == ctx.tokens_available == budget
    assert got["ctxbudget.items.included"] == len(ctx.included)
    assert got["ctxbudget.items.pruned"] == len(ctx.pruned)
    assert got["ctxbudget.items.offered"] == len(ctx.included) + len(ctx.pruned)
    reasons = {p.reason.value for p in ctx.pruned}
    assert set(got["ctxbudget.prune.reasons"]) == reasons
    for reason in reasons:
        assert got[f"ctxbudget.prune.{reason}"] == sum(p.reason.value == reason for p in ctx.pruned)
    tiers = {key.split(".")[2] for key in got if key.startswith("ctxbudget.tier.")}
    assert tiers == {usage.name.lower().replace(" ", "_") for usage in ctx.tiers.values()}
    for usage in ctx.tiers.values():
        key = f"ctxbudget.tier.{usage.name.lower().replace(' ', '_')}"
        assert got[f"{key}.offered"] == usage.offered
        assert got[f"{key}.included"] == usage.kept
        assert got[f"{key}.pruned"] == usage.pruned
        assert got[f"{key}.tokens"] == usage.tokens
    assert sum(got[f"ctxbudget.tier.{t}.included"] for t in tiers) == len(ctx.included)
    assert "ctxbudget.prefix.tokens_shared" not in got  # no previous= given
    assert not any(key.startswith("gen_ai.") for key in got)  # not a model call


def test_the_prefix_shared_with_the_previous_call_is_recorded() -> None:
    items = [
        ContextItem("sys", "You are terse.", tier=Tier.SYSTEM),
        ContextItem("q", "Where is the station?", tier=Tier.QUERY),
    ]
    first = ASSEMBLER.assemble(items, budget=200)
    second = ASSEMBLER.assemble(items, budget=200, previous=first)
    assert second.prefix_tokens
    span = finished("ctxbudget.assemble")[-1]
    assert attributes(span)["ctxbudget.prefix.tokens_shared"] == second.prefix_tokens


secret_texts = st.lists(
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=12, max_size=40).map("Zq".__add__),
    min_size=3,
    max_size=12,
    unique=True,
)


@PROPERTY
@given(texts=secret_texts, budget=st.integers(min_value=60, max_value=400))
def test_no_text_or_id_is_recorded_unless_content_is_opted_in(
    texts: list[str], budget: int
) -> None:
    system, query, *others = texts
    items = [
        ContextItem(f"id-{system}", system, tier=Tier.SYSTEM),
        ContextItem(f"id-{query}", query, tier=Tier.QUERY),
        *(ContextItem(f"id-{t}", t, tier=Tier.RETRIEVED, score=1.0) for t in others),
    ]
    telemetry.configure(tracer_provider=PROVIDER)
    EXPORTER.clear()
    try:
        ASSEMBLER.assemble(items, budget=budget)
    except BudgetExceededError:
        assert not [t for t in texts if t in everything_recorded()]
        return  # the system prompt and the query alone do not fit (its span says so)
    recorded = everything_recorded()
    assert not [t for t in texts if t in recorded]

    telemetry.configure(tracer_provider=PROVIDER, capture_content=True)
    EXPORTER.clear()
    ctx = ASSEMBLER.assemble(items, budget=budget)
    (span,) = finished("ctxbudget.assemble")
    got = attributes(span)
    assert got["ctxbudget.content.context"] == ctx.render()
    assert list(got["ctxbudget.content.included_ids"]) == ctx.included_ids
    assert sorted(got["ctxbudget.content.pruned_ids"]) == sorted(p.item.id for p in ctx.pruned)
    assert system in got["ctxbudget.content.context"]


def test_an_error_is_its_class_and_its_message_only_with_content() -> None:
    items = [
        ContextItem("sys", "Follow the house rules. " * 40, tier=Tier.SYSTEM),
        ContextItem("q", "Hi?", tier=Tier.QUERY),
    ]
    with pytest.raises(BudgetExceededError):
        ASSEMBLER.assemble(items, budget=50)
    (span,) = finished("ctxbudget.assemble")
    assert (span.status.status_code, span.status.description) == (
        StatusCode.ERROR,
        "BudgetExceededError",
    )
    assert attributes(span)["error.type"] == "BudgetExceededError" and not span.events
    telemetry.configure(tracer_provider=PROVIDER, capture_content=True)
    EXPORTER.clear()
    with pytest.raises(BudgetExceededError):
        ASSEMBLER.assemble(items, budget=50)
    (event,) = finished("ctxbudget.assemble")[0].events
    assert event.name == "exception" and "never pruned" in str(event.attributes)


def test_settings_come_from_the_environment_and_bad_values_say_which(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CTXBUDGET_OTEL_CAPTURE_CONTENT", "yes")
    monkeypatch.setenv("CTXBUDGET_OTEL_HASH_IDS", "off")
    chosen = telemetry.configure(tracer_provider=PROVIDER)
    assert chosen.capture_content and not chosen.hash_ids
    assert not telemetry.configure(capture_content=False).capture_content  # an argument wins
    monkeypatch.setenv("CTXBUDGET_OTEL", "sometimes")
    with pytest.raises(ConfigurationError, match="CTXBUDGET_OTEL='sometimes'"):
        telemetry.configure()
    with pytest.raises(ConfigurationError, match="TracerProvider"):
        telemetry.configure(tracer_provider="console")
    monkeypatch.delenv("CTXBUDGET_OTEL")  # before the fixture configures again


def test_disabled_makes_no_span() -> None:
    telemetry.configure(tracer_provider=PROVIDER, enabled=False)
    ASSEMBLER.assemble([ContextItem("q", "Hi", tier=Tier.QUERY)], budget=50)
    assert finished() == []


def test_without_opentelemetry_everything_works_and_nothing_is_traced(
    monkeypatch: pytest.MonkeyPatch, memory: ContextMemory
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # `import opentelemetry` fails
    telemetry.configure(tracer_provider=PROVIDER)  # looked for again on the next call
    assert active() is None
    memory.add_message("s1", "user", "I moved to Lisbon in May.", user_id="u1")
    ctx = memory.assemble("s1", "Where do I live?", budget=300)
    assert "Lisbon" in ctx.render()
    assert memory.search("Lisbon", kinds=None, session_id="s1")
    ASSEMBLER.assemble([ContextItem("q", "Hi", tier=Tier.QUERY)], budget=50)
    assert finished() == []


# -- the memory: one assembly span, candidates within it, searches, writes ---------------------


def test_a_memory_assembly_is_one_span_with_its_candidates_inside(memory: ContextMemory) -> None:
    memory.add_message("s1", "user", "I moved to Lisbon in May.", user_id="ana")
    memory.add_message("s1", "assistant", "Lisbon is lovely in spring.")
    memory.pin("s1", "Ana is vegetarian.")
    EXPORTER.clear()
    ctx = memory.assemble("s1", "Where do I live now?", budget=300, system="Be brief.")

    (span,) = finished("ctxbudget.assemble")  # the core assembly records its report here
    (gathering,) = finished("ctxbudget.candidates")
    assert gathering.parent is not None and gathering.parent.span_id == span.context.span_id
    got = attributes(span)
    assert got["ctxbudget.session.id"] == hashed_id("s1") != "s1"
    assert got["ctxbudget.user.id"] == hashed_id("ana")  # the user stored with the session
    assert got["ctxbudget.namespace"] == "default"
    assert got["ctxbudget.items.included"] == len(ctx.included)
    assert got["ctxbudget.tokens.used"] == ctx.tokens_used <= 300
    assert "gen_ai.conversation.id" not in got  # only as given, when ids are not hashed
    counts = attributes(gathering)
    assert counts["ctxbudget.candidates.pinned"] == 1
    assert counts["ctxbudget.candidates.history"] == 2

    EXPORTER.clear()
    again = memory.assemble("s1", "Where do I live now?", budget=300, system="Be brief.")
    (span,) = finished("ctxbudget.assemble")
    assert again.prefix_tokens and attributes(span)["ctxbudget.prefix.tokens_shared"] == (
        again.prefix_tokens
    )


def test_ids_are_recorded_as_given_when_configured(memory: ContextMemory) -> None:
    telemetry.configure(tracer_provider=PROVIDER, hash_ids=False)
    memory.add_message("s-raw", "user", "Hello there.", user_id="u-raw")
    memory.assemble("s-raw", "Hi?", budget=200, user_id="u-raw")
    (span,) = finished("ctxbudget.assemble")
    got = attributes(span)
    assert got["ctxbudget.session.id"] == got["gen_ai.conversation.id"] == "s-raw"
    assert got["ctxbudget.user.id"] == "u-raw"
    telemetry.configure(tracer_provider=PROVIDER, id_salt="pepper")
    EXPORTER.clear()
    memory.assemble("s-raw", "Hi?", budget=200, user_id="u-raw")
    (span,) = finished("ctxbudget.assemble")
    assert attributes(span)["ctxbudget.session.id"] == hashed_id("s-raw", "pepper")
    assert hashed_id("s-raw", "pepper") != hashed_id("s-raw")


def test_a_search_is_a_genai_retrieval_span(memory: ContextMemory) -> None:
    memory.add_documents([("guide", "Trains to Porto leave every hour from Santa Apolonia.")])
    EXPORTER.clear()
    hits = memory.search("train to Porto", k=3)
    (span,) = finished("retrieval")
    got = attributes(span)
    assert got["gen_ai.operation.name"] == "retrieval"
    assert got["gen_ai.data_source.id"] == "default"
    assert got["ctxbudget.search.k"] == 3
    assert got["ctxbudget.search.hits"] == len(hits) == 1
    assert got["ctxbudget.search.top_score"] == pytest.approx(hits[0].score)
    assert list(got["ctxbudget.search.kinds"]) == ["document"]
    assert "gen_ai.retrieval.query.text" not in got and "gen_ai.retrieval.documents" not in got
    assert "ctxbudget.user.id" not in got

    EXPORTER.clear()
    memory.search("train to Porto", kinds=None, user_id="ana")
    got = attributes(finished("retrieval")[0])
    assert got["ctxbudget.user.id"] == hashed_id("ana") and "ctxbudget.search.kinds" not in got

    telemetry.configure(tracer_provider=PROVIDER, capture_content=True)
    EXPORTER.clear()
    memory.search("train to Porto", k=3)
    got = attributes(finished("retrieval")[0])
    assert got["gen_ai.retrieval.query.text"] == "train to Porto"
    (document,) = json.loads(got["gen_ai.retrieval.documents"])
    assert document["id"] == "guide#0" and "Santa Apolonia" in document["content"]


def test_every_store_write_is_one_span(memory: ContextMemory) -> None:
    memory.add_messages(
        "s1", [("user", "Book a table for two."), ("assistant", "Done.")], user_id="ana"
    )
    memory.pin(user_id="ana", text="Ana is vegetarian.")
    memory.add_documents(["Opening hours: 9 to 17.", "Closed on Mondays."], collection="kb")
    writes = finished("ctxbudget.write")
    assert [list(attributes(s)["ctxbudget.write.kinds"]) for s in writes] == [
        ["message"],
        ["pinned"],
        ["document"],
    ]
    assert [attributes(s)["ctxbudget.write.records"] for s in writes] == [2, 1, 2]
    messages = attributes(writes[0])
    assert messages["ctxbudget.session.id"] == hashed_id("s1")
    assert messages["ctxbudget.user.id"] == hashed_id("ana")
    assert messages["ctxbudget.write.behind"] is True  # acknowledged, stored in the background
    assert "ctxbudget.session.id" not in attributes(writes[2])  # documents have none
    assert all(s.parent is None for s in writes)  # one level: no store span below


def test_no_text_or_id_from_the_memory_is_recorded(memory: ContextMemory) -> None:
    secret = {
        "session": f"session-{uuid.uuid4().hex}",
        "user": f"user-{uuid.uuid4().hex}",
        "message": f"my passport number is {uuid.uuid4().hex}",
        "pin": f"door code {uuid.uuid4().hex}",
        "document": f"internal memo {uuid.uuid4().hex}",
        "query": f"what is {uuid.uuid4().hex}",
        "pin id": f"pin-{uuid.uuid4().hex}",
    }
    memory.add_message(secret["session"], "user", secret["message"], user_id=secret["user"])
    memory.pin(secret["session"], secret["pin"], id=secret["pin id"])
    with pytest.raises(StoreInputError, match=secret["pin id"]):  # its message names the id
        memory.pin(secret["session"], secret["pin"] + " (changed)", id=secret["pin id"])
    failed = finished("ctxbudget.write")[-1]
    assert failed.status.status_code is StatusCode.ERROR
    assert attributes(failed)["error.type"] == "StoreInputError"
    memory.add_documents([(f"doc-{uuid.uuid4().hex}", secret["document"])])
    memory.assemble(secret["session"], secret["query"], budget=400)
    memory.search(secret["query"], kinds=None, session_id=secret["session"])
    assert {s.name for s in finished()} == {
        "ctxbudget.write",
        "ctxbudget.candidates",
        "ctxbudget.assemble",
        "retrieval",
    }
    recorded = everything_recorded()
    assert [name for name, text in secret.items() if text in recorded] == []
    assert secret["message"].split()[-1] not in recorded  # nor its generated message id


# -- the adapters: their spans nest under the framework's (here, the caller's open span) ----------


def test_langchain_budget_messages_nests_under_the_open_span() -> None:
    messages = [
        SystemMessage("Be brief."),
        HumanMessage("Plan a trip to Porto."),
        AIMessage("Sure: when?"),
        HumanMessage("Next weekend."),
    ]
    with TRACER.start_as_current_span("chain run") as parent:
        kept = budget_messages(messages, max_tokens=200)
    assert kept[-1].content == "Next weekend."
    (span,) = finished("ctxbudget.assemble")
    assert span.parent is not None and span.parent.span_id == parent.get_span_context().span_id
    assert span.context.trace_id == parent.get_span_context().trace_id


def test_langchain_agent_with_memory_nests_every_span_under_the_run(memory: ContextMemory) -> None:
    model = RecordingChatModel(messages=iter([AIMessage("Noted."), AIMessage("In Lisbon.")]))
    middleware = CtxBudgetMiddleware(model="gpt-4o", budget=400, memory=memory)
    agent = create_agent(model, system_prompt="Be brief.", middleware=[middleware])
    context = {"session_id": "lc-1", "user_id": "ana"}
    with TRACER.start_as_current_span("agent run") as parent:
        state = agent.invoke({"messages": [HumanMessage("I live in Lisbon.")]}, context=context)
        agent.invoke(
            {"messages": [*state["messages"], HumanMessage("Where do I live?")]}, context=context
        )
    root = parent.get_span_context().span_id
    ours = [s for s in finished() if s.name != "agent run"]
    assert {"ctxbudget.assemble", "ctxbudget.candidates", "ctxbudget.write"} <= {
        s.name for s in ours
    }
    assert all(root in ancestors(s) for s in ours), [(s.name, s.parent) for s in ours]
    gathering = finished("ctxbudget.candidates")[-1]
    assert attributes(gathering)["ctxbudget.session.id"] == hashed_id("lc-1")


def test_llamaindex_memory_nests_every_span_under_the_open_span(memory: ContextMemory) -> None:
    chat = CtxBudgetMemory.from_defaults(memory=memory, session_id="li-1", user_id="ana")
    with TRACER.start_as_current_span("chat engine") as parent:
        chat.put(ChatMessage(role=MessageRole.USER, content="I moved to Lisbon."))
        chat.put(ChatMessage(role=MessageRole.ASSISTANT, content="Welcome to Lisbon!"))
        got = chat.get(input="Where do I live?")
    assert any("Lisbon" in (m.content or "") for m in got)
    root = parent.get_span_context().span_id
    ours = [s for s in finished() if s.name != "chat engine"]
    assert {"ctxbudget.assemble", "ctxbudget.candidates", "ctxbudget.write"} <= {
        s.name for s in ours
    }
    assert all(root in ancestors(s) for s in ours), [(s.name, s.parent) for s in ours]
    (assembly,) = finished("ctxbudget.assemble")
    assert attributes(assembly)["ctxbudget.items.included"] >= 2


def test_the_telemetry_package_imports_no_other_layer() -> None:
    # Every layer imports it (core, memory): at run time it needs only the error tree.
    root = Path(telemetry.__file__).parent
    found = []
    for path in sorted(root.glob("*.py")):
        tree = ast.parse(path.read_text("utf-8"))
        guarded = {
            id(node)
            for block in ast.walk(tree)
            if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
            for node in ast.walk(block)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and id(node) not in guarded:
                module = node.module
                allowed = ("ctxbudget.telemetry", "ctxbudget.errors")
                if module.startswith("ctxbudget") and not module.startswith(allowed):
                    if module != "ctxbudget" or [a.name for a in node.names] != ["__version__"]:
                        found.append(f"{path.name}:{node.lineno} {module}")
    assert found == []


GLOBAL_PROVIDER = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ctxbudget import ContextAssembler, ContextItem, Tier
from ctxbudget.telemetry.spans import active

items = [ContextItem("q", "Hi?", tier=Tier.QUERY)]
ContextAssembler().assemble(items, budget=50)  # before any provider: nothing to record
assert active() is not None and not active().live()
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)  # set later, once, as applications do at start-up
ContextAssembler().assemble(items, budget=50)
print([span.name for span in exporter.get_finished_spans()])
"""


def test_the_global_provider_is_used_even_when_set_after_the_first_call() -> None:
    # In a process of its own: the global provider can be set once per process.
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXBUDGET_OTEL")}
    done = subprocess.run(
        [sys.executable, "-c", GLOBAL_PROVIDER],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['ctxbudget.assemble']"
