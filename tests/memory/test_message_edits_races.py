"""Edits while others read: after `replace_message` returned, nobody offers the old text.

Two `ContextMemory` objects on one folder or one Chroma server (a reader thread assembling while
the writer replaces), a delete and a re-add of the same id, replaces of messages still queued in
a write-behind, two processes on one server (``multiprocessing`` spawn), and cancelled
``areplace_message`` calls (either text, never both or none). Real parts: embedded Chroma and a
Chroma server, the default embedder, tiktoken.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
import time
from typing import Any

import pytest

from ctxbudget import ContextMemory
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.store.chroma_store import ChromaStore
from ctxbudget.testing import ChromaServer
from tests.conftest import StoreFactory

QUERY = "what is my gym locker code?"
SMALL = MemoryConfig(recent_messages=1)  # older turns are searched in the copy held in memory


def version(n: int) -> str:
    return f"My locker code at the gym is v{n:03d}x"


def seen(context: Any) -> str:
    return "\n".join(str(m["content"]) for m in context.to_messages())


def seed(memory: ContextMemory, session: str = "gym") -> None:
    memory.add_messages(
        session,
        [
            {"id": "q1", "role": "user", "text": version(0)},
            {"id": "a1", "role": "assistant", "text": "Noted, I will remember it."},
            {"id": "q2", "role": "user", "text": "Thanks, see you tomorrow."},
        ],
        user_id="ana",
    )
    memory.flush()


def test_a_reader_never_offers_a_text_replaced_before_its_call_began(
    open_store: StoreFactory,
) -> None:
    writer = ContextMemory(store=open_store())
    reader = ContextMemory(store=open_store(), config=SMALL)
    seed(writer)
    reader.assemble("gym", QUERY, budget=2000)  # the reader holds the session in memory
    done = threading.Event()
    current = [0]  # the last version whose replace returned
    problems: list[str] = []

    def read() -> None:
        while not done.is_set():
            floor = current[0]
            try:
                texts = [
                    seen(reader.assemble("gym", QUERY, budget=2000, user_id="ana")),
                    "\n".join(
                        i.text for i in reader.candidates("gym", QUERY, budget=2000).retrieved
                    ),
                ]
            except Exception as exc:  # noqa: BLE001 - any error of a read is the failure
                problems.append(f"read failed: {exc!r}")
                return
            for text in texts:  # each call on its own: a replace may land between two
                stale = [n for n in range(floor) if version(n) in text]
                if stale:
                    problems.append(f"v{stale} offered after v{floor} was stored: {text!r}")
                if sum(version(n) in text for n in range(13)) > 1:
                    problems.append(f"two versions offered at once: {text!r}")

    thread = threading.Thread(target=read)
    thread.start()
    try:
        for n in range(1, 13):
            writer.replace_message("gym", "q1", version(n))
            current[0] = n
            time.sleep(0.02)
    finally:
        done.set()
        thread.join(60)
    assert problems == []
    assert version(12) in seen(reader.assemble("gym", QUERY, budget=2000))
    for memory in (writer, reader):
        memory.close()


def test_delete_then_add_the_same_id_is_a_new_message_offered_once(
    open_store: StoreFactory,
) -> None:
    writer = ContextMemory(store=open_store())
    reader = ContextMemory(store=open_store(), config=SMALL)
    seed(writer)
    seqs = {r.id: r.seq for r in reader.history("gym")}
    assert version(0) in seen(reader.assemble("gym", QUERY, budget=2000))
    assert writer.delete_messages("gym", ["q1"]) == 1
    assert version(0) not in seen(reader.assemble("gym", QUERY, budget=2000))
    writer.add_message("gym", "user", version(1), id="q1", user_id="ana")  # not flushed
    for memory in (reader, writer):  # the writer reads its own queue; the reader after flush
        writer.flush()
        context = memory.assemble("gym", QUERY, budget=2000)
        text = seen(context)
        assert version(0) not in text and text.count(version(1)) == 1
        listed = [i.id for i in context.included] + [p.item.id for p in context.pruned]
        assert listed.count("q1") == 1
        history = memory.history("gym")
        assert [r.id for r in history] == ["a1", "q2", "q1"]
        assert history[-1].seq > seqs["q2"]  # type: ignore[operator]
    for memory in (writer, reader):
        memory.close()


def test_a_message_still_queued_in_a_write_behind_is_stored_then_replaced(
    open_store: StoreFactory,
) -> None:
    store = open_store()
    one = ContextMemory(store=store)
    other = ContextMemory(store=open_store())
    # The same memory: replace right after add, no flush.
    one.add_messages("gym", [{"id": "q1", "role": "user", "text": version(0)}], user_id="ana")
    assert one.replace_message("gym", "q1", version(1)) == "q1"
    # Another memory of this process: its acknowledged messages are stored first too.
    other.add_messages("gym", [{"id": "q2", "role": "user", "text": version(2)}], user_id="ana")
    assert one.replace_message("gym", "q2", version(3), user_id="ana") == "q2"
    one.flush()
    other.flush()
    for memory in (one, other):
        assert [(r.id, r.text) for r in memory.history("gym")] == [
            ("q1", version(1)),
            ("q2", version(3)),
        ]
        text = seen(memory.assemble("gym", QUERY, budget=2000))
        assert version(0) not in text and version(2) not in text
    for memory in (one, other):
        memory.close()


def test_entities_read_from_a_replaced_message_go_with_its_old_text(
    open_store: StoreFactory,
) -> None:
    config = MemoryConfig(entities=True, recent_messages=1)
    writer = ContextMemory(store=open_store(), config=config)
    reader = ContextMemory(store=open_store(), config=config)
    writer.add_messages(
        "job",
        [
            ("user", "My sister Marguerite Okonkwo works at Zanzibar Lighthouse Company."),
            ("assistant", "Good to know."),
            ("user", "Thanks."),
        ],
        user_id="ana",
    )
    writer.flush()
    first = writer.history("job")[0].id
    names = [e.name for e in reader.entities("job")]
    assert any("Marguerite" in n for n in names), names
    writer.replace_message("job", first, "My sister Beatrix Halvorsen works at Quorum Mills.")
    for memory in (reader, writer):
        names = [e.name for e in memory.entities("job")]
        assert not any("Marguerite" in n or "Zanzibar" in n for n in names), names
        offered = memory.candidates("job", "Where does my sister work?", budget=2000)
        text = "\n".join(i.text for i in [*offered.entities, *offered.retrieved, *offered.history])
        assert "Marguerite" not in text and "Zanzibar" not in text
    for memory in (writer, reader):
        memory.close()


# -- cancelled async edits -------------------------------------------------------------------


@pytest.mark.parametrize("timeout", [0.0, 0.001, 0.005, 0.02, 0.05])
async def test_a_cancelled_areplace_leaves_one_text_never_both_or_none(
    open_store: StoreFactory, timeout: float
) -> None:
    memory = ContextMemory(store=open_store())
    reader = ContextMemory(store=open_store(), config=SMALL)
    seed(memory)
    stored = version(0)
    for n in range(1, 6):
        call = memory.areplace_message("gym", "q1", version(n))
        try:
            await asyncio.wait_for(call, timeout)
            stored = version(n)
        except TimeoutError:
            pass
        # Cancelled: it had no effect, or it ended before wait_for returned.
        (q1,) = [r for r in await memory.ahistory("gym") if r.id == "q1"]
        assert q1.text in (stored, version(n))
        stored = q1.text
        for each in (memory, reader):
            text = seen(await each.aassemble("gym", QUERY, budget=2000))
            assert text.count(stored) == 1
            others = [version(k) for k in range(n + 1) if version(k) != stored]
            assert not any(o in text for o in others), text
    task = asyncio.ensure_future(memory.areplace_message("gym", "q1", version(99)))
    task.cancel()  # before it started: it never runs
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [r.text for r in await memory.ahistory("gym") if r.id == "q1"] == [stored]
    await memory.aclose()
    reader.close()


# -- two processes on one server ---------------------------------------------------------------


def assemble_in_a_loop(url: str, collection: str, ready: Any, replaced: Any, out: Any) -> None:
    """A spawned process: assemble until told to stop; report what it saw after the replace."""
    memory = ContextMemory(
        store=ChromaStore(url=url, collection=collection, embedder=OnnxEmbedder()), config=SMALL
    )
    problems = []
    seen_new = False
    memory.assemble("gym", QUERY, budget=2000)
    ready.set()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        after = replaced.is_set()  # read before the call starts
        text = seen(memory.assemble("gym", QUERY, budget=2000, user_id="ana"))
        if after and version(0) in text:
            problems.append(text)
        if after:
            seen_new = version(1) in text
            if seen_new:
                break
    memory.close()
    out.put((problems, seen_new))


@pytest.mark.integration
def test_another_process_never_offers_the_old_text_after_the_replace(
    chroma_server: ChromaServer, embedder: OnnxEmbedder
) -> None:
    collection = f"edits-{time.monotonic_ns()}"
    writer = ContextMemory(
        store=ChromaStore(url=chroma_server.url, collection=collection, embedder=embedder)
    )
    seed(writer)
    spawn = multiprocessing.get_context("spawn")
    ready, replaced, out = spawn.Event(), spawn.Event(), spawn.Queue()
    child = spawn.Process(
        target=assemble_in_a_loop, args=(chroma_server.url, collection, ready, replaced, out)
    )
    child.start()
    try:
        assert ready.wait(120), "the reading process did not start"
        time.sleep(0.2)  # it reads in a loop, holding the session in memory
        writer.replace_message("gym", "q1", version(1))
        replaced.set()
        problems, seen_new = out.get(timeout=120)
    finally:
        child.join(30)
        if child.is_alive():
            child.kill()
        writer.close()
    assert problems == []
    assert seen_new
