"""Fixtures of the MCP server tests: a server spoken to in raw JSON-RPC lines, and the core."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from test_mcp_raw import RawServer

from ctxbudget.memory.context import ContextMemory


@pytest.fixture(scope="module")
def raw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RawServer]:
    server = RawServer(tmp_path_factory.mktemp("mcp-raw") / "store")
    try:
        ok = server.call("remember", '{"session_id": "s", "role": "user", "text": "hello"}')
        assert not ok.get("isError"), ok
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def core(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ContextMemory]:
    """A memory of the same kind, for the message the core gives the same value."""
    with ContextMemory(path=tmp_path_factory.mktemp("mcp-core") / "store") as memory:
        memory.add_message("s", "user", "hello")
        yield memory
