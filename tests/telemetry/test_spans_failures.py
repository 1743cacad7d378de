"""Spans of calls that fail: ended as errors, and tracing never changes how a call fails.

A call with arguments its method does not take fails with Python's own `TypeError`, traced or
not, and its span says so; an interrupted call (``KeyboardInterrupt`` from inside) ends its
spans as errors, not as successes; a search refused for its ``kinds`` records no made-up
kinds. Real parts: tiktoken, an embedded Chroma in ``tmp_path``, the default embedder, the
SDK's in-memory exporter.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from ctxbudget import telemetry
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.errors import MemoryClosedError
from ctxbudget.memory.context import ContextMemory

EXPORTER = InMemorySpanExporter()
PROVIDER = TracerProvider()
PROVIDER.add_span_processor(SimpleSpanProcessor(EXPORTER))


class Interrupted:
    """The real default embedder, interrupted (Ctrl+C) once ``stop`` is set."""

    def __init__(self, model: OnnxEmbedder) -> None:
        self.model = model
        self.name = model.name
        self.stop = False

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if self.stop:
            raise KeyboardInterrupt
        return self.model.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        if self.stop:
            raise KeyboardInterrupt
        return self.model.embed_query(text)


@pytest.fixture(autouse=True)
def traced() -> Iterator[None]:
    telemetry.configure(tracer_provider=PROVIDER, enabled=True, capture_content=False)
    yield
    telemetry.configure()  # the defaults again
    EXPORTER.clear()


@pytest.fixture
def embedder_stop(embedder: OnnxEmbedder) -> Interrupted:
    return Interrupted(embedder)


@pytest.fixture
def memory(tmp_path: Path, embedder_stop: Interrupted) -> Iterator[ContextMemory]:
    mem = ContextMemory(tmp_path / "chroma", embedder=embedder_stop, write_behind=False)
    mem.add_messages("s1", [("user", f"turn {n} about trains") for n in range(6)], user_id="u1")
    EXPORTER.clear()
    yield mem
    mem.close()


def spans(name: str) -> list[ReadableSpan]:
    return [s for s in EXPORTER.get_finished_spans() if s.name == name]


def said(error: BaseException) -> tuple[type[BaseException], str]:
    return type(error), re.sub(r" at 0x[0-9a-f]+", "", str(error))  # a generator's address


def failure(call: Callable[[], Any]) -> BaseException:
    try:
        call()
    except BaseException as exc:  # noqa: BLE001 - the test compares what each call raised
        return exc
    pytest.fail("the call did not fail")


BAD_CALLS: dict[str, Callable[[ContextMemory], Any]] = {
    "assemble without a query": lambda m: m.assemble("s1"),  # type: ignore[call-arg]
    "assemble with an unknown option": lambda m: m.assemble("s1", "q", budget=200, reserve=9),  # type: ignore[call-arg]
    "search of kinds as one string": lambda m: m.search("trains", k=3, kinds="message"),  # type: ignore[arg-type]
    "search of kinds as a number": lambda m: m.search("trains", k=3, kinds=5),  # type: ignore[arg-type]
    "search of kinds as a generator": lambda m: m.search(
        "trains",
        k=3,
        kinds=(k for k in ["message"]),  # type: ignore[arg-type]
    ),
}


@pytest.mark.parametrize("case", list(BAD_CALLS))
def test_a_bad_call_fails_the_same_traced_or_not_and_its_span_says_so(
    memory: ContextMemory, case: str
) -> None:
    traced_error = failure(lambda: BAD_CALLS[case](memory))
    ended = [s for s in EXPORTER.get_finished_spans() if s.name != "ctxbudget.candidates"]
    telemetry.configure(enabled=False)
    plain_error = failure(lambda: BAD_CALLS[case](memory))
    assert said(traced_error) == said(plain_error)
    assert len(ended) == 1
    assert ended[0].status.status_code is StatusCode.ERROR
    assert (ended[0].attributes or {})["error.type"] == type(plain_error).__qualname__
    assert "ctxbudget.search.kinds" not in (ended[0].attributes or {})  # none made up


def test_an_interrupted_call_ends_its_spans_as_errors(
    memory: ContextMemory, embedder_stop: Interrupted
) -> None:
    embedder_stop.stop = True
    with pytest.raises(KeyboardInterrupt):
        memory.assemble("s1", "trains?", budget=200)
    embedder_stop.stop = False
    (assembly,) = spans("ctxbudget.assemble")
    assert assembly.status.status_code is StatusCode.ERROR
    assert (assembly.attributes or {})["error.type"] == "KeyboardInterrupt"
    EXPORTER.clear()
    memory.assemble("s1", "trains?", budget=200)  # the next call is traced as usual
    (assembly,) = spans("ctxbudget.assemble")
    assert assembly.status.status_code is StatusCode.UNSET
    assert (assembly.attributes or {})["ctxbudget.items.included"] > 0


# -- a closed memory ----------------------------------------------------------------------------
# Before 2026-12-01 a closed memory refused each call before its span began: no trace at all.
CLOSED_CALLS: list[tuple[str, str, Callable[[ContextMemory], Any]]] = [
    ("assemble", "ctxbudget.assemble", lambda m: m.assemble("s1", "trains?", budget=200)),
    ("search", "retrieval", lambda m: m.search("trains", session_id="s1")),
    ("add_message", "ctxbudget.write", lambda m: m.add_message("s1", "user", "hello")),
    ("add_messages", "ctxbudget.write", lambda m: m.add_messages("s1", [("user", "hi")])),
    ("pin", "ctxbudget.write", lambda m: m.pin("s1", "a fact")),
]


@pytest.mark.parametrize(("call", "span", "run"), CLOSED_CALLS, ids=[c[0] for c in CLOSED_CALLS])
def test_a_call_on_a_closed_memory_ends_its_span_as_an_error(
    memory: ContextMemory, call: str, span: str, run: Callable[[ContextMemory], Any]
) -> None:
    memory.close()
    EXPORTER.clear()
    with pytest.raises(MemoryClosedError):
        run(memory)
    ended = spans(span)
    assert len(ended) == 1, [s.name for s in EXPORTER.get_finished_spans()]
    assert ended[0].status.status_code is StatusCode.ERROR
    assert (ended[0].attributes or {})["error.type"] == "MemoryClosedError"


async def test_an_async_call_on_a_closed_memory_ends_its_span_as_an_error(
    memory: ContextMemory,
) -> None:
    await memory.aclose()
    EXPORTER.clear()
    with pytest.raises(MemoryClosedError):
        await memory.aassemble("s1", "trains?", budget=200)
    with pytest.raises(MemoryClosedError):
        await memory.aadd_messages("s1", [("user", "hi")])
    names = [(s.name, s.status.status_code) for s in EXPORTER.get_finished_spans()]
    assert names == [
        ("ctxbudget.assemble", StatusCode.ERROR),
        ("ctxbudget.write", StatusCode.ERROR),
    ]
