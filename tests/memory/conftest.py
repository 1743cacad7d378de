"""Memory-test fixtures: the real embedding model, an embedded Chroma and a real Chroma server.

`store` runs each test twice: against an embedded Chroma in a temporary folder and against a
`chroma run` server on loopback (marked ``integration``). The model and the server are started
once per test session.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from ctxbudget.embed import LocalEmbedder
from ctxbudget.store import ChromaStore

CHROMA = Path(sys.executable).with_name("chroma")  # the venv's `chroma` script
SERVER_START_TIMEOUT = 60.0


@pytest.fixture(scope="session")
def embedder() -> LocalEmbedder:
    """The real all-MiniLM-L6-v2, loaded once for the whole session."""
    model = LocalEmbedder()
    model.embed_query("warm up")
    return model


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class ChromaServer:
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def _alive(url: str) -> bool:
    try:
        with httpx.Client(timeout=1.0) as client:
            return client.get(f"{url}/api/v2/heartbeat").status_code == 200
    except httpx.TransportError:
        return False


def start_chroma_server(root: Path) -> ChromaServer:
    """Start `chroma run` with its data and log in root, on a free loopback port; wait for it."""
    executable = str(CHROMA) if CHROMA.exists() else shutil.which("chroma")
    if executable is None:
        pytest.fail("the `chroma` command is not installed (it comes with chromadb)")
    root.mkdir(parents=True, exist_ok=True)
    data = root / "data"
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False", "ORT_DISABLE_TELEMETRY": "1"}
    problems: list[str] = []
    for attempt in range(3):  # a free port can be taken between probing and binding
        port = free_port()
        log = root / f"server-{attempt}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [executable, "run", "--path", str(data), "--host", "127.0.0.1"]
                + ["--port", str(port)],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
            )
        server = ChromaServer(f"http://127.0.0.1:{port}", process, log)
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while time.monotonic() < deadline and process.poll() is None:
            if _alive(server.url):
                return server
            time.sleep(0.1)
        server.stop()
        problems.append(f"port {port}: {log.read_text(errors='replace')[-2000:]}")
    pytest.fail("chroma run did not answer its heartbeat:\n" + "\n".join(problems))


@pytest.fixture(scope="session")
def chroma_server() -> Iterator[ChromaServer]:
    """A real Chroma server for the whole session; stopped and its folder removed at the end."""
    root = Path(tempfile.mkdtemp(prefix="ctxbudget-chroma-server-"))
    server = start_chroma_server(root)
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[Callable[[], ChromaServer]]:
    """Start extra servers a test may stop on purpose; all stopped after the test."""
    started: list[ChromaServer] = []

    def start() -> ChromaServer:
        server = start_chroma_server(tmp_path / f"server-{len(started)}")
        started.append(server)
        return server

    yield start
    for index, server in enumerate(started):
        server.stop()
        shutil.rmtree(tmp_path / f"server-{index}", ignore_errors=True)


@pytest.fixture
def unused_url() -> str:
    """A loopback URL nothing listens on."""
    return f"http://127.0.0.1:{free_port()}"


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
