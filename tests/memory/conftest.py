"""Memory-test fixtures: stores on an embedded Chroma and on a real Chroma server.

`store` runs each test twice: against an embedded Chroma in a temporary folder and against a
`chroma run` server on loopback (marked ``integration``). The model and the server come from
tests/conftest.py and are started once per test session.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ctxbudget.embed.local import LocalEmbedder
from ctxbudget.store.chroma_store import ChromaStore
from ctxbudget.testing import ChromaServer

StoreFactory = Callable[..., ChromaStore]


@pytest.fixture(params=["embedded", pytest.param("server", marks=pytest.mark.integration)])
def backend(request: pytest.FixtureRequest) -> str:
    """Which Chroma the test runs against: ``"embedded"`` or ``"server"``."""
    return str(request.param)


@pytest.fixture
def open_store(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path, embedder: LocalEmbedder
) -> Iterator[StoreFactory]:
    """Open stores on one location (a folder, or one collection on the server); all closed after."""
    folder = tmp_path / "chroma"
    collection = f"t-{uuid.uuid4().hex[:16]}"
    server: ChromaServer | None = None
    if backend == "server":
        server = request.getfixturevalue("chroma_server")
    opened: list[ChromaStore] = []

    def factory(**options: object) -> ChromaStore:
        options.setdefault("embedder", embedder)
        options.setdefault("collection", collection)
        if server is None:
            store = ChromaStore(folder, **options)  # type: ignore[arg-type]
        else:
            store = ChromaStore(url=server.url, **options)  # type: ignore[arg-type]
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.close()
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def store(open_store: StoreFactory) -> ChromaStore:
    """A fresh, empty store: embedded, then on the server."""
    return open_store()
