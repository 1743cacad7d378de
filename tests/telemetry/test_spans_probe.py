"""Spans an OTLP exporter can send: text with lone surrogates, and async calls' spans.

A call refused for a lone surrogate in its session id, user id or query (ids recorded as given,
content captured) still ends a span marked as its error, and every text on it is valid UTF-8,
so the OTLP encoder sends every attribute (it dropped the invalid one, logging a
``UnicodeEncodeError`` traceback); an error message holding one is recorded repaired too.
Async calls with numpy numbers nest under the caller's span with OTel-valid attributes. Real
parts: an embedded Chroma in ``tmp_path``, the default embedder, the SDK's in-memory exporter
and the OTLP protobuf encoder.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from ctxbudget import telemetry
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.errors import CtxBudgetError
from ctxbudget.memory.context import ContextMemory

EXPORTER = InMemorySpanExporter()
PROVIDER = TracerProvider()
PROVIDER.add_span_processor(SimpleSpanProcessor(EXPORTER))
BAD = "caf\udce9 trains"  # bytes decoded with surrogateescape: not valid Unicode


class Failing:
    """The real default embedder; once ``fail`` is set, it fails quoting a server's reply."""

    def __init__(self, model: OnnxEmbedder) -> None:
        self.model = model
        self.name = model.name
        self.fail = False

    def _check(self) -> None:
        if self.fail:
            reply = b"bad input caf\xe9".decode("utf-8", "surrogateescape")
            raise ValueError(f"embedding server said: {reply}")

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self._check()
        return self.model.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        self._check()
        return self.model.embed_query(text)


@pytest.fixture(autouse=True)
def traced() -> Iterator[None]:
    telemetry.configure(tracer_provider=PROVIDER, hash_ids=False, capture_content=True)
    EXPORTER.clear()
    yield
    telemetry.configure()
    EXPORTER.clear()


@pytest.fixture
def failing(embedder: OnnxEmbedder) -> Failing:
    return Failing(embedder)


@pytest.fixture
def memory(tmp_path: Path, failing: Failing) -> Iterator[ContextMemory]:
    mem = ContextMemory(tmp_path / "chroma", embedder=failing, write_behind=False)
    mem.add_messages("s1", [("user", f"turn {n} about trains") for n in range(4)], user_id="u1")
    EXPORTER.clear()
    yield mem
    mem.close()


def texts(span: ReadableSpan) -> list[str]:
    found: list[str] = []
    for attributes in [span.attributes or {}, *(event.attributes or {} for event in span.events)]:
        for value in attributes.values():
            values = value if isinstance(value, tuple) else (value,)
            found.extend(v for v in values if isinstance(v, str))
    return found


def sent_whole(spans: Sequence[ReadableSpan], caplog: pytest.LogCaptureFixture) -> None:
    """Every text is valid UTF-8, and OTLP encodes every attribute of every span."""
    for span in spans:
        for text in texts(span):
            text.encode("utf-8")  # raises on a lone surrogate
    with caplog.at_level(logging.ERROR):
        encoded = encode_spans(spans)
    assert not [r for r in caplog.records if "encode" in r.getMessage()], caplog.text
    sent = [s for rs in encoded.resource_spans for ss in rs.scope_spans for s in ss.spans]
    assert [len(s.attributes) for s in sent] == [len(s.attributes or {}) for s in spans]
    encoded.SerializeToString()


REFUSED: dict[str, Callable[[ContextMemory], Any]] = {
    "assemble, session id": lambda m: m.assemble(f"s-{BAD}", "trains", budget=200),
    "assemble, user id": lambda m: m.assemble("s1", "trains", budget=200, user_id=BAD),
    "assemble, query": lambda m: m.assemble("s1", BAD, budget=200),
    "search, query": lambda m: m.search(BAD, k=3),
    "search, session id": lambda m: m.search("trains", k=3, session_id=BAD),
    "candidates, query": lambda m: m.candidates("s1", BAD),
    "add, user id": lambda m: m.add_message("s1", "user", "hello", user_id=BAD),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_a_call_refused_for_a_lone_surrogate_ends_a_span_otlp_sends_whole(
    memory: ContextMemory, case: str, caplog: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(CtxBudgetError, match="lone surrogate"):
        REFUSED[case](memory)
    spans = EXPORTER.get_finished_spans()
    assert spans
    assert all(s.status.status_code is StatusCode.ERROR for s in spans if s.parent is None)
    sent_whole(spans, caplog)
    recorded = "\n".join(t for s in spans for t in texts(s))
    assert "caf\ufffd trains" in recorded  # repaired, not dropped


def test_an_error_message_with_a_lone_surrogate_is_recorded_repaired(
    memory: ContextMemory, failing: Failing, caplog: pytest.LogCaptureFixture
) -> None:
    failing.fail = True
    with pytest.raises(ValueError, match="embedding server said"):
        memory.search("trains", k=3)
    spans = EXPORTER.get_finished_spans()
    (search,) = [s for s in spans if s.name == "retrieval"]
    assert search.status.status_code is StatusCode.ERROR
    (event,) = search.events
    assert (event.attributes or {})[
        "exception.message"
    ] == "embedding server said: bad input caf\ufffd"
    sent_whole(spans, caplog)


async def test_async_calls_with_numpy_numbers_nest_under_the_callers_span(
    memory: ContextMemory,
) -> None:
    tracer = PROVIDER.get_tracer("app")
    with tracer.start_as_current_span("request") as request:
        await memory.aassemble("s1", "trains", budget=np.int64(300))  # type: ignore[arg-type]
        await memory.asearch("trains", k=np.int64(2))  # type: ignore[arg-type]
        await memory.aadd_message("s1", "user", "more trains")
    mine = request.get_span_context().span_id
    spans = {s.name: s for s in EXPORTER.get_finished_spans()}
    for name in ("ctxbudget.assemble", "retrieval", "ctxbudget.write"):
        parent = spans[name].parent
        assert parent is not None and parent.span_id == mine, name
    inner, outer = spans["ctxbudget.candidates"].parent, spans["ctxbudget.assemble"].context
    assert inner is not None and outer is not None and inner.span_id == outer.span_id
    for span in spans.values():
        for key, value in (span.attributes or {}).items():
            items = value if isinstance(value, tuple) else (value,)
            assert all(type(v) in (str, bool, int, float) for v in items), (span.name, key)
    assert (spans["ctxbudget.assemble"].attributes or {})["ctxbudget.budget.window"] == 300


REFUSED_WRITES: dict[str, Callable[[ContextMemory], Any]] = {
    "empty text": lambda m: m.add_messages("s1", [{"role": "user", "content": ""}]),
    "unknown role": lambda m: m.add_messages("s1", [{"role": "robot", "content": "hi"}]),
    "non-ISO timestamp": lambda m: m.add_message("s1", "user", "hi", timestamp="yesterday"),
    "tool calls on a user turn": lambda m: m.add_messages(
        "s1", [{"role": "user", "content": "hi", "tool_calls": [{"id": "c", "name": "f"}]}]
    ),
    "not a list": lambda m: m.add_messages("s1", "hello"),
    "NaN timestamp": lambda m: m.add_message("s1", "user", "hi", timestamp=float("nan")),
    "pin, empty text": lambda m: m.pin("s1", ""),
    "pin, no scope": lambda m: m.pin(None, "a fact"),
    "pin, lone surrogate": lambda m: m.pin("s1", BAD),
    "document, not text": lambda m: m.add_documents([{"text": 5}]),
    "the middleware's check": lambda m: m.writes.check_messages(
        "s1", [{"role": "user", "text": BAD}], user_id=None
    ),
}


@pytest.mark.parametrize("case", list(REFUSED_WRITES))
def test_every_refused_write_ends_one_write_span_as_its_error(
    memory: ContextMemory, case: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Until 2026-12-01 only a refusal of the store's checks had a span: one made while the
    # records were made (a role, an empty text, a pin's scope) had none.
    with pytest.raises(CtxBudgetError) as raised:
        REFUSED_WRITES[case](memory)
    spans = [s for s in EXPORTER.get_finished_spans() if s.name == "ctxbudget.write"]
    assert len(spans) == 1
    (span,) = spans
    assert span.status.status_code is StatusCode.ERROR
    assert (span.attributes or {})["error.type"] == type(raised.value).__name__
    assert (span.attributes or {})["ctxbudget.operation"] == "write"
    sent_whole(spans, caplog)
    assert len(memory.history("s1")) == 4  # nothing written
