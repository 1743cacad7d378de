"""Shared test set-up: offline and quiet like the Makefile; the real model and a real server.

Fixtures here are used by the memory, LangChain and reliability suites: the real
all-MiniLM-L6-v2 (loaded once per session) and a real ``chroma run`` server on loopback
(`ctxbudget.testing`), started once per session and removed at the end.
"""

from __future__ import annotations

import os

os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import shutil  # noqa: E402
import tempfile  # noqa: E402
import uuid  # noqa: E402
from collections.abc import Callable, Iterator  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from ctxbudget import testing  # noqa: E402
from ctxbudget.embed.onnx import OnnxEmbedder  # noqa: E402
from ctxbudget.store.chroma_store import ChromaStore  # noqa: E402
from ctxbudget.testing import ChromaServer  # noqa: E402


@pytest.fixture(scope="session")
def embedder() -> OnnxEmbedder:
    """The default embedder (all-MiniLM-L6-v2 on onnxruntime), loaded once for the session.

    `LocalEmbedder` (sentence-transformers) is tested on its own in tests/embed.
    """
    model = OnnxEmbedder()
    model.embed_query("warm up")
    return model


@pytest.fixture(scope="session")
def chroma_server() -> Iterator[ChromaServer]:
    """A real Chroma server for the whole session; stopped and its folder removed at the end."""
    root = Path(tempfile.mkdtemp(prefix="ctxbudget-chroma-server-"))
    try:
        with testing.chroma_server(root) as server:
            yield server
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[Callable[[], ChromaServer]]:
    """Start extra servers a test may stop or restart on purpose; all stopped after the test."""
    started: list[ChromaServer] = []

    def start() -> ChromaServer:
        server = ChromaServer(tmp_path / f"server-{len(started)}").start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
        shutil.rmtree(server.root, ignore_errors=True)


@pytest.fixture
def unused_url() -> str:
    """A loopback URL nothing listens on."""
    return f"http://127.0.0.1:{testing.free_port()}"


# -- stores: embedded, then a server (tests/memory, tests/store) ---------------------------

StoreFactory = Callable[..., ChromaStore]


@pytest.fixture(params=["embedded", pytest.param("server", marks=pytest.mark.integration)])
def backend(request: pytest.FixtureRequest) -> str:
    """Which Chroma the test runs against: ``"embedded"`` or ``"server"``."""
    return str(request.param)


@pytest.fixture
def open_store(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path, embedder: OnnxEmbedder
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
