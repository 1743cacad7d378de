"""`CtxBudgetStore` against LangGraph's ``InMemoryStore``: what a differential probe found.

1. Pages of a query search over more than 300 items (Chroma's index answers) skipped one item
   and repeated another where two items tied at a page's edge (one same text): the index
   returns a tie in any order, and the cut fell inside it. Pages now put end to end are the
   search of them all, on a folder and on a server.
2. A top-level filter key is a field's name, ``"$"`` first or not (``{"$price": 5}``), as in
   ``InMemoryStore``; a field's condition mixing operators and fields is refused up front.
3. A batch refused for a bad search argument (a NaN filter, a query that is not text) refreshed
   the ttl of the items its gets read first: every search and listing is now checked before
   any operation runs.
4. Async calls apply in the order they were called on the loop: a get called after a put reads
   it; a sync ``put`` made after an ``aput`` started wins.
5. A close from another thread cut a running ``put`` between its value's write and its stamp,
   and the put raised "nothing was done" though its value was stored: close waits for the
   calls running.

Real parts: the default embedder, an embedded Chroma (and a ``chroma run`` server for 1).
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.base import GetOp, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore

import ctxbudget.memory.values.model as model
from ctxbudget import InvalidValueError
from ctxbudget.embed.local import LocalEmbedder
from ctxbudget.memory.context import ContextMemory
from ctxbudget.store.chroma_store import ChromaStore
from ctxbudget.testing import ChromaServer
from langchain_ctxbudget import CtxBudgetStore

WORDS = "lisbon cat miso cello garden train coffee piano winter river bread".split()


@pytest.fixture
def store(tmp_path: Path, embedder: LocalEmbedder) -> Iterator[CtxBudgetStore]:
    opened = CtxBudgetStore(path=tmp_path / "s", embedder=embedder)
    yield opened
    opened.close()


@pytest.mark.parametrize(
    "backend", ["embedded", pytest.param("server", marks=pytest.mark.integration)]
)
def test_query_pages_over_the_index_are_one_search_with_ties_at_their_edges(
    request: pytest.FixtureRequest, tmp_path: Path, embedder: LocalEmbedder, backend: str
) -> None:
    if backend == "server":
        server: ChromaServer = request.getfixturevalue("chroma_server")
        memory = ContextMemory(
            store=ChromaStore(
                url=server.url, collection=f"p-{tmp_path.name}"[:60], embedder=embedder
            )
        )
        opened = CtxBudgetStore(memory=memory)
    else:
        opened = CtxBudgetStore(path=tmp_path / "s", embedder=embedder)
    try:
        rng = random.Random(1)
        ops = [
            PutOp(("m",), f"k{i:03d}", {"text": " ".join(rng.choice(WORDS) for _ in range(3))})
            for i in range(400)  # past the 300 searched exactly: Chroma's index answers
        ]
        for start in range(0, 400, 100):
            opened.batch(ops[start : start + 100])
        whole = [item.key for item in opened.search(("m",), query="cat", limit=1000)]
        pages = [
            item.key
            for offset in range(0, 450, 50)
            for item in opened.search(("m",), query="cat", limit=50, offset=offset)
        ]
        assert len(whole) == 400
        assert pages == whole
        texts = [op.value["text"] for op in ops]  # type: ignore[index]
        assert len(set(texts)) < len(texts)  # ties exist: the case this test is about
    finally:
        opened.close()
        if backend == "server":
            memory.close()


def test_pages_within_the_first_hundred_are_one_search_however_they_are_cut(
    tmp_path: Path, embedder: LocalEmbedder
) -> None:
    # Before 2026-12-01 each page asked the index for what it needed, and Chroma's HNSW search
    # explores max(100, k) candidates: one fresh store in three put an item on two pages of 10
    # and another on none (420 items, one search of 100 against ten pages).
    for trial in range(4):
        opened = CtxBudgetStore(path=tmp_path / f"s{trial}", embedder=embedder)
        try:
            opened.batch(
                [
                    PutOp(("ns",), f"k{i:03d}", {"text": f"note {i} about {topic}"})
                    for i in range(420)
                    for topic in ["cats" if i % 7 == 0 else "weather"]
                ]
            )
            whole = [item.key for item in opened.search(("ns",), query="cats", limit=100)]
            for size in (10, 25, 50):
                pages = [
                    item.key
                    for offset in range(0, 100, size)
                    for item in opened.search(("ns",), query="cats", limit=size, offset=offset)
                ]
                assert pages == whole, (trial, size)
        finally:
            opened.close()


@pytest.mark.parametrize(
    ("filter_", "wanted"),
    [({"$price": 5}, ["k1"]), ({"$price": {"$gt": 6}}, ["k2"]), ({"$price": {"$ne": 5}}, ["k2"])],
)
def test_a_top_level_key_is_a_field_dollar_or_not(
    store: CtxBudgetStore, filter_: dict[str, Any], wanted: list[str]
) -> None:
    reference = InMemoryStore()
    for target in (store, reference):
        target.put(("p",), "k1", {"$price": 5}, index=False)
        target.put(("p",), "k2", {"$price": 9}, index=False)
    assert [i.key for i in reference.search(("p",), filter=filter_)] == wanted
    assert sorted(i.key for i in store.search(("p",), filter=filter_)) == wanted


@pytest.mark.parametrize("value", [{"n": "y"}, {"n": 5}])
def test_operators_mixed_with_fields_are_refused_whatever_the_value(
    store: CtxBudgetStore, value: dict[str, Any]
) -> None:
    store.put(("p",), "k", value, index=False)
    with pytest.raises(InvalidValueError, match="mixes operators"):
        store.search(("p",), filter={"n": {"$ne": "x", "a": 1}})


class _Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000 * 10**9

    def __call__(self) -> int:
        return self.now

    def move(self, minutes: float) -> None:
        self.now += int(minutes * 60e9)


@pytest.mark.parametrize(
    "bad",
    [
        SearchOp(("t",), filter={"x": float("nan")}),
        SearchOp(("t",), query=5),  # type: ignore[arg-type]
        SearchOp(("t",), filter={"x": {"$bad": 1}}),
        SearchOp(("t",), limit=20_000),
    ],
    ids=["nan", "query", "operator", "limit"],
)
def test_a_refused_batch_leaves_ttls_as_they_were(
    store: CtxBudgetStore, monkeypatch: pytest.MonkeyPatch, bad: SearchOp
) -> None:
    clock = _Clock()
    monkeypatch.setattr(model, "clock", clock)
    store.put(("t",), "k", {"v": 1}, ttl=1)
    clock.move(0.9)
    with pytest.raises(InvalidValueError):
        store.batch([GetOp(("t",), "k"), bad, PutOp(("t",), "k2", {"v": 2})])
    clock.move(0.2)  # 1.1 minutes after the put: expired, unless the refused get refreshed it
    assert store.get(("t",), "k", refresh_ttl=False) is None
    assert store.get(("t",), "k2") is None


async def test_a_get_called_after_a_put_reads_it(store: CtxBudgetStore) -> None:
    for n in range(10):
        space = ("o", str(n))
        put = asyncio.create_task(store.aput(space, "k", {"v": n}))
        got = asyncio.create_task(store.aget(space, "k"))
        listed = asyncio.create_task(store.asearch(space))
        again = asyncio.create_task(store.aput(space, "k", {"v": -n}))
        last = asyncio.create_task(store.aget(space, "k"))
        await asyncio.gather(put, got, listed, again, last)
        first = got.result()
        assert first is not None and first.value == {"v": n}
        assert [i.value for i in listed.result()] == [{"v": n}]
        final = last.result()
        assert final is not None and final.value == {"v": -n}


async def test_a_sync_put_made_after_an_aput_started_wins(store: CtxBudgetStore) -> None:
    await store.aput(("warm",), "k", {"v": 0})
    for n in range(5):
        space = ("o", str(n))
        task = asyncio.create_task(store.aput(space, "k", {"v": "async, first"}))
        await asyncio.sleep(0)  # the aput has started: it is on a worker thread
        store.put(space, "k", {"v": "sync, second"})
        await task
        found = store.get(space, "k")
        assert found is not None and found.value == {"v": "sync, second"}


def test_close_waits_for_a_put_running_on_another_thread(
    store: CtxBudgetStore, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, embedder: LocalEmbedder
) -> None:
    values = store.memory.store.values
    real = values._stamp
    entered, release = threading.Event(), threading.Event()

    def held(*args: Any, **kwargs: Any) -> Any:  # between the value's write and its stamp
        entered.set()
        release.wait(10)
        return real(*args, **kwargs)

    store.put(("w",), "k0", {"v": 0})
    monkeypatch.setattr(values, "_stamp", held)
    outcome: list[object] = []
    putter = threading.Thread(target=lambda: outcome.append(store.put(("w",), "k1", {"v": 1})))
    putter.start()
    assert entered.wait(10)
    closer = threading.Thread(target=store.close)
    closer.start()
    time.sleep(0.2)
    assert closer.is_alive()  # waiting for the put, which is not cut
    release.set()
    putter.join(10)
    closer.join(10)
    assert outcome == [None]  # the put returned, not "closed, nothing was done"
    with CtxBudgetStore(path=tmp_path / "s", embedder=embedder) as again:
        found = again.get(("w",), "k1")
        assert found is not None and found.value == {"v": 1}
