"""A custom extractor is asked about messages as they are stored, off the caller's thread.

Real parts: embedded Chroma and the local embedder; the extractor is a stand-in for a model (the
only fake). The promises: each message is asked about once, whether the background thread or an
assembly gets to it first; an assembly's entities are those it would find asking itself; a
failure in the background is logged and asked again by the assembly, which raises as before;
closing never hangs on queued work; with entity memory off, or the built-in rules, nothing runs
in the background.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.errors import ConfigurationError
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.entities import Mention
from ctxbudget.memory.entities.answers import BATCH, Answers, message_key
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.store.chroma_store import ChromaStore
from ctxbudget.store.records import Record

ON = MemoryConfig(entities=True, recent_messages=6)
NAMES = ["Zelda", "Quito", "Marta", "Oslo", "Ines"]


class Model:
    """Names the capitalized words it knows; counts what it is asked, by thread; can be slow."""

    def __init__(self, delay: float = 0.0, fail: int = 0) -> None:
        self.asked: Counter[tuple[str, str | None]] = Counter()
        self.threads: set[str] = set()
        self.delay = delay
        self.fail = fail  # calls that raise, first
        self.lock = threading.Lock()

    def extract(self, texts: Sequence[str], *, speakers: Sequence[str | None]) -> object:
        with self.lock:
            self.threads.add(threading.current_thread().name)
            if self.fail:
                self.fail -= 1
                msg = "the model is down"
                raise RuntimeError(msg)
            self.asked.update(zip(texts, speakers, strict=True))
        time.sleep(self.delay)
        return [[Mention(n, "person") for n in NAMES if n in t] for t in texts]


def memory_at(
    folder: Path, embedder: OnnxEmbedder, model: Model, **options: object
) -> ContextMemory:
    config = options.pop("config", ON)
    return ContextMemory(
        store=ChromaStore(folder / "db", embedder=embedder),
        config=config,  # type: ignore[arg-type]
        entity_extractor=model,
        **options,  # type: ignore[arg-type]
    )


def turns(n: int) -> list[tuple[str, str]]:
    return [
        ("user" if i % 2 == 0 else "assistant", f"Turn {i}: {NAMES[i % len(NAMES)]} said hi.")
        for i in range(n)
    ]


def wait_for(condition: object, seconds: float = 20.0) -> None:
    end = time.monotonic() + seconds
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < end, "the background thread did not answer in time"
        time.sleep(0.02)


def test_stored_messages_are_asked_about_in_the_background_once(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    model = Model()
    memory = memory_at(tmp_path, embedder, model)
    try:
        memory.add_messages("s1", turns(10), progress=False)
        wait_for(lambda: sum(model.asked.values()) == 10)
        assert model.threads == {next(iter(model.threads))}
        assert next(iter(model.threads)).startswith("ctxbudget-entities")
        found = {e.name for e in memory.entities("s1")}
        assert set(NAMES) <= found
        assert sum(model.asked.values()) == 10 and max(model.asked.values()) == 1
    finally:
        memory.close()


def test_an_assembly_right_after_a_write_asks_nothing_twice(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    slow = Model(delay=0.2)
    memory = memory_at(tmp_path, embedder, slow)
    plain = Model()
    reference = memory_at(tmp_path / "ref", embedder, plain)
    try:
        messages = turns(3 * BATCH + 5)
        for start in range(0, len(messages), BATCH):  # four writes: one asked, three queued
            memory.add_messages("s1", messages[start : start + BATCH], progress=False)
        reference.add_messages("s1", messages, progress=False)
        got = [(e.name, e.mentions, e.type) for e in memory.entities("s1")]
        assert got == [(e.name, e.mentions, e.type) for e in reference.entities("s1")]
        assert max(slow.asked.values()) == 1 and sum(slow.asked.values()) == len(messages)
    finally:
        memory.close()
        reference.close()


class Held(Model):
    """The background thread's first request waits until the assembly has asked itself."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.by: Counter[str] = Counter()

    def extract(self, texts: Sequence[str], *, speakers: Sequence[str | None]) -> object:
        name = threading.current_thread().name
        self.by[name] += len(texts)
        if name.startswith("ctxbudget-entities"):
            assert self.release.wait(30), "the assembly never asked"
        found = super().extract(texts, speakers=speakers)
        if not name.startswith("ctxbudget-entities"):
            self.release.set()
        return found


def test_an_assembly_takes_queued_batches_and_awaits_the_running_one(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    held = Held()
    memory = memory_at(tmp_path, embedder, held)
    try:
        messages = turns(4 * BATCH)
        for start in range(0, len(messages), BATCH):  # one batch held running, three queued
            memory.add_messages("s1", messages[start : start + BATCH], progress=False)
        wait_for(lambda: sum(held.by.values()) >= BATCH)  # the first batch is being asked
        assert len(memory.entities("s1")) >= len(NAMES)
        assert held.by["MainThread"] == 3 * BATCH
        assert held.by["ctxbudget-entities"] == BATCH
        assert max(held.asked.values()) == 1 and sum(held.asked.values()) == len(messages)
    finally:
        held.release.set()
        memory.close()


def test_a_background_failure_is_logged_and_the_assembly_asks_again(
    tmp_path: Path, embedder: OnnxEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    model = Model(fail=1)
    memory = memory_at(tmp_path, embedder, model)
    try:
        with caplog.at_level("WARNING"):
            memory.add_message("s1", "user", "Zelda flew to Quito.")
            wait_for(lambda: "the model is down" in caplog.text)
        assert "an assembly asks again" in caplog.text
        assert [e.name for e in memory.entities("s1", named="Zelda")] == ["Zelda"]
    finally:
        memory.close()


def test_a_failure_the_assembly_meets_is_raised_there(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    class Broken:
        def extract(self, texts: Sequence[str], *, speakers: Sequence[str | None]) -> object:
            return [[Mention("Zelda")]]  # one list for any number of texts

    memory = ContextMemory(
        store=ChromaStore(tmp_path / "db", embedder=embedder), config=ON, entity_extractor=Broken()
    )
    try:
        memory.add_messages("s1", [("user", "a"), ("assistant", "b")], progress=False)
        with pytest.raises(ConfigurationError, match="one list of mentions per text"):
            memory.entities("s1")
        assert len(memory.history("s1")) == 2  # the messages are stored all the same
    finally:
        memory.close()


def test_closing_with_work_queued_does_not_wait_for_it(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    slow = Model(delay=0.5)
    memory = memory_at(tmp_path, embedder, slow)
    for number in range(20):  # more writes than batches may wait: the oldest are dropped
        memory.add_message("s1", "user", f"Message {number} about Zelda.")
    started = time.monotonic()
    memory.close()
    assert time.monotonic() - started < 5.0  # not 20 batches of 0.5 s
    assert sum(slow.asked.values()) < 20


def test_a_bulk_import_is_asked_about_when_first_read(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    model = Model()
    memory = memory_at(tmp_path, embedder, model)
    try:
        messages = turns(3 * BATCH)
        memory.add_messages("s1", messages, progress=False)
        wait_for(lambda: sum(model.asked.values()) == BATCH)  # only the newest batch
        newest = {
            message_key(Record(id="x", kind="message", text=t, role=r), None)[0]
            for r, t in messages[-BATCH:]
        }
        assert {text for text, _ in model.asked} == newest
        assert set(NAMES) <= {e.name for e in memory.entities("s1")}
        assert sum(model.asked.values()) == 3 * BATCH and max(model.asked.values()) == 1
    finally:
        memory.close()


@pytest.mark.parametrize("config", [MemoryConfig(), ON])
def test_nothing_runs_in_the_background_without_entities_or_with_the_rules(
    tmp_path: Path, embedder: OnnxEmbedder, config: MemoryConfig
) -> None:
    model = Model()
    memory = (
        memory_at(tmp_path, embedder, model, config=config)
        if not config.entities
        else ContextMemory(store=ChromaStore(tmp_path / "db", embedder=embedder), config=config)
    )

    def workers() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t.name.startswith("ctxbudget-entities")}

    before = workers()
    try:
        memory.add_messages("s1", turns(4), progress=False)
        time.sleep(0.2)
        assert not model.asked
        assert workers() <= before
    finally:
        memory.close()


# -- property: Answers alone ---------------------------------------------------------------

texts = st.sampled_from([f"{n} met {m}." for n in NAMES for m in NAMES] + ["plain text"])
steps = st.lists(
    st.tuples(st.sampled_from(["prepare", "ask"]), st.lists(texts, min_size=1, max_size=90)),
    min_size=1,
    max_size=8,
)


@settings(max_examples=40, deadline=None)
@given(steps=steps, delay=st.sampled_from([0.0, 0.001]))
def test_every_answer_is_the_extractors_and_each_text_is_asked_once(
    steps: list[tuple[str, list[str]]], delay: float
) -> None:
    model = Model(delay=delay)
    answers = Answers(model)
    try:
        for action, said in steps:
            records = [
                Record(id=f"m{i}", kind="message", text=t, role="user") for i, t in enumerate(said)
            ]
            if action == "prepare":
                answers.prepare(records)
                continue
            keys = [message_key(r, None) for r in records]
            got = answers.mentions(keys)
            assert [[m.name for m in found] for found in got] == [
                [n for n in NAMES if n in t] for t in said
            ]
        answers.close()
        assert max(model.asked.values(), default=1) == 1
    finally:
        answers.close()


def test_an_idle_background_thread_ends_and_starts_again(monkeypatch: pytest.MonkeyPatch) -> None:
    from ctxbudget.memory.entities import answers as module

    monkeypatch.setattr(module, "_IDLE", 0.05)
    model = Model()
    answers = Answers(model)
    message = Record(id="m", kind="message", text="Zelda is here.", role="user")
    answers.prepare([message])
    wait_for(lambda: answers._worker is None)  # a memory never closed keeps no thread
    answers.prepare([Record(id="n", kind="message", text="Ines too.", role="user")])
    wait_for(lambda: sum(model.asked.values()) == 2)
    assert [m.name for m in answers.mentions([message_key(message, None)])[0]] == ["Zelda"]
    answers.close()
