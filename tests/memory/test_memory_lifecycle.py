"""Lifecycle: closed is one clear error from every call; a cancelled call keeps the caller's order.

Closed: after ``close()``/``aclose()`` every public method of `ContextMemory` (found by
introspection, its bases' and async twins included, so a new one cannot escape) raises
`MemoryClosedError` with a one-line message, and so does every method of a closed `ChromaStore`;
closing again does nothing. Cancelled (docs/memory.md, "Async"): a cancelled ``a``-call either
has no effect (it had not started) or ends before the caller's next call starts.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxbudget import CtxBudgetError, MemoryClosedError, StoreError
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.memory.context import ContextMemory
from ctxbudget.store.chroma_store import ChromaStore
from ctxbudget.store.records import Record
from ctxbudget.testing import ChromaServer

StoreFactory = Callable[..., ChromaStore]

#: A plausible value for each required parameter of a public method, by its name. A new method
#: with a parameter not named here fails `arguments` (add its value): it is still tested.
VALUES: dict[str, Any] = {
    "session_id": "s1",
    "role": "user",
    "text": "hello again",
    "messages": [("user", "one more"), ("assistant", "noted")],
    "query": "hello",
    "queries": ["hello"],
    "documents": ["Lisbon is the capital of Portugal."],
    "user_id": "u1",
    "id": "p1",
    "ids": ["m1"],
    "func": len,
    "model": "gpt-4o",
    "result": "done",
    "goal": "plan the trip",
    "success": True,
    "a": "Ana",
    "b": "Lisbon",
    "trigger": "when asked about trips",
    "procedure": "check the calendar first",
    "records": [Record(id="m9", kind="message", text="hi", session_id="s1", role="user")],
    "record": Record(id="m9", kind="message", text="hi again", session_id="s1", role="user"),
    "namespace": "default",
    "limit": 5,
    "k": 3,
    "recent": 5,
    "callback": lambda: None,
    "key": "k1",
    "value": {"text": "Ana lives in Lisbon."},
    "puts": [],
    "gets": [],
    "prefix": ("memories",),
}


def public_methods(cls: type) -> list[str]:
    """Every public function of ``cls`` (its bases' too), ``close``/``aclose`` aside."""
    return sorted(
        name
        for name in dir(cls)
        if not name.startswith("_")
        and name not in ("close", "aclose")
        and inspect.isfunction(inspect.getattr_static(cls, name))
    )


def call_of(obj: object, name: str, extra: dict[str, Any]) -> Callable[[], Any]:
    """``obj.name`` with its required arguments from `VALUES` (and ``extra``)."""
    method = getattr(obj, name)
    values = {**VALUES, **extra}
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for param in inspect.signature(method).parameters.values():
        if param.default is not param.empty or param.kind in (
            param.VAR_POSITIONAL,
            param.VAR_KEYWORD,
        ):
            continue
        assert param.name in values, f"add a value for {name}({param.name}=...)"
        if param.kind is param.POSITIONAL_ONLY:
            args.append(values[param.name])
        else:
            kwargs[param.name] = values[param.name]
    return functools.partial(method, *args, **kwargs)


def assert_closed_error(error: BaseException | None, what: str, name: str) -> None:
    assert isinstance(error, MemoryClosedError), f"{name}: {error!r}"
    assert type(error) is MemoryClosedError, name  # not wrapped in another error
    assert isinstance(error, StoreError | CtxBudgetError)
    message = str(error)
    assert "\n" not in message, name
    assert f"this {what} (" in message and "was closed" in message, message
    assert f"open a new {what}" in message, message


def closed_error_of(call: Callable[[], Any]) -> BaseException | None:
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - the test reports whatever was raised
        return exc
    return None


async def closed_error_of_async(call: Callable[[], Any]) -> BaseException | None:
    try:
        await call()
    except Exception as exc:  # noqa: BLE001 - the test reports whatever was raised
        return exc
    return None


@pytest.fixture
def memory(open_store: StoreFactory) -> Iterator[ContextMemory]:
    """A memory on the backend's store, with a little of everything, still open."""
    memory = ContextMemory(store=open_store())
    memory.add_messages("s1", [("user", "hello"), ("assistant", "hi")], user_id="u1")
    memory.pin("s1", "User is vegetarian", id="p1")
    memory.flush()
    yield memory
    memory.close()


def test_the_closed_error_is_a_store_error_exported_at_the_top() -> None:
    assert issubclass(MemoryClosedError, StoreError)
    assert issubclass(MemoryClosedError, RuntimeError)


def test_every_public_method_of_a_closed_memory_raises_the_closed_error(
    memory: ContextMemory,
) -> None:
    context = memory.assemble("s1", "hello", budget=300)
    memory.close()
    methods = public_methods(ContextMemory)
    assert {"assemble", "add_documents", "record_context", "aassemble", "arun"} <= set(methods)
    sync = [n for n in methods if not inspect.iscoroutinefunction(getattr(ContextMemory, n))]
    for name in sync:
        error = closed_error_of(call_of(memory, name, {"context": context}))
        assert_closed_error(error, "ContextMemory", name)

    async def each_async() -> None:
        for name in sorted(set(methods) - set(sync)):
            error = await closed_error_of_async(call_of(memory, name, {"context": context}))
            assert_closed_error(error, "ContextMemory", name)

    asyncio.run(each_async())
    # Its properties hand out parts that reach Chroma only through the closed store.
    batch = functools.partial(memory.writes.messages, user_id=None, progress=False, batch_size=8)
    for name, call in [
        ("writes.messages", lambda: batch("s1", [("user", "late")])),
        ("inclusion_log.records", lambda: memory.inclusion_log.records("s1")),
    ]:
        assert type(closed_error_of(call)) is MemoryClosedError, name


def test_closing_again_does_nothing_sync_or_async(memory: ContextMemory) -> None:
    memory.close()
    memory.close()
    asyncio.run(memory.aclose())
    with memory:
        pass
    assert_closed_error(closed_error_of(lambda: memory.history("s1")), "ContextMemory", "history")


def test_aclose_closes_and_the_data_stays_for_a_new_memory(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    async def run() -> None:
        memory = ContextMemory(tmp_path / "m", embedder=embedder, inclusion_log=False)
        await memory.aadd_message("s1", "user", "kept", id="m1", user_id="u1")
        await memory.aclose()
        await memory.aclose()
        error = await closed_error_of_async(lambda: memory.ahistory("s1"))
        assert_closed_error(error, "ContextMemory", "ahistory")

    asyncio.run(run())
    with ContextMemory(tmp_path / "m", embedder=embedder, inclusion_log=False) as again:
        assert [r.text for r in again.history("s1")] == ["kept"]


def test_every_method_of_a_closed_store_raises_the_closed_error(open_store: StoreFactory) -> None:
    store = open_store()
    store.add(VALUES["records"])
    store.close()
    store.close()
    for name in public_methods(ChromaStore):
        error = closed_error_of(call_of(store, name, {}))
        assert_closed_error(error, "ChromaStore", name)
    # What the store's properties hand out reaches Chroma only through the closed store.
    error = closed_error_of(lambda: store.logs.read("default", "s1"))
    assert_closed_error(error, "ChromaStore", "logs.read")


def test_a_memory_whose_store_was_closed_raises_the_stores_closed_error(
    memory: ContextMemory,
) -> None:
    memory.store.close()
    for name, call in [
        ("history", lambda: memory.history("s1")),
        ("assemble", lambda: memory.assemble("s1", "hello", budget=300)),
        ("delete_session", lambda: memory.delete_session("s1")),
    ]:
        assert_closed_error(closed_error_of(call), "ChromaStore", name)


# -- cancelled calls -------------------------------------------------------------------------


class GatedStore(ChromaStore):
    """A real store whose ``delete_session`` waits at a gate: a test cancels it mid-way."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.entered = threading.Semaphore(0)
        self.gate = threading.Event()
        self.finished = threading.Semaphore(0)

    def delete_session(self, *, namespace: str, session_id: str) -> int:
        self.entered.release()
        self.gate.wait()
        try:
            return super().delete_session(namespace=namespace, session_id=session_id)
        finally:
            self.finished.release()


@pytest.fixture
async def gated(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path, embedder: OnnxEmbedder
) -> AsyncIterator[tuple[ContextMemory, GatedStore]]:
    """A memory (write-behind as its backend's default) over a `GatedStore`, with messages."""
    if backend == "server":
        server: ChromaServer = request.getfixturevalue("chroma_server")
        name = f"t-{uuid.uuid4().hex[:16]}"
        store = GatedStore(url=server.url, embedder=embedder, collection=name)
    else:
        store = GatedStore(tmp_path / "chroma", embedder=embedder)
    memory = ContextMemory(store=store, inclusion_log=False)
    for session in ("s1", "x1", "x2"):
        await memory.aadd_messages(session, [("user", "one"), ("assistant", "two")], user_id="u1")
    await memory.aflush()
    yield memory, store
    store.gate.set()
    await memory.aclose()


async def test_a_cancelled_delete_ends_before_the_callers_next_call_starts(
    gated: tuple[ContextMemory, GatedStore],
) -> None:
    memory, store = gated
    task = asyncio.create_task(memory.adelete_session("s1"))
    await asyncio.to_thread(store.entered.acquire)  # it runs on a worker, held at the gate
    task.cancel()
    await asyncio.sleep(0)  # the cancellation reaches the call
    if not task.done():  # it waits for its worker (the rule): let the worker go on
        store.gate.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    await memory.aadd_message("s1", "user", "after the cancel", id="new", user_id="u1")
    await memory.aflush()
    store.gate.set()  # a delete still running on its own would only now go on
    await asyncio.to_thread(store.finished.acquire)  # the delete has ended, either way
    assert [r.text for r in await memory.ahistory("s1")] == ["after the cancel"]
    assert [r.text for r in memory.history("s1")] == ["after the cancel"]


async def test_a_cancelled_call_that_had_not_started_has_no_effect(
    gated: tuple[ContextMemory, GatedStore],
) -> None:
    memory, store = gated
    busy = [asyncio.create_task(memory.adelete_session(s)) for s in ("x1", "x2")]
    for _ in busy:  # every worker is held at the gate: the next call waits in the queue
        await asyncio.to_thread(store.entered.acquire)
    queued = asyncio.create_task(memory.adelete_session("s1"))
    await asyncio.sleep(0)
    queued.cancel()
    with pytest.raises(asyncio.CancelledError):
        await queued
    store.gate.set()
    assert await asyncio.gather(*busy) == [2, 2]
    assert [r.text for r in await memory.ahistory("s1")] == ["one", "two"]
