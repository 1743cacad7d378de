"""A replace racing `delete_session` or `delete_user` elsewhere: the deleted session stays deleted.

As in tests/memory/test_replace_delete_race.py, the delete runs exactly between the replacer's
read of the message and its write, through a second client (which takes another lock), at two
points of the write; the session (or the user) must end with nothing of it stored, and the
replace refused. Real parts: a Chroma server, the default embedder.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import chromadb
import pytest
from chromadb.config import Settings

from ctxbudget import ContextMemory
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.errors import StoreInputError
from ctxbudget.store.chroma_store import ChromaStore
from ctxbudget.testing import ChromaServer
from tests.memory.test_replace_delete_race import (
    DELETED,
    hook_writer,
    other_client_store,
    seed,
    tombstones,
)


@pytest.fixture
def collection() -> Iterator[str]:
    yield f"race-session-{time.monotonic_ns()}"


def everything(server: ChromaServer, collection: str, session: str) -> list[str]:
    """The ids of every row of the store (records and ``meta`` entries) that names ``session``."""
    client = chromadb.HttpClient(
        host="127.0.0.1", port=server.port, settings=Settings(anonymized_telemetry=False)
    )
    found: list[str] = []
    for listed in client.list_collections():
        if not listed.name.startswith(collection):
            continue  # another test's store on the shared server
        got = client.get_collection(listed.name).get(include=["metadatas"])
        metas = got["metadatas"] or []
        found += [
            i for i, m in zip(got["ids"], metas, strict=True) if (m or {}).get("sid") == session
        ]
    return sorted(found)


@pytest.mark.integration
@pytest.mark.parametrize("how", ["delete_session", "delete_user"])
@pytest.mark.parametrize("point", ["add", "_upsert_records"])
def test_a_session_deleted_between_read_and_write_stays_deleted(
    chroma_server: ChromaServer, embedder: OnnxEmbedder, collection: str, point: str, how: str
) -> None:
    store = ChromaStore(url=chroma_server.url, collection=collection, embedder=embedder)
    memory = ContextMemory(store=store)
    seed(memory)
    seed(memory, "kept")  # another session of another user: untouched
    memory.add_message("kept", "user", "hello", id="k9", user_id="bo")
    memory.flush()
    assert len(everything(chroma_server, collection, "gym")) >= 3  # what the delete must remove
    other = other_client_store(chroma_server, collection, embedder)
    counts: list[int] = []

    def delete() -> None:
        if how == "delete_session":
            counts.append(other.delete_session(namespace="default", session_id="gym"))
        else:
            counts.append(other.delete_user(namespace="default", user_id="ana"))

    hook_writer(store, point, delete)
    with pytest.raises(StoreInputError, match=DELETED):
        memory.replace_message("gym", "q1", "My locker code is 9876")
    assert counts and counts[0] >= 3
    fresh = ContextMemory(store=other_client_store(chroma_server, collection, embedder))
    assert fresh.history("gym") == []
    assert everything(chroma_server, collection, "gym") == []
    # A session another user keeps holds tombstones of the deleted user's messages (ids and
    # seqs, no text) until a later delete in it sweeps them (store/tombstones.py).
    left = tombstones(store)
    assert left == [] if how == "delete_session" else len(left) == 3
    assert all('"kept"' in key for key in left)
    kept = [r.id for r in fresh.history("kept")]
    assert kept == (["q1", "a1", "q2", "k9"] if how == "delete_session" else ["k9"])
    fresh.close()
    other.close()
    memory.close()
