"""Sessions have one owner at the MCP door: two users, one new session id, one moment.

Two ``--user`` servers' tools (`MemoryTools`, each over its own `ContextMemory`) on one real
Chroma server, as two ``ctxbudget mcp --user`` processes would be: each writes the same 24 new
session ids at the same moment. Of each pair, one is acknowledged and the other refused with
`SessionOwnerError`; every session then holds its owner's message only.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from ctxbudget import ContextMemory, SessionOwnerError
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.mcp.tools import MemoryTools
from ctxbudget.store.chroma_store import ChromaStore
from ctxbudget.testing import ChromaServer

pytestmark = pytest.mark.integration

USERS = ("maya", "tomas")
IDS = 24


@pytest.fixture
def memories(chroma_server: ChromaServer, embedder: OnnxEmbedder) -> Iterator[list[ContextMemory]]:
    collection = f"t-{uuid.uuid4().hex[:16]}"
    opened = [
        ContextMemory(
            store=ChromaStore(url=chroma_server.url, embedder=embedder, collection=collection)
        )
        for _ in USERS
    ]
    yield opened
    for memory in opened:
        memory.close()


def test_two_users_starting_one_session_at_once_never_share_it(
    memories: list[ContextMemory],
) -> None:
    servers = [MemoryTools(memory, user=user) for memory, user in zip(memories, USERS, strict=True)]
    sessions = [f"s{n}-{uuid.uuid4().hex[:6]}" for n in range(IDS)]
    outcomes: dict[tuple[str, str], object] = {}
    for session in sessions:
        start = threading.Barrier(len(USERS))

        def write(tools: MemoryTools, session: str = session, start: threading.Barrier = start):
            start.wait()
            try:
                return tools.remember(session, "user", f"{tools.user} wrote this in {session}")
            except SessionOwnerError as exc:
                return exc

        with ThreadPoolExecutor(len(USERS)) as pool:
            for tools, outcome in zip(servers, pool.map(write, servers), strict=True):
                outcomes[(session, str(tools.user))] = outcome
    for memory in memories:
        memory.flush()
    for session in sessions:
        acknowledged = [u for u in USERS if isinstance(outcomes[(session, u)], dict)]
        assert len(acknowledged) == 1, (session, outcomes)  # never both, never neither
        (owner,) = acknowledged
        (loser,) = [u for u in USERS if u != owner]
        refusal = outcomes[(session, loser)]
        assert isinstance(refusal, SessionOwnerError)
        assert (refusal.session_id, refusal.owner, refusal.user_id) == (session, owner, loser)
        assert repr(session) in str(refusal) and repr(owner) in str(refusal)
        assert "their own session id" in str(refusal)
        for memory in memories:
            stored = memory.history(session)
            assert [(r.user_id, r.text) for r in stored] == [
                (owner, f"{owner} wrote this in {session}")
            ]
