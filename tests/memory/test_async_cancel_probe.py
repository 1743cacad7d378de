"""Async calls of one `ContextMemory` cancelled, timed out, closed under them and run at once.

A batch timed out and retried with the same ids is stored once; every ``a``-method (the keyed
values' too) on a closed memory raises `MemoryClosedError`, also the calls still waiting for
their session's turn when the memory closes; sessions run side by side with cancels keep their
own messages; a timed-out ``aflush`` still leaves every acknowledged message readable by a new
memory on the folder; no thread outlives ``aclose``; mixed calls cancelled at random and then
closed lose nothing acknowledged and log no warning; a memory used from one event loop per call
(``asyncio.run`` each time) keeps every acknowledged message. Real parts: an embedded Chroma in
``tmp_path``, the default embedder.
"""

from __future__ import annotations

import asyncio
import gc
import random
import threading
from collections import Counter
from pathlib import Path

import pytest

from ctxbudget import MemoryClosedError
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.memory.context import ContextMemory


async def test_a_cancelled_then_retried_batch_with_ids_is_stored_once(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    memory = ContextMemory(tmp_path / "chroma", embedder=embedder, inclusion_log=False)
    expected: list[str] = []
    for n in range(16):
        ids = [f"m{n}-{j}" for j in range(3)]
        batch = [
            {"role": "user", "text": f"batch {n} line {j} about ferries", "id": i}
            for j, i in enumerate(ids)
        ]
        try:
            await asyncio.wait_for(
                memory.aadd_messages("s1", batch), timeout=(0, 0.0005, 0.003, 0.02)[n % 4]
            )
        except TimeoutError:
            await asyncio.wait_for(memory.aadd_messages("s1", batch), 60)
        expected += ids
    await asyncio.wait_for(memory.aclose(), 60)
    reopened = ContextMemory(tmp_path / "chroma", embedder=embedder, inclusion_log=False)
    stored = [r.id for r in reopened.history("s1")]
    reopened.close()
    assert [i for i, c in Counter(stored).items() if c > 1] == []
    assert stored == expected


async def test_every_a_method_on_a_closed_memory_raises_memory_closed(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    memory = ContextMemory(tmp_path / "chroma", embedder=embedder, inclusion_log=False)
    await memory.aadd_message("s1", "user", "hello", id="m1")
    await memory.aclose()
    calls = [
        memory.aadd_message("s1", "user", "x"),
        memory.aadd_messages("s1", [("user", "x")]),
        memory.aassemble("s1", "x"),
        memory.acandidates("s1", "x"),
        memory.asearch("x"),
        memory.ahistory("s1"),
        memory.aflush(),
        memory.apin("s1", "fact"),
        memory.aunpin("s1", "f1"),
        memory.aclear("s1"),
        memory.adelete_session("s1"),
        memory.adelete_user("u1"),
        memory.adelete_messages("s1", ["m1"]),
        memory.areplace_message("s1", "m1", "y"),
        memory.arun(lambda: 1),
        memory.aput_value(("ns",), "k", {"a": 1}),
        memory.aget_value(("ns",), "k"),
    ]
    for call in calls:
        with pytest.raises(MemoryClosedError):
            await asyncio.wait_for(call, 30)
    await memory.aclose()  # again: nothing to do


async def test_calls_waiting_their_turn_when_the_memory_closes_raise_memory_closed(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    memory = ContextMemory(tmp_path / "chroma", embedder=embedder, inclusion_log=False)
    texts = [f"queued {n} about ferries" for n in range(20)]
    tasks = [
        asyncio.ensure_future(memory.aadd_message("s1", "user", t, id=f"q{n}"))
        for n, t in enumerate(texts)
    ]
    reads = [asyncio.ensure_future(memory.aassemble("s1", "ferries", budget=300)) for _ in range(4)]
    await asyncio.sleep(0)
    closing = asyncio.ensure_future(memory.aclose())
    ended = await asyncio.wait_for(asyncio.gather(*tasks, *reads, return_exceptions=True), 60)
    await asyncio.wait_for(closing, 60)
    odd = [
        e for e in ended if isinstance(e, BaseException) and not isinstance(e, MemoryClosedError)
    ]
    assert odd == []
    acknowledged = [f"q{n}" for n, e in enumerate(ended[:20]) if isinstance(e, str)]
    reopened = ContextMemory(tmp_path / "chroma", embedder=embedder, inclusion_log=False)
    stored = [r.id for r in reopened.history("s1")]
    reopened.close()
    assert [i for i in acknowledged if i not in stored] == []
    assert len(stored) == len(set(stored))


async def test_many_sessions_at_once_with_cancels_keep_their_own_messages(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    memory = ContextMemory(tmp_path / "chroma", embedder=embedder, inclusion_log=False)
    acknowledged: dict[str, list[str]] = {f"s{k}": [] for k in range(6)}

    async def talk(session: str) -> None:
        for n in range(6):
            mid = f"{session}-m{n}"
            task = asyncio.ensure_future(
                memory.aadd_message(session, "user", f"{session} says {n} about ferries", id=mid)
            )
            if n % 3 == 1:
                await asyncio.sleep(0)
                task.cancel()
            try:
                await task
                acknowledged[session].append(mid)
            except asyncio.CancelledError:
                pass
            ctx = await memory.aassemble(session, "ferries", budget=400)
            foreign = [
                i.record_id
                for i in ctx.included
                if i.record_id and i.scope and i.scope[0] == "session" and i.scope[1] != session
            ]
            own = [i for i in ctx.included_ids if "-m" in i and not i.startswith(session + "-")]
            assert own == [] and foreign == []

    await asyncio.wait_for(asyncio.gather(*(talk(s) for s in acknowledged)), 120)
    await memory.aclose()
    reopened = ContextMemory(tmp_path / "chroma", embedder=embedder, inclusion_log=False)
    for session, ids in acknowledged.items():
        stored = [r.id for r in reopened.history(session)]
        assert [i for i in ids if i not in stored] == []
        assert all(i.startswith(session + "-") for i in stored)
        assert len(stored) == len(set(stored))
    reopened.close()


async def test_a_timed_out_flush_still_leaves_every_acknowledged_message_readable(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    memory = ContextMemory(tmp_path / "chroma", embedder=embedder, inclusion_log=False)
    ids: list[str] = []
    for n in range(10):
        ids.append(await memory.aadd_message("s1", "user", f"turn {n} about ferries", id=f"m{n}"))
    try:
        await asyncio.wait_for(memory.aflush(), 0.0001)
    except TimeoutError:
        pass
    other = ContextMemory(tmp_path / "chroma", embedder=embedder, inclusion_log=False)
    try:
        stored = [r.id for r in other.history("s1")]
    finally:
        other.close()
        await memory.aclose()
    assert stored == ids


async def test_no_thread_outlives_aclose_after_cancelled_calls(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    await asyncio.sleep(0)
    before = set(threading.enumerate())
    memory = ContextMemory(tmp_path / "chroma", embedder=embedder)
    for n in range(6):
        calls = [
            asyncio.ensure_future(memory.aadd_message(f"s{n % 2}", "user", f"t {n} {j} ferries"))
            for j in range(3)
        ]
        calls.append(asyncio.ensure_future(memory.aassemble(f"s{n % 2}", "ferries", budget=300)))
        calls.append(asyncio.ensure_future(memory.asearch("ferries", kinds=None)))
        await asyncio.sleep(0.001 * n)
        for c in calls[::2]:
            c.cancel()
        await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), 60)
    await asyncio.wait_for(memory.aclose(), 60)
    left = [t.name for t in set(threading.enumerate()) - before if t.is_alive()]
    assert left == []


async def test_mixed_calls_cancelled_at_random_then_closed_lose_nothing_acknowledged(
    tmp_path: Path, embedder: OnnxEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    rng = random.Random(7)
    memory = ContextMemory(tmp_path / "chroma", embedder=embedder, inclusion_log=False)
    sessions = ["s0", "s1", "s2"]
    since_delete: dict[str, list[str]] = {s: [] for s in sessions}
    errors: list[BaseException] = []
    counter = iter(range(10_000))

    async def one(session: str) -> None:
        for _ in range(12):
            kind = rng.choice(["add", "add", "add", "many", "delete", "assemble", "clear"])
            n = next(counter)
            if kind == "add":
                call = memory.aadd_message(
                    session, "user", f"{session} note {n} ferries", id=f"{session}-{n}"
                )
                ids = [f"{session}-{n}"]
            elif kind == "many":
                ids = [f"{session}-{n}-{j}" for j in range(3)]
                call = memory.aadd_messages(
                    session, [{"role": "user", "text": f"{session} {i}", "id": i} for i in ids]
                )
            elif kind in ("delete", "clear"):
                since_delete[session] = []
                ids = []
                call = (
                    memory.adelete_session(session) if kind == "delete" else memory.aclear(session)
                )
            else:
                ids = []
                call = memory.aassemble(session, "ferries", budget=300)
            task = asyncio.ensure_future(call)
            for _ in range(rng.randrange(4)):
                await asyncio.sleep(0)
            if rng.random() < 0.4:
                task.cancel()
            try:
                await task
                since_delete[session].extend(ids)
            except asyncio.CancelledError:
                pass
            except MemoryClosedError:
                return
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)

    runs = [asyncio.ensure_future(one(s)) for s in sessions]
    await asyncio.sleep(0.3)
    await asyncio.wait_for(memory.aclose(), 60)
    await asyncio.wait_for(asyncio.gather(*runs), 60)
    assert errors == []
    reopened = ContextMemory(tmp_path / "chroma", embedder=embedder, inclusion_log=False)
    for session in sessions:
        stored = [r.id for r in reopened.history(session)]
        assert len(stored) == len(set(stored)), session
        assert all(i.startswith(session + "-") for i in stored), session
        assert [i for i in since_delete[session] if i not in stored] == [], session
    reopened.close()
    gc.collect()
    await asyncio.sleep(0.05)
    noisy = [r.getMessage() for r in caplog.records if r.levelname in ("WARNING", "ERROR")]
    assert noisy == []


def test_a_memory_used_from_one_event_loop_per_call_keeps_every_acknowledged_message(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    memory = ContextMemory(tmp_path / "chroma", embedder=embedder, inclusion_log=False)
    acknowledged: list[str] = []
    for n in range(6):

        async def turn(n: int = n) -> None:
            call = memory.aadd_message("s1", "user", f"turn {n} about ferries", id=f"m{n}")
            try:
                acknowledged.append(await asyncio.wait_for(call, (0.0005, 30)[n % 2]))
            except TimeoutError:
                acknowledged.append(
                    await memory.aadd_message("s1", "user", f"turn {n} about ferries", id=f"m{n}")
                )
            await memory.aassemble("s1", "ferries", budget=300)

        asyncio.run(turn())
    asyncio.run(memory.aclose())
    reopened = ContextMemory(tmp_path / "chroma", embedder=embedder, inclusion_log=False)
    stored = [r.id for r in reopened.history("s1")]
    reopened.close()
    assert stored == acknowledged
