"""Write-behind meets another writer's message under an acknowledged id: the first write wins.

Memory A acknowledges messages (write-behind: journaled, stored in the background); before its
writer stores them (held at a gate in the store's ``add``), memory B on the same folder or
server writes, replaces or deletes messages with the same ids. Each acknowledged message of A
is stored unless B stored a different message under its id first (B's is kept, A's dropped
with one warning naming its id and session); nothing else of A's batch is lost, flush does not
raise, and the journal is left empty. The journal's replay on reopen follows the same rule.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxbudget import ContextMemory
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.errors import StoreInputError
from ctxbudget.store.chroma_store import ChromaStore
from ctxbudget.store.journal import WriteJournal, read_batches, replay
from ctxbudget.store.records import Record

StoreFactory = Any


class GatedStore(ChromaStore):
    """A real store whose ``add`` waits at a gate (open unless a test closes it)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.gate = threading.Event()
        self.gate.set()

    def add(self, records: Sequence[Record], *, replace: bool = False) -> list[Record]:
        self.gate.wait()
        return super().add(records, replace=replace)


@pytest.fixture
def two(
    request: pytest.FixtureRequest,
    backend: str,
    open_store: StoreFactory,
    embedder: OnnxEmbedder,
    tmp_path: Path,
) -> Iterator[tuple[ContextMemory, ContextMemory, GatedStore]]:
    """A (write-behind, over a gated store) and B (writes synchronously) on one place."""
    other = open_store()
    if backend == "server":
        url = request.getfixturevalue("chroma_server").url
        store = GatedStore(url=url, embedder=embedder, collection=other.collection)
        behind: bool | Path = tmp_path / "journal"  # a server journals in a folder given
    else:
        store = GatedStore(other.folder, embedder=embedder, collection=other.collection)
        behind = True  # ContextMemory's default
    a = ContextMemory(store=store, write_behind=behind, inclusion_log=False)
    b = ContextMemory(store=other, write_behind=False, inclusion_log=False)
    yield a, b, store
    store.gate.set()
    a.close()
    b.close()


def journal_left(a: ContextMemory) -> list[Record]:
    behind = a._behind
    assert behind is not None
    return [r for batch in read_batches(behind.journal) for r in batch.records]


def conflict_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "first write wins" in r.getMessage()]


@pytest.mark.parametrize("how", ["add", "replace"])
def test_another_writers_message_first_is_kept_and_the_rest_of_the_batch_stored(
    two: tuple[ContextMemory, ContextMemory, GatedStore],
    caplog: pytest.LogCaptureFixture,
    how: str,
) -> None:
    a, b, store = two
    store.gate.clear()  # A's writer holds at the gate
    a.add_messages(
        "s1",
        [
            {"role": "user", "text": "where is lisbon", "id": "m1"},
            {"role": "assistant", "text": "in portugal", "id": "m2"},
        ],
        user_id="u1",
    )
    if how == "replace":
        b.store.delete(["m1"], namespace=b.namespace, session_id="s1")
    b.add_message("s1", "user", "the admin's wording", id="m1", user_id="u1")
    with caplog.at_level(logging.WARNING):
        store.gate.set()
        a.flush()  # neither raises nor waits forever
        a.flush()
    assert [(r.id, r.text) for r in a.history("s1")] == [
        ("m1", "the admin's wording"),
        ("m2", "in portugal"),
    ]
    assert [(r.id, r.text) for r in b.history("s1")] == [
        ("m1", "the admin's wording"),
        ("m2", "in portugal"),
    ]
    (warning,) = conflict_warnings(caplog)
    assert "'m1'" in warning and "session 's1'" in warning
    assert journal_left(a) == []
    a.add_message("s1", "user", "and madrid", id="m3", user_id="u1")  # A goes on
    a.flush()
    assert [r.id for r in a.history("s1")] == ["m1", "m2", "m3"]


def test_the_same_message_written_by_both_is_stored_once_without_a_warning(
    two: tuple[ContextMemory, ContextMemory, GatedStore], caplog: pytest.LogCaptureFixture
) -> None:
    a, b, store = two
    store.gate.clear()
    a.add_message("s1", "user", "hello", id="m1", user_id="u1")
    b.add_message("s1", "user", "hello", id="m1", user_id="u1")
    with caplog.at_level(logging.WARNING):
        store.gate.set()
        a.flush()
    assert [(r.id, r.text) for r in a.history("s1")] == [("m1", "hello")]
    assert not conflict_warnings(caplog)


def test_the_journal_replay_keeps_the_first_write_and_stores_the_rest(
    store: ChromaStore, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first = Record("m1", "message", "the admin's wording", session_id="s1", role="user")
    (stored,) = store.add([first])
    mine = dataclasses.replace(first, text="where is lisbon")
    other = Record("m2", "message", "in portugal", session_id="s1", role="assistant")
    journal = WriteJournal(tmp_path / "j")  # a writer that died with both acknowledged
    journal.append("b1", [mine, other])
    journal.close(remove=False)
    with caplog.at_level(logging.WARNING):
        assert replay(tmp_path / "j", store.add, get=store.get) == 1
    texts = [r.text for r in store.session_messages(namespace="default", session_id="s1")]
    assert texts == ["the admin's wording", "in portugal"]
    (warning,) = conflict_warnings(caplog)
    assert "'m1'" in warning and "session 's1'" in warning
    assert not list((tmp_path / "j").iterdir())  # nothing kept, nothing .failed


# -- random interleavings ----------------------------------------------------------------------

IDS = ["m0", "m1", "m2"]
steps = st.lists(
    st.tuples(st.sampled_from(["ack", "write", "replace", "delete", "land"]), st.sampled_from(IDS)),
    min_size=1,
    max_size=10,
)


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(plan=steps)
def test_property_every_acknowledged_message_is_stored_unless_another_came_first(
    two: tuple[ContextMemory, ContextMemory, GatedStore], plan: list[tuple[str, str]]
) -> None:
    a, b, store = two
    session = f"s-{uuid.uuid4().hex[:8]}"
    model: dict[str, str] = {}  # what the store holds, by id
    queued: list[tuple[str, str]] = []  # acknowledged by A, not yet stored: (id, text)
    acked: set[str] = set()

    def land() -> None:
        store.gate.set()
        a.flush()
        store.gate.clear()
        for mid, text in queued:
            model.setdefault(mid, text)  # B's different message came first: it stays
        queued.clear()

    store.gate.clear()
    for number, (op, mid) in enumerate(plan):
        text = f"{op} {mid} number {number}"
        if op == "ack":
            if mid in acked:
                continue  # each id acknowledged once by A (the same id again is other rules)
            try:
                a.add_message(session, "user", text, id=mid, user_id="u1")
            except StoreInputError:
                assert mid in model  # stored with other content: refused, not acknowledged
                continue
            assert mid not in model
            acked.add(mid)
            queued.append((mid, text))
        elif op in ("write", "replace"):
            if op == "replace":
                b.store.delete([mid], namespace=b.namespace, session_id=session)
                model.pop(mid, None)
            try:
                b.add_message(session, "user", text, id=mid, user_id="u1")
            except StoreInputError:
                assert mid in model
                continue
            model.setdefault(mid, text)
        elif op == "delete":
            b.store.delete([mid], namespace=b.namespace, session_id=session)
            model.pop(mid, None)
        else:
            land()
    land()
    store.gate.set()
    assert {r.id: r.text for r in a.history(session)} == model
    assert {r.id: r.text for r in b.history(session)} == model
    assert journal_left(a) == []
