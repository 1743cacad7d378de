"""Closing returns only once the memory is closed, whoever closes it and however often.

- A close that meets another close still running (two tasks' ``aclose``, an app's shutdown hook
  on a thread and an ``async with``, a sync ``close`` from two threads) returns once that close
  ended: the acknowledged messages stored, the folder released, the memory's threads ended. If
  that close failed, every close waiting for it (and every later one) raises its error.
- When ``close`` returns, no thread of the memory runs any more (its async workers, its
  background writers), and a new memory on the folder reads every acknowledged message.
- A close called from inside the memory's own worker thread while another close waits for that
  worker does not deadlock; a close cut by Ctrl-C (a real SIGINT) is finished by the next one.

Real parts: an embedded Chroma folder, the default embedder (held at a gate in the background
writer, so that a close is caught in the middle of storing what was acknowledged).
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import signal
import threading
from collections.abc import Awaitable, Iterator
from pathlib import Path

import pytest

from ctxbudget import MemoryClosedError
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.memory import awaitable
from ctxbudget.memory.context import ContextMemory
from ctxbudget.store.chroma_store import ChromaStore
from ctxbudget.store.lock import LOCK_NAME
from tests.memory.test_async_close import HeldEmbedder

TURNS = [f"turn {n}: the night train to Porto leaves at {n} pm" for n in range(6)]


class Held:
    """A memory whose background writer is held storing ``TURNS`` (acknowledged, not stored)."""

    def __init__(self, folder: Path, embedder: OnnxEmbedder) -> None:
        self.folder = folder
        self.embedder = embedder
        self.before = set(threading.enumerate())
        self.gated = HeldEmbedder(embedder)
        self.gated.hold = True
        store = ChromaStore(folder, embedder=self.gated)
        self.memory = ContextMemory(store=store, inclusion_log=False)
        for text in TURNS:
            self.memory.add_message("s1", "user", text)  # acknowledged: journaled
        self.gated.entered.acquire()  # the writer holds them at the gate, in the middle

    def closing(self) -> bool:
        """Whether a close has begun (every call is refused from its start)."""
        try:
            self.memory.counter_for(None)  # checked open; reads nothing, waits for nothing
        except MemoryClosedError:
            return True
        return False

    def until_closing(self) -> None:
        while not self.closing():
            threading.Event().wait(0.001)

    def assert_closed(self) -> None:
        """The memory is closed for real: threads ended, folder free, every turn stored."""
        assert not leftover(self.before), "a thread of the closed memory still runs"
        assert folder_free(self.folder), "the closed memory still holds its folder"
        assert not list((self.folder / "ctxbudget-journal").rglob("*.jsonl")), "journal kept"
        again = ContextMemory(self.folder, embedder=self.embedder, inclusion_log=False)
        try:
            assert [r.text for r in again.history("s1")] == TURNS
        finally:
            again.close()


def leftover(before: set[threading.Thread]) -> list[threading.Thread]:
    """ctxbudget threads started since ``before`` and still alive (the shared embedder's aside)."""
    return [
        t
        for t in threading.enumerate()
        if t not in before
        and t.is_alive()
        and t.name.startswith("ctxbudget")
        and not t.name.startswith(("ctxbudget-onnx", "ctxbudget-rerank-loop"))
    ]


def folder_free(folder: Path) -> bool:
    """Whether no store holds the folder's lock (a lock of a new open file, as another opener)."""
    fd = os.open(folder / LOCK_NAME, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # closing the descriptor lets go of a lock taken through it
    return True


@pytest.fixture
def held(tmp_path: Path, embedder: OnnxEmbedder) -> Iterator[Held]:
    held = Held(tmp_path / "chroma", embedder)
    yield held
    held.gated.gate.set()
    held.memory.close()


async def _outcome(call: Awaitable[None]) -> BaseException | None:
    try:
        await call
    except Exception as exc:  # noqa: BLE001 - the test compares what each close raised
        return exc
    return None


def _closer(memory: ContextMemory, how: str) -> Awaitable[BaseException | None]:
    """A close of ``memory`` as a task of the running loop: ``aclose``, or ``close`` on a thread."""
    call = memory.aclose() if how == "aclose" else asyncio.to_thread(memory.close)
    return asyncio.ensure_future(_outcome(call))


async def _still_running(task: Awaitable[object]) -> bool:
    # Not a timing assertion: a close that waits never returns while the gate is shut.
    done, _ = await asyncio.wait([asyncio.ensure_future(task)], timeout=0.5)
    return not done


ORDERS = [("close", "aclose"), ("aclose", "aclose"), ("aclose", "close"), ("close", "close")]


@pytest.mark.parametrize(("first", "second"), ORDERS, ids=["-then-".join(o) for o in ORDERS])
async def test_a_close_meeting_a_close_in_progress_returns_once_the_memory_is_closed(
    held: Held, first: str, second: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first close takes longer than CLOSE_WAIT (a long queue to store on a slow store).
    monkeypatch.setattr(awaitable, "CLOSE_WAIT", 0.05)
    closing = _closer(held.memory, first)
    await asyncio.to_thread(held.until_closing)
    again = _closer(held.memory, second)
    try:
        returned_early = not await _still_running(again)
    finally:
        held.gated.gate.set()
    assert await closing is None
    assert await again is None
    assert not returned_early, f"{second} returned while the first close was still storing"
    held.assert_closed()


async def test_a_failed_close_fails_the_close_waiting_for_it_and_every_later_one(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    memory = ContextMemory(tmp_path / "chroma", embedder=embedder, inclusion_log=False)
    memory.add_message("s1", "user", TURNS[0])
    entered, gate = threading.Event(), threading.Event()

    def failing() -> None:  # the store's own hook: run when it closes
        entered.set()
        gate.wait()
        msg = "the store could not be released"
        raise RuntimeError(msg)

    memory.store.on_close(failing)
    first = _closer(memory, "close")
    await asyncio.to_thread(entered.wait)
    second = _closer(memory, "aclose")
    gate.set()
    failed = await first
    assert isinstance(failed, RuntimeError)
    assert await second is failed, "a close waiting for a failed close reported success"
    with pytest.raises(RuntimeError) as later:
        memory.close()
    assert later.value is failed
    assert folder_free(tmp_path / "chroma")  # the rest of the close ran all the same


async def test_sync_close_ends_the_memorys_threads_and_refuses_the_calls_still_queued(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    before = set(threading.enumerate())
    folder = tmp_path / "chroma"
    memory = ContextMemory(folder, embedder=embedder)  # the inclusion log's thread too
    await memory.aadd_messages("s1", [("user", t) for t in TURNS])
    await memory.aassemble("s1", "when does the train leave?", budget=300)
    started, gate, late_gate = threading.Semaphore(0), threading.Event(), threading.Event()
    ran: list[str] = []

    def hold() -> None:
        started.release()
        gate.wait()

    def queued() -> None:  # queued behind the two held calls when the close comes
        ran.append("queued")
        late_gate.wait()

    running = [asyncio.ensure_future(memory.arun(hold)) for _ in range(awaitable.ASYNC_WORKERS)]
    for _ in running:
        await asyncio.to_thread(started.acquire)
    waiting = asyncio.ensure_future(_outcome(memory.arun(queued)))
    await asyncio.sleep(0)  # submitted: it waits for a worker
    closing = asyncio.ensure_future(asyncio.to_thread(memory.close))
    try:
        await asyncio.to_thread(_until_refused, memory)  # refused from the start of the close
        gate.set()
        await asyncio.gather(*running)
        await closing
        alive = leftover(before)
    finally:
        late_gate.set()
    assert not alive, f"threads outlived close(): {alive}"
    assert isinstance(await waiting, MemoryClosedError)
    assert ran == [], "a call still queued ran after the memory closed"
    assert folder_free(folder)
    again = ContextMemory(folder, embedder=embedder, inclusion_log=False)
    try:
        assert [r.text for r in again.history("s1")] == TURNS
    finally:
        again.close()


async def test_a_close_from_the_worker_another_close_waits_for_returns_once_closed(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    folder = tmp_path / "chroma"
    memory = ContextMemory(folder, embedder=embedder, inclusion_log=False)
    memory.add_messages("s1", [("user", t) for t in TURNS])
    started, go = threading.Event(), threading.Event()
    seen: dict[str, bool] = {}

    def turn() -> None:  # a call on a worker (an adapter's whole turn) that closes the memory
        started.set()
        go.wait()
        memory.close()
        seen["folder free when its close returned"] = folder_free(folder)

    inside = asyncio.ensure_future(memory.arun(turn))
    await asyncio.to_thread(started.wait)  # on its worker
    outside = asyncio.ensure_future(asyncio.to_thread(memory.close))  # waits for the worker
    await asyncio.to_thread(_until_refused, memory)
    go.set()
    await asyncio.wait_for(asyncio.gather(inside, outside), timeout=120)  # no deadlock
    assert seen == {"folder free when its close returned": True}


def _until_refused(memory: ContextMemory) -> None:
    while True:
        try:
            memory.counter_for(None)
        except MemoryClosedError:
            return
        threading.Event().wait(0.001)


def test_a_close_cut_by_ctrl_c_is_finished_by_the_next_close(held: Held) -> None:
    main = threading.main_thread().ident
    assert main == threading.get_ident()

    def interrupt() -> None:
        held.until_closing()
        signal.pthread_kill(main, signal.SIGINT)  # a real Ctrl-C, in the middle of storing

    sender = threading.Thread(target=interrupt)
    sender.start()
    with pytest.raises(KeyboardInterrupt):
        held.memory.close()
    sender.join()
    held.gated.gate.set()
    held.memory.close()  # finishes what the first began
    held.assert_closed()


async def test_close_after_a_cancelled_aclose_finds_the_memory_closed(held: Held) -> None:
    closing = asyncio.ensure_future(held.memory.aclose())
    await asyncio.to_thread(held.until_closing)
    closing.cancel()
    held.gated.gate.set()
    with pytest.raises(asyncio.CancelledError):
        await closing  # a cancelled close ends before its caller goes on
    held.memory.close()
    held.assert_closed()
