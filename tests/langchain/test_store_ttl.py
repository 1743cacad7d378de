"""`CtxBudgetStore`'s TTL, on a clock the tests move: no sleeping, no timing margins.

Values' times come from `ctxbudget.memory.values.model.clock` (epoch nanoseconds); the
``clock`` fixture replaces it with a `Clock` that stands still until a test moves it. Expired
items are never returned (to the microsecond: an item lives while ``now < expires_at``), reads
refresh the expiry unless told not to, a default ttl applies to puts that give none, a sweep
deletes expired items, and the sweeper thread sweeps them and stops.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.values import model
from langchain_ctxbudget.store import CtxBudgetStore

MINUTE = 60.0  # seconds
MICROS = 60_000_000  # per minute


class Clock:
    """Epoch nanoseconds that move only when told (`move`)."""

    def __init__(self) -> None:
        self.ns = time.time_ns()

    def __call__(self) -> int:
        return self.ns

    def move(self, *, seconds: float = 0.0, micros: int = 0) -> None:
        self.ns += round(seconds * 1_000_000_000) + micros * 1000


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[Clock]:
    moved = Clock()
    monkeypatch.setattr(model, "clock", moved)
    yield moved


def test_expired_items_are_never_returned_and_reads_refresh_them(
    memory: ContextMemory, clock: Clock
) -> None:
    store = CtxBudgetStore(memory)
    assert store.supports_ttl
    store.put(("t",), "kept", {"text": "refreshed"}, ttl=1.0)
    store.put(("t",), "gone", {"text": "left alone"}, ttl=1.0)
    store.put(("t",), "forever", {"text": "no ttl"})
    clock.move(seconds=30)
    assert store.get(("t",), "kept") is not None  # refreshed: expires a minute from now
    clock.move(seconds=30)  # "gone" expires now: a minute after it was put
    assert store.get(("t",), "gone", refresh_ttl=False) is None
    got = store.get(("t",), "kept", refresh_ttl=False)
    assert got is not None
    assert {i.key for i in store.search(("t",), refresh_ttl=False)} == {"kept", "forever"}
    clock.move(seconds=30)  # "kept" expires now: a minute after its refresh
    assert store.get(("t",), "kept") is None
    assert [i.key for i in store.search(("t",), query="refreshed")] == ["forever"]
    assert store.list_namespaces() == [("t",)]
    assert store.sweep_ttl() == 2
    assert store.sweep_ttl() == 0
    assert store.get(("t",), "forever") is not None


def test_a_refresh_on_read_keeps_an_item_as_long_as_it_is_read(
    memory: ContextMemory, clock: Clock
) -> None:
    store = CtxBudgetStore(memory, user_at=1)
    store.put(("memories", "alice"), "k", {"text": "read often"}, ttl=1.0)
    for _ in range(5):  # five minutes in all, read every 50 s
        clock.move(seconds=50)
        found = store.search(("memories", "alice"), query="often")
        assert [i.key for i in found] == ["k"]
    clock.move(seconds=MINUTE)
    assert store.search(("memories", "alice"), query="often") == []


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(minutes=st.integers(1, 10_000), share=st.floats(0, 2), edge=st.sampled_from([None, -1, 0]))
@example(minutes=1, share=0.0, edge=-1).via("the last microsecond it lives")
@example(minutes=1, share=0.0, edge=0).via("the microsecond it expires")
def test_an_item_lives_exactly_its_ttl(
    memory: ContextMemory, clock: Clock, minutes: int, share: float, edge: int | None
) -> None:
    store = CtxBudgetStore(memory)
    key = f"k{clock.ns}"
    store.put(("x",), key, {"text": "timed"}, ttl=float(minutes))
    ttl = minutes * MICROS
    elapsed = round(share * ttl) if edge is None else ttl + edge
    clock.move(micros=elapsed)
    live = elapsed < ttl
    assert (store.get(("x",), key, refresh_ttl=False) is not None) == live, elapsed
    listed = {i.key for i in store.search(("x",), refresh_ttl=False, limit=1000)}
    assert (key in listed) == live
    clock.move(seconds=1)  # the next example's items are put later


def test_the_default_ttl_applies_to_puts_that_give_none(
    memory: ContextMemory, clock: Clock
) -> None:
    store = CtxBudgetStore(memory, ttl={"default_ttl": 1.0, "refresh_on_read": False})
    store.put(("d",), "k", {"v": 1})
    store.put(("d",), "no-ttl", {"v": 2}, ttl=None)
    clock.move(seconds=30)
    assert store.get(("d",), "k") is not None  # no refresh: refresh_on_read is False
    clock.move(seconds=30)
    assert store.get(("d",), "k") is None
    assert store.get(("d",), "no-ttl") is not None
    assert store.list_namespaces() == [("d",)]


def test_a_bad_ttl_is_refused_and_nothing_is_written(memory: ContextMemory) -> None:
    store = CtxBudgetStore(memory)
    for ttl in (0, -1.0, float("nan"), "5", True):
        with pytest.raises(ValueError, match="ttl"):
            store.put(("t",), "k", {"v": 1}, ttl=ttl)  # type: ignore[arg-type]
    assert store.list_namespaces() == []


def test_the_sweeper_thread_sweeps_and_stops(
    tmp_path: Path, embedder: object, clock: Clock
) -> None:
    store = CtxBudgetStore(
        path=tmp_path / "chroma", embedder=embedder, ttl={"sweep_interval_minutes": 0.001}
    )
    swept: list[int] = []
    once = threading.Event()
    sweep = store.memory.sweep_values

    def seen() -> int:
        count = sweep()
        swept.append(count)
        once.set()
        return count

    try:
        store.put(("s",), "k", {"v": 1}, ttl=1.0)
        clock.move(seconds=MINUTE)
        with patch.object(store.memory, "sweep_values", seen):
            done = store.start_ttl_sweeper()
            assert store.start_ttl_sweeper() is done
            assert once.wait(timeout=60), "the sweeper never swept"
            assert store.stop_ttl_sweeper(timeout=60)
        assert done.done()
        assert swept[0] == 1 and sum(swept) == 1, swept  # the expired item, once
        assert store.memory.sweep_values() == 0
    finally:
        store.close()


def test_a_closed_store_stops_its_sweeper(tmp_path: Path, embedder: Any) -> None:
    store = CtxBudgetStore(path=tmp_path / "chroma", embedder=embedder)
    done = store.start_ttl_sweeper(sweep_interval_minutes=60)
    store.close()
    assert done.done()
