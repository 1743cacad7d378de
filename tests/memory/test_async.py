"""The async API returns what the sync API returns, without blocking the event loop.

A property, embedded and on a Chroma server: random sequences of writes and reads (messages
and batches in two sessions of two users, pins, clears and deletions; assemblies, candidates,
searches and histories) applied to one memory through the sync methods and to another, on a
store of its own, through their ``a``-twins; every read gives the same answer. Then: 20
conversations assembled at once on one loop get what they get one by one, the loop keeps
turning while a call runs, the caller's context reaches the call, and a closed memory's async
call fails as its sync call does.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from ctxbudget import ContextMemory
from ctxbudget.core.report import AssembledContext
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.memory.reading.candidates import Candidates
from ctxbudget.store.chroma_store import ChromaStore

WORDS = "Lisbon Porto train budget dinner museum river coffee hotel ferry beach market".split()
SESSIONS = [("s1", "alice"), ("s2", "bob")]
T0 = 1_700_000_000.0

texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join)
sessions = st.sampled_from(SESSIONS)
operations = st.one_of(
    st.tuples(st.just("add"), sessions, st.sampled_from(["user", "assistant"]), texts),
    st.tuples(st.just("add_batch"), sessions, st.lists(texts, min_size=1, max_size=3)),
    st.tuples(st.just("pin"), sessions, texts),
    st.tuples(st.just("clear"), sessions),
    st.tuples(st.just("delete_session"), sessions),
    st.tuples(st.just("delete_user"), sessions),
    st.tuples(st.just("assemble"), sessions, texts, st.sampled_from([60, 200, 1000])),
    st.tuples(st.just("candidates"), sessions, texts),
    st.tuples(st.just("search"), sessions, texts),
    st.tuples(st.just("history"), sessions),
)


def _seen(value: Any) -> Any:
    """What a read returned, comparable across two memories (no generations, no timings)."""
    if isinstance(value, AssembledContext):
        pruned = sorted((p.item.id, p.reason.value) for p in value.pruned)
        return (value.included_ids, value.to_messages(), value.tokens_used, pruned)
    if isinstance(value, Candidates):
        return [(i.id, i.text, round(i.score, 9)) for i in value.items]
    if isinstance(value, list):
        return [_seen(v) for v in value]
    record = getattr(value, "record", None) or getattr(getattr(value, "hit", None), "record", None)
    if record is not None:
        return (record.id, record.text, round(getattr(value, "score", 0.0), 9))
    if hasattr(value, "id") and hasattr(value, "text"):
        return (value.id, value.text, value.role)
    return value


class Driver:
    """Applies one operation to a memory, through its sync or its async methods."""

    def __init__(self, memory: ContextMemory, *, use_async: bool) -> None:
        self.memory = memory
        self.use_async = use_async
        self.step = 0

    async def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        if self.use_async:
            return await getattr(self.memory, f"a{name}")(*args, **kwargs)
        return getattr(self.memory, name)(*args, **kwargs)

    async def apply(self, op: tuple[Any, ...]) -> Any:
        self.step += 1
        kind, (session, user) = op[0], op[1]
        stamp = T0 + self.step
        if kind == "add":
            return await self.call(
                "add_message",
                session,
                op[2],
                op[3],
                id=f"m{self.step}",
                user_id=user,
                timestamp=stamp,
            )
        if kind == "add_batch":
            batch = [
                {"role": "user", "content": t, "id": f"m{self.step}-{n}", "timestamp": stamp}
                for n, t in enumerate(op[2])
            ]
            return await self.call("add_messages", session, batch, user_id=user, progress=False)
        if kind == "pin":
            return await self.call("pin", session, op[2], id=f"p{self.step}", user_id=user)
        if kind == "clear":
            return await self.call("clear", session)
        if kind == "delete_session":
            return await self.call("delete_session", session)
        if kind == "delete_user":
            return await self.call("delete_user", user)
        if kind == "assemble":
            return await self.call("assemble", session, op[2], budget=op[3], user_id=user)
        if kind == "candidates":
            return await self.call("candidates", session, op[2], budget=300, user_id=user)
        if kind == "search":
            return await self.call("search", op[2], kinds=None, session_id=session, k=5)
        return await self.call("history", session)


@pytest.fixture
def memories(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path, embedder: OnnxEmbedder
) -> Iterator[list[ContextMemory]]:
    """Two memories, each on a store of its own: two folders, or two collections of a server."""
    opened: list[ContextMemory] = []

    def open_one(name: str) -> ContextMemory:
        if backend == "server":
            server = request.getfixturevalue("chroma_server")
            collection = f"async-{name}-{uuid.uuid4().hex[:12]}"
            store = ChromaStore(url=server.url, collection=collection, embedder=embedder)
            memory = ContextMemory(store=store, inclusion_log=False)
        else:
            memory = ContextMemory(tmp_path / name, embedder=embedder, inclusion_log=False)
        opened.append(memory)
        return memory

    yield [open_one("sync"), open_one("async")]
    for memory in opened:
        memory.close()


def _examples(count: int) -> Any:
    """Hypothesis settings of the store properties: ``count`` examples, no shrinking (slow)."""
    return settings(
        max_examples=count,
        deadline=None,
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target],
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


@_examples(12)
@given(ops=st.lists(operations, min_size=1, max_size=12))
def test_the_async_api_returns_what_the_sync_api_returns(
    memories: list[ContextMemory], ops: list[tuple[Any, ...]]
) -> None:
    sync, aio = memories
    for memory in memories:  # every example starts from empty stores
        for _, user in SESSIONS:
            memory.delete_user(user)
        for session, _ in SESSIONS:
            memory.delete_session(session)

    async def run() -> None:
        plain, awaited = Driver(sync, use_async=False), Driver(aio, use_async=True)
        for op in ops:
            assert _seen(await awaited.apply(op)) == _seen(await plain.apply(op)), op

    asyncio.run(run())


ONE_SESSION = [SESSIONS[0]]
one_session_operations = st.one_of(
    st.tuples(st.just("add"), st.sampled_from(ONE_SESSION), st.sampled_from(["user"]), texts),
    st.tuples(st.just("add_batch"), st.sampled_from(ONE_SESSION), st.lists(texts, max_size=3)),
    st.tuples(st.just("pin"), st.sampled_from(ONE_SESSION), texts),
    st.tuples(st.just("clear"), st.sampled_from(ONE_SESSION)),
    st.tuples(st.just("delete_session"), st.sampled_from(ONE_SESSION)),
    st.tuples(st.just("assemble"), st.sampled_from(ONE_SESSION), texts, st.just(200)),
    st.tuples(st.just("candidates"), st.sampled_from(ONE_SESSION), texts),
    st.tuples(st.just("history"), st.sampled_from(ONE_SESSION)),
)


@_examples(8)
@given(ops=st.lists(one_session_operations, min_size=2, max_size=10))
def test_a_sessions_async_calls_made_at_once_apply_in_call_order(
    memories: list[ContextMemory], ops: list[tuple[Any, ...]]
) -> None:
    """Called side by side (tasks gathered), a session's calls answer as if awaited in turn.

    Until 2026-12-02 the worker threads ran them in any order: gathered adds were stored out
    of order, and a history called after them could miss some.
    """
    sync, aio = memories
    for memory in memories:
        for session, _ in SESSIONS:
            memory.delete_session(session)

    async def run() -> None:
        plain, gathered = Driver(sync, use_async=False), Driver(aio, use_async=True)
        expected = [_seen(await plain.apply(op)) for op in ops]
        tasks = [asyncio.create_task(gathered.apply(op)) for op in ops]
        got = [_seen(result) for result in await asyncio.gather(*tasks)]
        assert got == expected, ops

    asyncio.run(run())


def test_every_async_twin_takes_its_sync_methods_arguments() -> None:
    twins = [n for n in dir(ContextMemory) if n.startswith("a") and hasattr(ContextMemory, n[1:])]
    wanted = {"aadd_message", "aadd_messages", "aassemble", "acandidates", "asearch", "aflush"}
    assert wanted | {"aclose", "ahistory", "adelete_session", "adelete_user"} <= set(twins)
    for name in twins:
        twin, sync = getattr(ContextMemory, name), getattr(ContextMemory, name[1:])
        if not inspect.iscoroutinefunction(twin):
            continue
        assert inspect.signature(twin) == inspect.signature(sync), name


async def test_twenty_conversations_at_once_get_what_they_get_one_by_one(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    memory = ContextMemory(tmp_path / "m", embedder=embedder, inclusion_log=False)
    try:
        for n in range(20):
            lines = [(("user", "assistant")[i % 2], f"{WORDS[(n + i) % 12]} {i}") for i in range(6)]
            memory.add_messages(f"c{n}", lines, user_id=f"u{n}", progress=False)
        memory.flush()
        questions = [(f"c{n}", f"what about {WORDS[n % 12]}?") for n in range(20)]
        one_by_one = [_seen(memory.assemble(s, q, budget=120)) for s, q in questions]
        at_once = await asyncio.gather(*(memory.aassemble(s, q, budget=120) for s, q in questions))
        assert [_seen(c) for c in at_once] == one_by_one
    finally:
        await memory.aclose()


async def test_the_loop_turns_while_a_call_runs(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    memory = ContextMemory(tmp_path / "m", embedder=embedder, inclusion_log=False)
    try:
        texts = [f"{WORDS[i % 12]} and {WORDS[(i * 5) % 12]} number {i}" for i in range(300)]
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        running = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        before = ticks
        await memory.aadd_messages("s1", [("user", t) for t in texts], progress=False)
        await memory.aflush()
        running.cancel()
        assert ticks - before > 10  # the loop ran other tasks while 300 messages were stored
        assert len(await memory.ahistory("s1")) == 300
    finally:
        await memory.aclose()


async def test_the_callers_context_reaches_the_call(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("request", default="none")
    memory = ContextMemory(tmp_path / "m", embedder=embedder, inclusion_log=False)
    try:
        var.set("request-7")
        assert await memory.arun(var.get) == "request-7"
    finally:
        await memory.aclose()
