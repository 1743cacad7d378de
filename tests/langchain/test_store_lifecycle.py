"""`CtxBudgetStore`'s lifecycle: closing from async code, ``async with``, and its ``index`` checked.

- ``aclose()`` while the TTL sweeper thread is sweeping waits for that sweep without blocking
  the event loop (it waited on the sweeper's future on the loop's thread: the loop stood still
  until the sweep ended);
- ``async with CtxBudgetStore(...) as store:`` opens and closes it (``aclose``), as LangGraph's
  ``AsyncPostgresStore`` can be entered; ``with`` closes it too;
- ``index={"fields": [...]}`` paths LangGraph's path reader would misread (``"a..b"``, an
  unclosed ``[``, ``"[0]x"``...) are refused when the store is made, naming the path and what
  to write instead; valid ones (``""`` and ``"$"`` for the whole value too) work as in
  LangGraph's stores.
"""

from __future__ import annotations

import asyncio
import shutil
import threading
import time
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pytest
from langgraph.store.base import PutOp
from langgraph.store.memory import InMemoryStore

from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.errors import ConfigurationError, InvalidValueError, MemoryClosedError
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.values import model
from langchain_ctxbudget.store import CtxBudgetStore

USERS, PER_USER = 100, 10  # a sweep of 2 to 5 s here: one partition per user
CANCEL_AFTER = 0.1  # seconds into aclose the cancelled one is cancelled, the sweep still running


# -- 1. aclose during a sweep keeps the loop responsive -----------------------------------------
@pytest.fixture(scope="module")
def swept_folder(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder) -> Path:
    """A closed store's folder holding USERS x PER_USER values with a ttl of a minute.

    Put once for the module (a thousand puts take seconds); each test sweeps its own copy.
    """
    folder = tmp_path_factory.mktemp("swept") / "chroma"
    store = CtxBudgetStore(path=folder, embedder=embedder, user_at=1)
    puts = [
        PutOp(("memories", f"u{u}"), f"k{n}", {"text": f"note {n}"}, index=False, ttl=1.0)
        for u in range(USERS)
        for n in range(PER_USER)
    ]
    asyncio.run(store.abatch(puts))
    store.close()
    return folder


@pytest.mark.parametrize("cancelled", [False, True], ids=["awaited", "cancelled"])
async def test_aclose_during_a_sweep_does_not_block_the_loop(
    tmp_path: Path,
    embedder: OnnxEmbedder,
    monkeypatch: pytest.MonkeyPatch,
    cancelled: bool,
    swept_folder: Path,
) -> None:
    shutil.copytree(swept_folder, tmp_path / "chroma")
    store = CtxBudgetStore(path=tmp_path / "chroma", embedder=embedder, user_at=1)
    real = model.clock
    monkeypatch.setattr(model, "clock", lambda: real() + 120 * 1_000_000_000)  # all expired
    sweeping = threading.Event()
    ended: list[float] = []
    swept: list[int] = []
    sweep = store.memory.sweep_values

    def observed() -> int:  # the real sweep, its start and end noted
        sweeping.set()
        try:
            swept.append(sweep())
            return swept[-1]
        finally:
            ended.append(time.monotonic())

    ticks: list[float] = []

    async def heartbeat() -> None:
        while True:
            ticks.append(time.monotonic())
            await asyncio.sleep(0.005)

    with patch.object(store.memory, "sweep_values", observed):
        store.start_ttl_sweeper(sweep_interval_minutes=0.0001)
        assert await asyncio.to_thread(sweeping.wait, 60), "the sweeper never swept"
        beating = asyncio.create_task(heartbeat())
        await asyncio.sleep(0.02)
        started = time.monotonic()
        if cancelled:  # cancelled while it waits: it closes before the cancellation is raised
            closing = asyncio.create_task(store.aclose())
            await asyncio.sleep(CANCEL_AFTER)
            closing.cancel()
            with pytest.raises(asyncio.CancelledError):
                await closing
        else:
            await store.aclose()
        closed = time.monotonic()
        await asyncio.sleep(0.02)  # the heartbeat notes the gap a blocked loop left
        beating.cancel()
    assert swept[0] == USERS * PER_USER  # the sweep aclose waited for was a real, whole one
    assert ended[0] - started > 3 * CANCEL_AFTER, "the sweep ended too soon to tell"
    assert closed >= ended[-1]  # aclose returned once the sweep had ended
    # Blocked, the loop stands still for all of aclose (the gap spans it); free, it keeps
    # turning (the sweep's own turns with the interpreter lock: gaps of 0.01 to 0.5 s here).
    lag = max(b - a for a, b in zip(ticks, ticks[1:], strict=False))
    waited = closed - started
    assert lag < waited / 2, f"the event loop stood still {lag:.2f} s of aclose's {waited:.2f} s"
    with pytest.raises(MemoryClosedError):
        await store.aget(("memories", "u0"), "k0")
    with pytest.raises(MemoryClosedError):
        store.memory.get_value(("memories", "u0"), "k0")  # the memory it opened is closed


async def test_aclose_of_a_store_over_a_closed_memory_stops_its_sweeper(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    memory = ContextMemory(path=tmp_path / "chroma", embedder=embedder)
    store = CtxBudgetStore(memory)
    done = store.start_ttl_sweeper(sweep_interval_minutes=60)
    memory.close()
    await store.aclose()
    await asyncio.wait_for(asyncio.wrap_future(done), 30)  # it ends, though not waited for
    await store.aclose()  # again: nothing


# -- 2. async with / with -----------------------------------------------------------------------
async def test_async_with_opens_and_closes_the_store(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    async with CtxBudgetStore(path=tmp_path / "chroma", embedder=embedder) as store:
        assert isinstance(store, CtxBudgetStore)
        done = store.start_ttl_sweeper(sweep_interval_minutes=60)
        await store.aput(("notes",), "k", {"text": "kept"})
        item = await store.aget(("notes",), "k")
        assert item is not None and item.value == {"text": "kept"}
    assert done.done()
    with pytest.raises(MemoryClosedError):
        await store.aget(("notes",), "k")
    with pytest.raises(MemoryClosedError):
        store.memory.get_value(("notes",), "k")  # the memory it opened is closed too
    async with CtxBudgetStore(path=tmp_path / "chroma", embedder=embedder) as again:
        item = await again.aget(("notes",), "k")
        assert item is not None and item.value == {"text": "kept"}  # persisted


async def test_async_with_closes_on_an_error_and_keeps_a_memory_passed_in(
    memory: ContextMemory,
) -> None:
    with pytest.raises(KeyError, match="raised inside"):
        async with CtxBudgetStore(memory) as store:
            await store.aput(("notes",), "k", {"text": "kept"})
            raise KeyError("raised inside")  # not swallowed
    with pytest.raises(MemoryClosedError):
        await store.aget(("notes",), "k")
    assert memory.get_value(("notes",), "k") is not None  # passed in: still open


def test_with_closes_the_store(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    with CtxBudgetStore(path=tmp_path / "chroma", embedder=embedder) as store:
        store.put(("notes",), "k", {"text": "kept"})
    with pytest.raises(MemoryClosedError):
        store.get(("notes",), "k")


# -- 3. index paths checked -----------------------------------------------------------------------
BAD_FIELDS: dict[str, object] = {
    "a..b": "'..'",
    ".a": "starts with '.'",
    "a.": "ends with '.'",
    "a[": "never closed",
    "a[0": "never closed",
    "[0]x": r"\[0\]\.x",
    "a[0]b": r"a\[0\]\.b",
    "a[x]": "a number",
    "a[]": "a number",
    "a[[0]]": "a number",
    "a]": "unmatched",
    "a}": "unmatched",
    "{a,b": "never closed",
    "{a,}": "empty",
    "{a[0]}": "only field names",
    "{a,b}.c": "last",
    "a[0]]": "unmatched",
    "$.text": "write 'text'",
    "$[0]": r"write '\[0\]'",
    7: "must be a str",
    None: "must be a str",
}


@pytest.mark.parametrize("field", list(BAD_FIELDS), ids=repr)
def test_malformed_index_fields_are_refused_naming_the_path(
    memory: ContextMemory, field: object
) -> None:
    with pytest.raises(ConfigurationError, match=str(BAD_FIELDS[field])) as caught:
        CtxBudgetStore(memory, index={"fields": ["text", field]})
    assert repr(field) in str(caught.value)
    assert "CtxBudgetStore(index=)['fields']" in str(caught.value)


@pytest.mark.parametrize("field", ["a..b", "a[", "[0]x"])
def test_malformed_put_index_paths_are_refused_and_nothing_is_written(
    memory: ContextMemory, field: str
) -> None:
    store = CtxBudgetStore(memory)
    with pytest.raises(InvalidValueError, match="index") as caught:
        store.batch(
            [
                PutOp(("notes",), "ok", {"text": "fine"}),
                PutOp(("notes",), "bad", {"text": "t"}, index=[field]),
            ]
        )
    assert repr(field) in str(caught.value)
    assert store.search(("notes",)) == []


VALUE: dict[str, Any] = {
    "text": "Ana drinks green tea",
    "nested": {"a": "Bo rides a bike", "b": {"c": "Cy sings"}},
    "list": [{"x": "Di paints"}, {"x": "Ed runs"}],
    "tags": ["tea", "bike"],
    "*": "a key named star",
}
GOOD_FIELDS = [
    "",
    "$",
    "text",
    "nested.a",
    "nested.b.c",
    "list[0].x",
    "list[-1].x",
    "list[*].x",
    "tags[*]",
    "tags[1]",
    "nested.*",
    "*",
    "{text,nested.a}",
    "nested{a,b}",
    "{ text , nested.b.c }",
    "missing",
    "list[0]",
    "list[0]{x}",
    "$text",
]


@pytest.mark.parametrize("field", GOOD_FIELDS)
def test_valid_index_fields_embed_what_langgraph_embeds(memory: ContextMemory, field: str) -> None:
    seen: list[list[str]] = []

    def embed(texts: list[str]) -> list[list[float]]:
        seen.append(list(texts))
        return [[1.0, 0.0] for _ in texts]

    reference = InMemoryStore(index={"dims": 2, "embed": embed, "fields": [field]})
    reference.put(("notes",), "k", VALUE)
    expected = sorted(text for texts in seen for text in texts)
    store = CtxBudgetStore(memory, index={"fields": [field]})
    store.put(("notes",), "k", VALUE)
    assert CtxBudgetStore(memory, index={"fields": [field]}).index_fields == [field or "$"]
    texts = model.index_text(VALUE, store.index_fields)
    assert sorted(texts.split("\n") if texts else []) == expected
