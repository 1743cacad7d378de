"""Write-behind: acknowledged records are journaled, stored in order, never lost or dropped.

The store is a real Chroma (embedded, then a server); failures are injected around its ``add``.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxbudget.errors import StoreError, StoreInputError
from ctxbudget.memory.writing.behind import WriteBehind
from ctxbudget.store.chroma_store import ChromaStore
from ctxbudget.store.journal import WriteJournal, read_batches, replay
from ctxbudget.store.records import Record


def message(session: str, number: int, text: str | None = None) -> Record:
    return Record(
        id=f"m{number}",
        kind="message",
        text=text or f"message {number} of {session}",
        session_id=session,
        role="user" if number % 2 == 0 else "assistant",
    )


def stored_texts(store: ChromaStore, session: str) -> list[str]:
    return [r.text for r in store.session_messages(namespace="default", session_id=session)]


class FlakyAdd:
    """``store.add`` that fails the first ``failures`` calls with ``error``."""

    def __init__(self, store: ChromaStore, failures: int, error: Exception) -> None:
        self.store, self.failures, self.error, self.calls = store, failures, error, 0

    def __call__(self, records: Sequence[Record]) -> list[Record]:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return self.store.add(records)


batches = st.lists(
    st.lists(st.tuples(st.sampled_from(["s1", "s2"]), st.integers(0, 30)), min_size=1, max_size=8),
    min_size=1,
    max_size=12,
)


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(plan=batches, batch=st.integers(1, 20))
def test_every_acknowledged_record_is_stored_once_in_acknowledgement_order(
    store: ChromaStore, tmp_path: Path, plan: list[list[tuple[str, int]]], batch: int
) -> None:
    namespace = f"ns{time.monotonic_ns()}"
    writer = WriteBehind(store.add, WriteJournal(tmp_path / namespace), batch=batch)
    expected: dict[str, list[str]] = {"s1": [], "s2": []}
    for group in plan:
        records = {}
        for session, number in group:
            record = message(session, number)
            records[(session, number)] = dataclasses.replace(record, namespace=namespace)
        for (session, _), record in records.items():
            if record.text not in expected[session]:
                expected[session].append(record.text)
        writer.submit(list(records.values()))
    writer.settle()
    for session, texts in expected.items():
        found = store.session_messages(namespace=namespace, session_id=session)
        assert [r.text for r in found] == texts  # each once, seqs in acknowledgement order
    writer.close()
    assert not list((tmp_path / namespace).glob("*.jsonl"))  # nothing left to replay


def test_a_failing_store_is_retried_in_order_and_reported_when_late(
    store: ChromaStore, tmp_path: Path
) -> None:
    flaky = FlakyAdd(store, failures=3, error=StoreError("server restarting"))
    writer = WriteBehind(flaky, WriteJournal(tmp_path / "j"), batch=2, timeout=30)
    writer.submit([message("s1", 0), message("s1", 1), message("s1", 2)])
    reported = 0
    for _ in range(100):  # while the store fails, each read reports it; then it succeeds
        try:
            writer.settle()
            break
        except StoreError as exc:
            assert "are not stored yet (the store failed: server restarting)" in str(exc)
            reported += 1
            time.sleep(0.05)
    assert reported >= 1 and flaky.calls == 4
    assert stored_texts(store, "s1") == [f"message {i} of s1" for i in range(3)]
    writer.close()

    down = FlakyAdd(store, failures=10**6, error=StoreError("server down"))
    late = WriteBehind(down, WriteJournal(tmp_path / "k"), timeout=0.5)
    late.submit([message("s2", 0)])
    with pytest.raises(StoreError, match=r"1 acknowledged message\(s\) are not stored yet.*down"):
        late.settle()
    late.close()
    # What could not be stored stays in the journal, and the next opener stores it.
    assert [len(b.records) for p in (tmp_path / "k").glob("*.jsonl") for b in read_batches(p)] == [
        1
    ]
    assert replay(tmp_path / "k", store.add) == 1
    assert stored_texts(store, "s2") == ["message 0 of s2"]
    assert not list((tmp_path / "k").iterdir())


def test_a_refused_batch_is_reported_once_kept_and_does_not_block_the_others(
    store: ChromaStore, tmp_path: Path
) -> None:
    # A refusal that is not another writer's record under the id (those are dropped, first
    # write wins: test_write_behind_conflicts.py): the batch is kept and reported once.
    refusing = FlakyAdd(store, failures=1, error=StoreInputError("a vector of 3 dimensions"))
    writer = WriteBehind(refusing, WriteJournal(tmp_path / "j"), batch=10, get=store.get)
    writer.submit([message("s1", 0, "another wording")])  # refused by the store
    with pytest.raises(StoreError, match=r"could not be stored.*3 dimensions.*'m0'"):
        writer.settle()
    writer.submit([message("s1", 1)])
    writer.settle()  # reported once
    assert stored_texts(store, "s1") == ["message 1 of s1"]
    writer.close()
    kept = [b for p in (tmp_path / "j").glob("*.jsonl") for b in read_batches(p)]
    assert [r.text for b in kept for r in b.records] == ["another wording"]


def settled(writer: WriteBehind, within: float = 60.0) -> None:
    """`WriteBehind.settle`, tried again while its short ``timeout`` runs out on a busy machine."""
    deadline = time.monotonic() + within
    while True:
        try:
            writer.settle()
            return
        except StoreError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_submit_waits_when_the_queue_is_full(store: ChromaStore, tmp_path: Path) -> None:
    release = threading.Event()

    def slow(records: Sequence[Record]) -> list[Record]:
        release.wait(10)
        return store.add(records)

    writer = WriteBehind(slow, WriteJournal(tmp_path / "j"), batch=4, max_pending=4, timeout=0.3)
    writer.submit([message("s1", i) for i in range(4)])
    with pytest.raises(StoreError, match="cannot acknowledge more messages"):
        writer.submit([message("s1", 4)])
    release.set()
    settled(writer)  # room again (waiting here, not in submit's 0.3 s, keeps it load-proof)
    writer.submit([message("s1", 5)])
    settled(writer)
    assert len(stored_texts(store, "s1")) == 5  # the refused one was never acknowledged
    writer.close()


class SlowAdd:
    """``store.add`` that takes ``seconds`` more a call: a loaded machine, a slow server."""

    def __init__(self, store: ChromaStore, seconds: float) -> None:
        self.store, self.seconds = store, seconds

    def __call__(self, records: Sequence[Record]) -> list[Record]:
        time.sleep(self.seconds)
        return self.store.add(records)


@pytest.mark.parametrize("how", ["settle", "submit", "close"])
def test_a_slow_store_that_keeps_storing_is_waited_for(
    store: ChromaStore, tmp_path: Path, how: str
) -> None:
    # Twelve batches of 0.25 s each take three seconds, past the 2 s timeout, but no batch
    # takes it: a flush after a large import on a loaded machine waits for the writer instead
    # of raising "not stored yet" while it stores (until 2026-12-01 the timeout counted from
    # the start: bench_middleware's own flush of 2,000 messages raised under load).
    writer = WriteBehind(
        SlowAdd(store, 0.25), WriteJournal(tmp_path / "j"), batch=1, max_pending=12, timeout=2.0
    )
    start = time.monotonic()
    for i in range(12):
        writer.submit([message("s1", i)])
    if how == "settle":
        writer.settle()
    elif how == "submit":  # twelve more: room only once the twelve queued are stored
        writer.submit([message("s1", i) for i in range(12, 24)])
    else:
        writer.close()
    assert time.monotonic() - start > 2.0  # the case: longer than the timeout in all
    if how != "close":
        writer.settle()
        writer.close()
    count = 24 if how == "submit" else 12
    assert stored_texts(store, "s1") == [f"message {i} of s1" for i in range(count)]
    assert not list((tmp_path / "j").iterdir())  # nothing left to replay


def test_a_wait_under_steady_writes_ends_when_what_came_before_it_is_stored(
    store: ChromaStore, tmp_path: Path
) -> None:
    # Another thread acknowledges a message every few milliseconds, faster than a slow store
    # empties the queue, so the queue is never empty. A settle waits for what was acknowledged
    # before it, not for the queue to empty (until 2026-12-01 it waited for an empty queue and
    # counted "stored" as a shorter queue: under the 20 s load test, readers raised "nothing
    # stored for 30 s" while batches were being stored).
    # The timeout is long: it must not be what ends the wait (on a loaded CI machine one store
    # call took over a second); the code before never returned, and raised after it.
    writer = WriteBehind(
        SlowAdd(store, 0.02), WriteJournal(tmp_path / "j"), batch=2, max_pending=10_000, timeout=30
    )
    stop = threading.Event()

    def steady() -> None:
        number = 100
        while not stop.is_set():
            writer.submit([message("s2", number), message("s2", number + 1)])
            number += 2
            time.sleep(0.01)

    for i in range(6):
        writer.submit([message("s1", i)])
    other = threading.Thread(target=steady)
    other.start()
    try:
        time.sleep(0.2)  # the queue grows: 4 records per 0.02 s in, 2 out
        writer.settle()
        assert stored_texts(store, "s1") == [f"message {i} of s1" for i in range(6)]
        assert writer.waiting()  # the steady writes are still queued: not waited for
    finally:
        stop.set()
        other.join()
        writer.close()  # stores the rest: no writer left retrying into another test


def test_a_store_that_stores_nothing_is_still_reported_after_the_timeout(
    store: ChromaStore, tmp_path: Path
) -> None:
    release = threading.Event()

    def hung(records: Sequence[Record]) -> list[Record]:
        release.wait(30)
        return store.add(records)

    writer = WriteBehind(hung, WriteJournal(tmp_path / "j"), batch=1, timeout=0.5)
    writer.submit([message("s1", 0), message("s1", 1)])
    with pytest.raises(StoreError, match=r"2 acknowledged .* \(nothing stored for 0.5 s\)"):
        writer.settle()
    release.set()
    settled(writer)
    writer.close()
    assert len(stored_texts(store, "s1")) == 2


def test_a_dead_writers_journal_is_replayed_without_its_finished_or_torn_lines(
    store: ChromaStore, tmp_path: Path
) -> None:
    journal = WriteJournal(tmp_path / "j")
    journal.append("a", [message("s1", 0)])
    journal.append("b", [message("s1", 1), message("s1", 2)])
    journal.append("c", [message("s1", 3)])
    journal.done(["a"])
    with journal.path.open("ab") as torn:
        torn.write(b'{"batch":"d","records":[["cut')  # a crash in the middle of an append
    assert replay(tmp_path / "j", store.add) == 0  # its writer is alive: not an orphan
    journal.close(remove=False)  # the writer dies: its lock is released
    assert replay(tmp_path / "j", store.add) == 3
    assert stored_texts(store, "s1") == [f"message {i} of s1" for i in (1, 2, 3)]
    assert not list((tmp_path / "j").iterdir())


def test_replay_keeps_a_batch_the_store_refuses_apart(store: ChromaStore, tmp_path: Path) -> None:
    store.add([message("s1", 0, "stored")])
    journal = WriteJournal(tmp_path / "j")
    journal.append("a", [message("s1", 0, "other")])
    journal.append("b", [message("s1", 1)])
    journal.close(remove=False)
    assert replay(tmp_path / "j", store.add) == 1
    assert [p.suffix for p in (tmp_path / "j").iterdir()] == [".failed"]


def test_a_journal_that_cannot_be_created_is_a_store_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(StoreError, match="cannot create the write journal"):
        WriteJournal(tmp_path / "file" / "j")


def test_store_input_errors_are_not_retried(tmp_path: Path, store: ChromaStore) -> None:
    flaky = FlakyAdd(store, failures=1, error=StoreInputError("bad"))
    writer = WriteBehind(flaky, WriteJournal(tmp_path / "j"))
    writer.submit([message("s1", 0)])
    with pytest.raises(StoreError, match="bad"):
        writer.settle()
    assert flaky.calls == 1
    writer.close()


def test_candidates_for_a_caller_holding_the_history_do_not_wait_for_the_store(
    tmp_path: Path, store: ChromaStore
) -> None:
    # The LangChain middleware holds the newest messages in the agent's state: its candidates
    # need not wait until they are stored (`wait=False`); every other read does wait.
    from ctxbudget.memory.context import ContextMemory

    memory = ContextMemory(store=store, write_behind=tmp_path / "journal")
    memory.add_messages("s", [{"role": "user", "text": "my locker code is 4471"}])
    memory.flush()
    release = threading.Event()
    behind = memory._behind
    assert behind is not None
    add = behind._add

    def slow(records: Sequence[Record]) -> list[Record]:
        release.wait(10)
        return add(records)

    behind._add = slow
    try:
        memory.add_message("s", "user", "and the bike lock is 9907")
        started = time.perf_counter()
        found = memory.candidates("s", "what is my locker code?", wait=False, search_recent=True)
        assert time.perf_counter() - started < 5
        texts = [i.text for i in (*found.history, *found.retrieved)]
        assert any("4471" in t for t in texts)
        assert not any("9907" in t for t in texts)  # not stored yet: the caller holds it
    finally:
        release.set()
    found = memory.candidates("s", "what is the bike lock?")  # waits
    assert any("9907" in i.text for i in found.history)
    memory.close()
