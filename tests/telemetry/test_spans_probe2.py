"""Spans probed again: an error that cannot say itself, cancelled calls, a reranker's own spans.

* With content captured, a call failing with an error whose ``__str__`` itself fails (a
  client library's exception holding a broken response) failed the caller with that
  ``__str__``'s error instead of its own: the span recorded ``str(error)`` (and the SDK's
  ``record_exception`` calls it again). The call's own error now reaches the caller, as
  without tracing, and the span says the message cannot be shown.
* Calls cancelled while queued or running, and late rerankers, leave no span open.
* An async reranker's own spans nest under the ``ctxbudget.candidates`` span of the call that
  awaited it, for concurrent calls under different parents (``contextvars``).

Real parts: an embedded Chroma in ``tmp_path``, the default embedder, the SDK's in-memory
exporter and the OTLP protobuf encoder.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from ctxbudget import telemetry
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.policy.config import MemoryConfig


class OpenSpans(SpanProcessor):
    """The spans started and not yet ended, by id."""

    def __init__(self) -> None:
        self.open: dict[int, str] = {}
        self._lock = threading.Lock()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        with self._lock:
            self.open[span.context.span_id] = span.name

    def on_end(self, span: ReadableSpan) -> None:
        with self._lock:
            self.open.pop(span.context.span_id, None)  # type: ignore[union-attr]


EXPORTER = InMemorySpanExporter()
OPEN = OpenSpans()
PROVIDER = TracerProvider()
PROVIDER.add_span_processor(SimpleSpanProcessor(EXPORTER))
PROVIDER.add_span_processor(OPEN)
APP = PROVIDER.get_tracer("app")


class Unsayable(RuntimeError):
    """An error whose message cannot be made (its ``__str__`` fails)."""

    def __str__(self) -> str:
        raise ValueError("the response body was already consumed")


class Failing:
    """The real default embedder; once ``fail`` is set, its queries raise `Unsayable`."""

    def __init__(self, model: OnnxEmbedder) -> None:
        self.model = model
        self.name = model.name
        self.fail = False

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return self.model.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        if self.fail:
            raise Unsayable
        return self.model.embed_query(text)


@pytest.fixture(autouse=True)
def traced() -> Iterator[None]:
    telemetry.configure(tracer_provider=PROVIDER, capture_content=True)
    EXPORTER.clear()
    yield
    telemetry.configure()
    EXPORTER.clear()


@pytest.mark.parametrize("content", [True, False], ids=["content", "no-content"])
def test_an_error_that_cannot_say_itself_is_the_calls_error_traced(
    tmp_path: Path, embedder: OnnxEmbedder, content: bool
) -> None:
    telemetry.configure(tracer_provider=PROVIDER, capture_content=content)
    failing = Failing(embedder)
    mem = ContextMemory(tmp_path / "chroma", embedder=failing, write_behind=False)
    try:
        mem.add_messages("s1", [("user", "trains at dawn")])
        failing.fail = True
        EXPORTER.clear()
        with pytest.raises(Unsayable):
            mem.search("trains", k=2)
    finally:
        mem.close()
    spans = EXPORTER.get_finished_spans()
    failed = [s for s in spans if s.status.status_code is StatusCode.ERROR]
    assert [s.name for s in failed] == ["retrieval"]
    for span in failed:
        assert (span.attributes or {})["error.type"] == "Unsayable"
        events = [dict(e.attributes or {}) for e in span.events if e.name == "exception"]
        if not content:
            assert not events
            continue
        (event,) = events
        assert "cannot be shown" in str(event["exception.message"])
        assert "Unsayable" in str(event["exception.type"])
        assert "Unsayable" in str(event["exception.stacktrace"])
    encode_spans(spans).SerializeToString()  # an exporter sends them


async def test_cancelled_calls_and_late_rerankers_leave_no_span_open(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    release = asyncio.Event()

    async def waits(query: str, texts: Sequence[str]) -> list[float]:
        with APP.start_as_current_span("my-rerank"):
            await release.wait()
            return [float(len(t)) for t in texts]

    config = MemoryConfig(reranker=waits, reranker_timeout=0.2)
    mem = ContextMemory(tmp_path / "chroma", embedder=embedder, config=config, write_behind=False)
    mem.add_messages("s1", [("user", f"turn {n} about trains {n}") for n in range(12)])
    calls = [asyncio.create_task(mem.aassemble("s1", "trains", budget=200)) for _ in range(5)]
    await asyncio.sleep(0)
    for call in calls:
        call.cancel()  # some queued (never run), some running (they end first)
    done = await asyncio.gather(*calls, return_exceptions=True)
    assert all(isinstance(d, asyncio.CancelledError) for d in done)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0):
            await mem.aadd_messages("s1", [("user", "one more")])
    release.set()
    await mem.aclose()
    assert not OPEN.open, OPEN.open
    assert not [s for s in EXPORTER.get_finished_spans() if s.end_time is None]


async def test_an_async_rerankers_spans_nest_under_the_call_that_awaited_it(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    async def rerank(query: str, texts: Sequence[str]) -> list[float]:
        with APP.start_as_current_span("my-rerank"):
            await asyncio.sleep(0.01)  # the other calls' rerankers run meanwhile
            return [float(len(t)) for t in texts]

    config = MemoryConfig(reranker=rerank)
    mem = ContextMemory(tmp_path / "chroma", embedder=embedder, config=config, write_behind=False)
    try:
        mem.add_messages("s1", [("user", f"turn {n} about trains {n}") for n in range(12)])
        EXPORTER.clear()

        async def request(n: int) -> None:
            with APP.start_as_current_span(f"request-{n}"):
                await mem.aassemble("s1", "trains", budget=200)

        await asyncio.gather(*(request(n) for n in range(4)))
    finally:
        await mem.aclose()
    spans = EXPORTER.get_finished_spans()
    by_id = {s.context.span_id: s for s in spans if s.context is not None}

    def path(span: ReadableSpan) -> list[str]:
        names = []
        parent = span.parent
        while parent is not None:
            above = by_id[parent.span_id]
            names.append(above.name)
            parent = above.parent
        return names

    paths = sorted(path(s) for s in spans if s.name == "my-rerank")
    assert paths == [
        ["ctxbudget.candidates", "ctxbudget.assemble", f"request-{n}"] for n in range(4)
    ]
    statuses = [(s.attributes or {}).get("ctxbudget.rerank.status") for s in spans]
    assert statuses.count("ok") == 4
