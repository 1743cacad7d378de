"""The conformance suite's fixtures: where a door's memory lives, the door, and an admin.

- ``place``: an embedded folder in ``tmp_path`` (``place_kind`` "embedded"), or a collection
  on the session's Chroma server (``place_kind`` "server", marked ``integration``); a test
  that must run on both parametrizes ``place_kind`` itself. The collection is the default one
  (the command line and the MCP server open it); a fresh namespace keeps tests apart.
- ``driver``: one per entry of `drivers.DRIVERS` (ids: the driver names), closed after. In a
  module that sets ``SHARES_SERVERS = True`` (its promises hold on any session of a running
  server, each test's ids fresh), a server-process door (``signals``: the MCP servers) is one
  process per door for the whole session, on an embedded folder of its own, instead of one
  started per test; test_signals, test_removed and test_bad_values still start their own.
- ``admin``: a second `ContextMemory` on the same place, which deletes, replaces and unpins
  behind the door's back (request it only after the door started: an embedded folder is held
  by one process, so a server door and an admin cannot share one).
- ctxbudget's spans go to the in-memory exporter the drivers read (`drivers.common.SPANS`).
"""

from __future__ import annotations

import contextlib
import importlib
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from drivers import DRIVERS
from drivers.base import Place
from drivers.common import PROVIDER, SPANS

from ctxbudget import telemetry
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.errors import CtxBudgetError

COLLECTION = "ctxbudget"  # the default: the one the command line and the MCP server open


@pytest.fixture(autouse=True)
def traced() -> Iterator[None]:
    """ctxbudget's spans go to `SPANS` during each test; the defaults again after it."""
    telemetry.configure(tracer_provider=PROVIDER)
    SPANS.clear()
    yield
    telemetry.configure()
    SPANS.clear()


@pytest.fixture
def place_kind() -> str:
    """Embedded unless a test parametrizes it (``["embedded", server]``)."""
    return "embedded"


@pytest.fixture
def place(
    request: pytest.FixtureRequest, place_kind: str, tmp_path: Path, embedder: OnnxEmbedder
) -> Iterator[Place]:
    """Where the door's memory lives: a folder, or the session's Chroma server."""
    namespace = f"conf-{uuid.uuid4().hex[:12]}"
    if place_kind == "server":
        server = request.getfixturevalue("chroma_server")
        yield Place(None, server.url, COLLECTION, namespace, embedder)
        return
    folder = tmp_path / "chroma"
    yield Place(str(folder), None, COLLECTION, namespace, embedder)
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def running_servers() -> Iterator[dict[str, Any]]:
    """The server-process doors shared by modules that say ``SHARES_SERVERS``, by name."""
    servers: dict[str, Any] = {}
    yield servers
    for door in servers.values():
        with contextlib.suppress(CtxBudgetError):
            door.close()


@pytest.fixture(params=sorted(DRIVERS), ids=sorted(DRIVERS))
def driver(request: pytest.FixtureRequest, place: Place) -> Iterator[Any]:
    """One door, on ``place``; closed after the test (a second close may refuse).

    A server-process door in a module that ``SHARES_SERVERS``: the session's running one.
    """
    module = importlib.import_module(f"drivers.{DRIVERS[request.param]}")
    door = module.make(place)
    shared = getattr(request.module, "SHARES_SERVERS", False) and place.folder is not None
    if shared and "signals" in door.can:
        door.close()  # never started: a server door starts its process on first use
        servers = request.getfixturevalue("running_servers")
        if request.param not in servers:
            root = request.getfixturevalue("tmp_path_factory").mktemp(f"shared-{request.param}")
            where = Place(
                str(root / "chroma"),
                None,
                COLLECTION,
                f"conf-{uuid.uuid4().hex[:12]}",
                place.embedder,
            )
            servers[request.param] = module.make(where)
        yield servers[request.param]
        return
    yield door
    with contextlib.suppress(CtxBudgetError):
        door.close()


@pytest.fixture
def admin(place: Place) -> Iterator[Any]:
    """Another `ContextMemory` on the door's place."""
    memory = place.open_memory()
    yield memory
    memory.close()
