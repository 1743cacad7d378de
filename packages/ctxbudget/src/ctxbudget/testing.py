"""Test helpers: a real Chroma server on loopback, started and stopped by the caller.

Apps that use ``ContextMemory(chroma_url=...)`` in production can test against the real server
the same way this project does, without mocks::

    from ctxbudget.testing import chroma_server

    with chroma_server(tmp_path) as server:
        memory = ContextMemory(chroma_url=server.url, embedder=...)

The server runs ``chroma run --path ROOT/data --host 127.0.0.1 --port PORT`` on a free port,
with telemetry off, and its output goes to a log file in ``ROOT``. It can be stopped and started
again on the same port and data (to test what an app does when the server goes away).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ctxbudget.errors import CtxBudgetError, MissingDependencyError

__all__ = ["ChromaServer", "ServerStartError", "alive", "chroma_server", "free_port"]

START_TIMEOUT = 60.0


class ServerStartError(CtxBudgetError, RuntimeError):
    """``chroma run`` did not answer its heartbeat; the message carries the end of its log."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listened on a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _chroma_executable() -> str:
    script = Path(sys.executable).with_name("chroma")  # the virtualenv's own `chroma`
    if script.exists():
        return str(script)
    found = shutil.which("chroma")
    if found is None:
        msg = "the `chroma` command is not installed (it comes with chromadb): pip install chromadb"
        raise MissingDependencyError(msg)
    return found


def alive(url: str, *, timeout: float = 1.0) -> bool:
    """Whether a Chroma server answers its heartbeat at url."""
    try:
        with urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=timeout) as response:
            return int(response.status) == 200
    except (urllib.error.URLError, OSError):
        return False


class ChromaServer:
    """A ``chroma run`` process on 127.0.0.1 with its data in ``root / "data"``.

    Args:
        root: folder for the data and the logs (created if missing).
        port: the port to listen on; a free one by default.
    """

    def __init__(self, root: str | Path, *, port: int | None = None) -> None:
        self.root = Path(root)
        self.port = port if port is not None else free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self._starts = 0

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def data(self) -> Path:
        """The folder Chroma persists to."""
        return self.root / "data"

    @property
    def log(self) -> Path:
        """The log of the latest start."""
        return self.root / f"server-{max(self._starts - 1, 0)}.log"

    def running(self) -> bool:
        """Whether the process is alive (not whether it answers yet)."""
        return self.process is not None and self.process.poll() is None

    def start(self, *, timeout: float = START_TIMEOUT) -> ChromaServer:
        """Start the server (again) and wait until it answers; raises ServerStartError if not."""
        if self.running():
            return self
        self.root.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "ANONYMIZED_TELEMETRY": "False", "ORT_DISABLE_TELEMETRY": "1"}
        command = [_chroma_executable(), "run", "--path", str(self.data)]
        command += ["--host", "127.0.0.1", "--port", str(self.port)]
        log = self.root / f"server-{self._starts}.log"
        self._starts += 1
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.running():
            if alive(self.url):
                return self
            time.sleep(0.1)
        self.stop()
        tail = log.read_text(errors="replace")[-2000:]
        msg = f"chroma run on port {self.port} did not answer within {timeout:.0f} s:\n{tail}"
        raise ServerStartError(msg)

    def stop(self, *, kill: bool = False) -> None:
        """Stop the server: SIGTERM (or SIGKILL with ``kill=True``), then wait for it to exit."""
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)

    def restart(self) -> ChromaServer:
        """Stop and start again on the same port and data."""
        self.stop()
        return self.start()


@contextmanager
def chroma_server(root: str | Path, *, attempts: int = 3) -> Iterator[ChromaServer]:
    """Run a Chroma server for the ``with`` block; always stopped at the end.

    A free port can be taken between probing and binding, so start-up is tried ``attempts`` times
    on fresh ports before ServerStartError.
    """
    problems: list[str] = []
    for _ in range(attempts):
        server = ChromaServer(root)
        try:
            server.start()
        except ServerStartError as exc:
            problems.append(str(exc))
            continue
        try:
            yield server
        finally:
            server.stop()
        return
    raise ServerStartError("\n".join(problems))
