"""A replace racing a delete of the same message elsewhere: the deleted message stays deleted.

`replace_message` reads the stored message, then writes the replacement; the store's lock is per
process, so on a Chroma server a `delete_messages` of another process (or of a store with
another client, which takes another lock) can land between the two. Each test puts the delete
exactly there by hooking the replacer's write (no timing luck): in a spawned process, and
through a second client in this process at two points (before the writer reads the stored
message again: the replacement would come back at the end; after: at its old seq). The other
order (the replace runs whole inside a delete, after its read) ends deleted too, and a re-added
message with the same id can be replaced. Real parts: a Chroma server, the default embedder.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable, Iterator
from typing import Any

import chromadb
import pytest
from chromadb.config import Settings

from ctxbudget import ContextMemory
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.errors import StoreInputError
from ctxbudget.store.chroma_store import ChromaStore
from ctxbudget.store.tombstones import TOMBSTONE_TTL
from ctxbudget.store.writes import Writer
from ctxbudget.testing import ChromaServer
from tests.conftest import StoreFactory

DELETED = "was deleted while it was replaced"


def seed(memory: ContextMemory, session: str = "gym") -> None:
    memory.add_messages(
        session,
        [
            {"id": "q1", "role": "user", "text": "My locker code is 1234"},
            {"id": "a1", "role": "assistant", "text": "Noted."},
            {"id": "q2", "role": "user", "text": "Thanks."},
        ],
        user_id="ana",
    )
    memory.flush()


def stored_ids(url: str, collection: str, embedder: OnnxEmbedder, session: str = "gym") -> list:
    """The session's messages as a fresh store on the server reads them: (id, seq, text)."""
    store = ChromaStore(url=url, collection=collection, embedder=embedder)
    try:
        return [(r.id, r.seq, r.text) for r in ContextMemory(store=store).history(session)]
    finally:
        store.close()


def other_client_store(
    server: ChromaServer, collection: str, embedder: OnnxEmbedder
) -> ChromaStore:
    """A store on the same server and collection that does not share this process's lock."""
    client = chromadb.HttpClient(
        host="127.0.0.1", port=server.port, settings=Settings(anonymized_telemetry=False)
    )
    return ChromaStore(client=client, collection=collection, embedder=embedder)


def hook_writer(store: ChromaStore, point: str, before: Callable[[], None]) -> None:
    """Run ``before`` once, inside the replace, just before the writer's ``point`` runs."""
    writer: Writer = store._writer  # noqa: SLF001 - the hook is the point of the test
    original = getattr(writer, point)
    done: list[bool] = []

    def hooked(*args: Any, **kwargs: Any) -> Any:
        if not done:
            done.append(True)
            before()
        return original(*args, **kwargs)

    setattr(writer, point, hooked)


@pytest.fixture
def collection() -> Iterator[str]:
    yield f"race-{time.monotonic_ns()}"


# -- the delete in another process ------------------------------------------------------------


def delete_when_told(url: str, collection: str, go: Any, done: Any, out: Any) -> None:
    """A spawned process: wait for ``go``, delete q1, report how many were deleted."""
    memory = ContextMemory(
        store=ChromaStore(url=url, collection=collection, embedder=OnnxEmbedder())
    )
    memory.history("gym")
    out.put("ready")
    try:
        if go.wait(120):
            out.put(memory.delete_messages("gym", ["q1"]))
    except Exception as exc:  # noqa: BLE001 - reported to the test
        out.put(repr(exc))
    finally:
        done.set()
        memory.close()


@pytest.mark.integration
def test_a_delete_in_another_process_between_read_and_write_stays(
    chroma_server: ChromaServer, embedder: OnnxEmbedder, collection: str
) -> None:
    store = ChromaStore(url=chroma_server.url, collection=collection, embedder=embedder)
    memory = ContextMemory(store=store)
    seed(memory)
    spawn = multiprocessing.get_context("spawn")
    go, done, out = spawn.Event(), spawn.Event(), spawn.Queue()
    child = spawn.Process(
        target=delete_when_told, args=(chroma_server.url, collection, go, done, out)
    )
    child.start()
    try:
        assert out.get(timeout=120) == "ready"

        def delete_elsewhere() -> None:
            go.set()
            assert done.wait(120), "the deleting process did not finish"

        hook_writer(store, "_upsert_records", delete_elsewhere)
        with pytest.raises(StoreInputError, match=DELETED) as raised:
            memory.replace_message("gym", "q1", "My locker code is 9876")
        assert str(raised.value).startswith("replace_message of 'q1': ")
        assert str(raised.value).endswith("; nothing was changed")
        assert out.get(timeout=60) == 1  # the delete was told it deleted q1
    finally:
        child.join(30)
        if child.is_alive():
            child.kill()
    assert [i for i, _, _ in stored_ids(chroma_server.url, collection, embedder)] == ["a1", "q2"]
    assert "q1" not in [r.id for r in memory.history("gym")]
    memory.close()


# -- the delete through another client of this process -----------------------------------------


@pytest.mark.integration
@pytest.mark.parametrize("how", ["delete_messages", "delete"])  # delete: as clear() does
@pytest.mark.parametrize("point", ["add", "_upsert_records"])
def test_a_delete_between_read_and_write_is_not_undone(
    chroma_server: ChromaServer, embedder: OnnxEmbedder, collection: str, point: str, how: str
) -> None:
    store = ChromaStore(url=chroma_server.url, collection=collection, embedder=embedder)
    memory = ContextMemory(store=store)
    seed(memory)
    other = other_client_store(chroma_server, collection, embedder)
    counts: list[int] = []
    hook_writer(
        store,
        point,
        lambda: counts.append(getattr(other, how)(["q1"], namespace="default", session_id="gym")),
    )
    with pytest.raises(StoreInputError, match=DELETED):
        memory.replace_message("gym", "q1", "My locker code is 9876")
    assert counts == [1]
    assert [i for i, _, _ in stored_ids(chroma_server.url, collection, embedder)] == ["a1", "q2"]
    # Added again with that id: a new message (a new seq), which can be replaced and deleted.
    memory.add_message("gym", "user", "My locker code is 5555", id="q1", user_id="ana")
    memory.flush()
    assert memory.replace_message("gym", "q1", "My locker code is 6666") == "q1"
    rows = stored_ids(chroma_server.url, collection, embedder)
    assert [(i, t) for i, _, t in rows] == [
        ("a1", "Noted."),
        ("q2", "Thanks."),
        ("q1", "My locker code is 6666"),
    ]
    assert rows[-1][1] > rows[1][1]
    assert memory.delete_messages("gym", ["q1"]) == 1
    assert memory.delete_messages("gym", ["q1"]) == 0
    other.close()
    memory.close()


@pytest.mark.integration
def test_a_replace_inside_a_delete_after_its_read_ends_deleted(
    chroma_server: ChromaServer, embedder: OnnxEmbedder, collection: str
) -> None:
    deleter = ChromaStore(url=chroma_server.url, collection=collection, embedder=embedder)
    memory = ContextMemory(store=deleter)
    seed(memory)
    other = ContextMemory(store=other_client_store(chroma_server, collection, embedder))
    edits = deleter._deleter.edits  # noqa: SLF001 - the hook is the point of the test
    original = edits._forget  # noqa: SLF001
    outcome: list[str] = []

    def forget(*args: Any, **kwargs: Any) -> None:
        if not outcome:  # the delete has read q1 (and noted its deletion); not deleted it yet
            try:
                outcome.append(other.replace_message("gym", "q1", "My locker code is 9876"))
            except StoreInputError as exc:
                outcome.append(str(exc))
        original(*args, **kwargs)

    edits._forget = forget  # type: ignore[method-assign]  # noqa: SLF001
    assert memory.delete_messages("gym", ["q1"]) == 1
    assert len(outcome) == 1 and DELETED in outcome[0]
    assert [i for i, _, _ in stored_ids(chroma_server.url, collection, embedder)] == ["a1", "q2"]
    assert [r.id for r in other.history("gym")] == ["a1", "q2"]
    other.close()
    memory.close()


# -- tombstones: what they leave behind ------------------------------------------------------


def tombstones(store: ChromaStore) -> list[str]:
    cols = store._collections  # noqa: SLF001 - what meta holds is the point of the test
    return sorted(k for k, _, m in cols.rows(cols.meta, where={"type": "tomb"}, documents=False))


def test_tombstones_go_with_their_session_and_user_and_age_out(open_store: StoreFactory) -> None:
    store = open_store()
    memory = ContextMemory(store=store)
    seed(memory)
    seed(memory, "other")
    assert tombstones(store) == []
    assert memory.delete_messages("gym", ["q1", "a1", "nope"]) == 2
    assert memory.delete_messages("other", ["q2"]) == 1
    assert len(tombstones(store)) == 3
    # Added again, replaced, deleted again: the old tombstone never matches the new message.
    memory.add_message("gym", "user", "My locker code is 5555", id="q1", user_id="ana")
    memory.flush()
    assert memory.replace_message("gym", "q1", "My locker code is 6666") == "q1"
    assert [r.text for r in memory.history("gym") if r.id == "q1"] == ["My locker code is 6666"]
    assert memory.delete_messages("gym", ["q1"]) == 1
    assert len(tombstones(store)) == 4  # one per deleted message (id and seq)
    # A later delete of the session sweeps those older than the TTL.
    edits = store._deleter.edits  # noqa: SLF001
    assert edits.tombstones.sweep("default", "gym", None, now=time.time() + TOMBSTONE_TTL + 1) == 3
    assert len(tombstones(store)) == 1
    memory.delete_session("other")
    assert tombstones(store) == []
    memory.add_message("gym", "user", "again", id="q9", user_id="ana")
    memory.flush()
    assert memory.delete_messages("gym", ["q9"]) == 1
    assert len(tombstones(store)) == 1
    memory.delete_user("ana")
    assert tombstones(store) == []
    memory.close()


def test_a_task_id_is_refused_as_a_task_not_a_reserved_id(open_store: StoreFactory) -> None:
    memory = ContextMemory(store=open_store())
    seed(memory)
    task = memory.push_task("gym", "find the locker")
    with pytest.raises(StoreInputError) as raised:
        memory.replace_message("gym", task, "another goal")
    text = str(raised.value)
    assert "is the id of a task (push_task; " in text and ", not of a message: " in text
    assert "replace_message replaces messages only" in text and "reserved" not in text
    assert text.endswith("; nothing was changed")
    with pytest.raises(StoreInputError, match="delete_messages deletes messages only"):
        memory.delete_messages("gym", [task])
    with pytest.raises(StoreInputError, match="keeps for its own items"):
        memory.replace_message("gym", "ctxbudget:query", "x")
    memory.close()
