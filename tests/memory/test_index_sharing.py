"""Calls on one session share its index in memory: never read half extended, never kept broken.

A `ContextMemory` keeps each session's index (`SessionIndexes`) and extends it with the
messages stored since. Two calls on one session (a web server's threads, an async app's
workers) and an interrupted call (Ctrl-C, a failed read) must not leave a call reading an
index whose records, rows and words are of different lengths: before 2026-11-30, 12 in 1,900
calls of three threads assembling one session while a fourth added messages failed with an
``IndexError`` or a broadcast ``ValueError``, and a Ctrl-C in the middle of an extension left
the index broken for every later call on the session.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.reading.lexical import LexicalIndex
from ctxbudget.memory.reading.session_index import SessionIndex
from ctxbudget.store.chroma_store import ChromaStore

QUERY = "which cello did Ana buy on sunday"


@pytest.fixture
def memory(store: ChromaStore) -> Iterator[ContextMemory]:
    mem = ContextMemory(store=store, write_behind=False)
    mem.add_messages(
        "s1",
        [
            ("user" if n % 2 == 0 else "assistant", f"turn {n} about gardens and trains")
            for n in range(40)
        ],
        progress=False,
    )
    mem.assemble("s1", QUERY, budget=400)  # the session's index is built and kept
    yield mem
    mem.close()


def test_a_call_never_reads_an_index_another_call_is_extending(
    memory: ContextMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The reading call has its index and is about to search it; then a message arrives and
    # another call extends the index, stopping half way (the records in, the words not).
    read_in, read_go, extend_in, extend_go = (threading.Event() for _ in range(4))
    nearest, add = SessionIndex.nearest_many, LexicalIndex.add

    def paused_nearest(self: SessionIndex, vectors: Any, ks: Any) -> Any:
        if threading.current_thread().name == "reading" and not read_in.is_set():
            read_in.set()
            read_go.wait(30)
        return nearest(self, vectors, ks)

    def paused_add(self: LexicalIndex, text: str) -> Any:
        if text == QUERY and not extend_in.is_set():
            extend_in.set()
            extend_go.wait(30)
        return add(self, text)

    monkeypatch.setattr(SessionIndex, "nearest_many", paused_nearest)
    monkeypatch.setattr(LexicalIndex, "add", paused_add)
    outcomes: dict[str, Any] = {}

    def call(question: str) -> None:
        name = threading.current_thread().name
        try:
            outcomes[name] = memory.assemble("s1", question, budget=400)
        except Exception as exc:  # noqa: BLE001 - what the call got
            outcomes[name] = exc

    reading = threading.Thread(target=call, args=(QUERY,), name="reading")
    reading.start()
    assert read_in.wait(30)
    memory.add_message("s1", "assistant", QUERY, id="new")  # the index is one message behind
    extending = threading.Thread(target=call, args=("trains",), name="extending")
    extending.start()
    # Before the fix the extension went half way now, and the reading call, let go, found the
    # new record among the rows but not among the ids: an IndexError. Now it waits.
    extend_in.wait(1.0)
    read_go.set()
    reading.join(30)
    extend_go.set()
    extending.join(30)
    for name in ("reading", "extending"):
        got = outcomes[name]
        assert not isinstance(got, Exception), f"{name}: {got!r}"
        assert got.tokens_used <= got.tokens_available
    assert "new" in outcomes["extending"].included_ids


def test_an_interrupted_extension_is_not_kept(
    memory: ContextMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    add = LexicalIndex.add
    interrupted: list[str] = []

    def interrupting_add(self: LexicalIndex, text: str) -> Any:
        if text == QUERY and not interrupted:
            interrupted.append(text)
            raise KeyboardInterrupt  # Ctrl-C while the records are in and the words not
        return add(self, text)

    monkeypatch.setattr(LexicalIndex, "add", interrupting_add)
    memory.add_message("s1", "assistant", QUERY, id="new")
    with pytest.raises(KeyboardInterrupt):
        memory.assemble("s1", "gardens", budget=400)
    # Before the fix every later call on the session failed (an IndexError) until restart.
    for _ in range(2):
        context = memory.assemble("s1", "did Ana buy a cello?", budget=4000)
        assert "new" in context.included_ids
