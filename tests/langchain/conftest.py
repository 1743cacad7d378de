"""LangChain adapter fixtures: the real embedding model, an embedded Chroma, a Chroma server.

The only fake is the chat model (`lc_fakes.RecordingChatModel`, a LangChain
`GenericFakeChatModel` that keeps every request). Everything else is real: tiktoken, Chroma, the
local embedding model.
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
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ctxbudget.embed import LocalEmbedder
from ctxbudget.memory import ContextMemory
from ctxbudget.store import ChromaStore

CHROMA = Path(sys.executable).with_name("chroma")


@pytest.fixture(scope="session")
def embedder() -> LocalEmbedder:
    """The real all-MiniLM-L6-v2, loaded once."""
    model = LocalEmbedder()
    model.embed_query("warm up")
    return model


@pytest.fixture
def memory(tmp_path: Path, embedder: LocalEmbedder) -> Iterator[ContextMemory]:
    """A `ContextMemory` over an embedded Chroma in a temporary folder."""
    mem = ContextMemory(path=tmp_path / "chroma", embedder=embedder)
    yield mem
    mem.close()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _alive(url: str) -> bool:
    try:
        with httpx.Client(timeout=1.0) as client:
            return client.get(f"{url}/api/v2/heartbeat").status_code == 200
    except httpx.TransportError:
        return False


@pytest.fixture(scope="session")
def chroma_url() -> Iterator[str]:
    """A real `chroma run` server on loopback for the session; stopped and removed after."""
    executable = str(CHROMA) if CHROMA.exists() else shutil.which("chroma")
    if executable is None:
        pytest.fail("the `chroma` command is not installed (it comes with chromadb)")
    root = Path(tempfile.mkdtemp(prefix="ctxbudget-lc-chroma-"))
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False", "ORT_DISABLE_TELEMETRY": "1"}
    port = _free_port()
    with (root / "server.log").open("wb") as log:
        process = subprocess.Popen(
            [executable, "run", "--path", str(root / "data"), "--host", "127.0.0.1"]
            + ["--port", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while not _alive(url):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail("chroma run did not start:\n" + (root / "server.log").read_text())
        time.sleep(0.1)
    try:
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(params=["embedded", pytest.param("server", marks=pytest.mark.integration)])
def any_memory(
    request: pytest.FixtureRequest, tmp_path: Path, embedder: LocalEmbedder
) -> Iterator[ContextMemory]:
    """A fresh `ContextMemory`: over an embedded Chroma, then over a Chroma server."""
    if request.param == "embedded":
        store = ChromaStore(tmp_path / "chroma", embedder=embedder)
    else:
        url = request.getfixturevalue("chroma_url")
        store = ChromaStore(url=url, embedder=embedder, collection=f"t-{uuid.uuid4().hex[:12]}")
    mem = ContextMemory(store=store)
    yield mem
    mem.close()
