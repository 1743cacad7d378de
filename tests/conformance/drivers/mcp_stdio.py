"""The door ``ctxbudget mcp`` over stdio: a real server process, spoken to in JSON-RPC lines.

The process is ``ctxbudget <place options> mcp``, started on the driver's first use; the
handshake (``initialize``) is made on the first call, so a signal sent before it lands during
start-up. The tools, the verbs and what a refusal is: `_mcp` (shared with `mcp_http`). A
client leaves by closing stdin: the server stores what it acknowledged and exits.
"""

from __future__ import annotations

import contextlib
import json
import queue
import threading
from typing import Any

from ._mcp import COMMAND, NO_REPLY, McpDoor
from .base import Place

__all__ = ["COMMAND", "NO_REPLY", "McpStdio", "make"]


class McpStdio(McpDoor):
    """A ``ctxbudget mcp`` process over stdio."""

    name = "mcp_stdio"
    reads_stdout = True

    def __init__(self, place: Place) -> None:
        super().__init__(place)
        self._replies: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._reader: threading.Thread | None = None

    def started(self) -> None:
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        for line in stdout:
            with contextlib.suppress(ValueError):
                self._replies.put(json.loads(line))
        self._replies.put(None)  # the server closed stdout

    def _write(self, text: str) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        stdin.write(text.encode("utf-8") + b"\n")
        stdin.flush()

    def request(self, method: str, params: str, timeout: float) -> dict[str, Any] | None:
        number = self.number()
        self._write(
            f'{{"jsonrpc": "2.0", "id": {number}, "method": "{method}", "params": {params}}}'
        )
        while True:
            try:
                reply = self._replies.get(timeout=timeout)
            except queue.Empty:
                return None
            if reply is None:
                return None
            if reply.get("id") == number:
                return reply

    def notify(self, text: str) -> None:
        self._write(text)

    def leave(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()  # a client leaving: the server stores and exits

    def closed(self) -> None:
        if self._reader is not None:
            self._reader.join(timeout=5)


def make(place: Place) -> McpStdio:
    """The driver of ``ctxbudget mcp`` over stdio on ``place``."""
    return McpStdio(place)
