"""The door ``ctxbudget mcp`` over stdio: a real server process, spoken to in JSON-RPC lines.

The process is ``ctxbudget <place options> mcp``, started on the driver's first use; the
handshake (``initialize``) is made on the first call, so a signal sent before it lands during
start-up. The driver writes the protocol's JSON lines itself, as any client may: the SDK's
client cannot send some valid JSON (a lone surrogate's ``\\ud800`` escape) and would hide a
request that never gets a reply behind its own timeout. A request without a reply in
`NO_REPLY` seconds is a `Refusal` of kind ``NoReply``.

Tools: ``remember`` (add), ``remember_fact`` (pin), ``context`` (send; what the client
receives is the document's ``messages``, the report is the rest of it), ``recall`` (k).
JSON has no NaN or infinities: those cases are `Inexpressible`. A tool error does not name the
error's class (no "kinds"). An embedded folder is held by the server process while it runs, so
the suite's admin (another process) can only share a Chroma server with it.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from mcp.types.version import LATEST_HANDSHAKE_VERSION

from .base import Inexpressible, Place, Received, Refusal, Turn
from .cli import BAD_SESSION, document_received, to_json
from .common import Registry

__all__ = ["COMMAND", "NO_REPLY", "McpStdio", "make"]

COMMAND = str(Path(sys.executable).parent / "ctxbudget")
ENV = {
    "ANONYMIZED_TELEMETRY": "False",
    "ORT_DISABLE_TELEMETRY": "1",
    "HF_HUB_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}
START = 120.0  # seconds for the handshake and the first call (the embedding model loads)
REPLY = 60.0  # seconds for a good call's reply
NO_REPLY = 20.0  # seconds after which a bad call counts as never answered
EXIT = 30.0  # seconds a server may take to store and exit once stdin is closed


class McpStdio:
    """A ``ctxbudget mcp`` process over stdio."""

    name = "mcp_stdio"
    can = frozenset({"add", "send", "report", "removal", "bad", "pin", "signals"})
    takes = frozenset({"budget", "k", "query", "text", "timestamp", "session_id", "user_id"})

    def __init__(self, place: Place) -> None:
        self.place = place
        self.registry = Registry()
        self._ids = itertools.count(1)
        self._replies: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        self._process: subprocess.Popen[bytes] | None = None
        self._reader: threading.Thread | None = None
        self._ready = False
        self._closed = False

    @property
    def process(self) -> subprocess.Popen[bytes]:
        """The server process, started on first use (a skipped test starts none)."""
        if self._process is None:
            self._process = subprocess.Popen(
                [COMMAND, *self.place.cli_options(), "mcp"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                env={**os.environ, **ENV},
            )
            self._reader = threading.Thread(target=self._read, daemon=True)
            self._reader.start()
        return self._process

    # -- the protocol ---------------------------------------------------------------------
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

    def _request(self, method: str, params: str, timeout: float) -> dict[str, Any] | None:
        """Send a request (``params``: its JSON text); its reply, or None when none came."""
        number = next(self._ids)
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

    def _start(self) -> None:
        if self._ready:
            return
        hello = {
            "protocolVersion": LATEST_HANDSHAKE_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "conformance", "version": "0"},
        }
        reply = self._request("initialize", json.dumps(hello), START)
        if reply is None or "result" not in reply:
            msg = f"the MCP server did not start: {reply}; stderr: {self.stderr()}"
            raise AssertionError(msg)
        self._write('{"jsonrpc": "2.0", "method": "notifications/initialized"}')
        self._ready = True

    def call(self, tool: str, arguments: str, timeout: float = REPLY) -> dict[str, Any] | None:
        """``tools/call`` of ``tool`` with ``arguments`` (JSON text): the reply, or None."""
        first = not self._ready
        self._start()
        params = f'{{"name": "{tool}", "arguments": {arguments}}}'
        return self._request("tools/call", params, START if first else timeout)

    def ok(self, tool: str, **arguments: Any) -> dict[str, Any]:
        """A call that must succeed: its structured result."""
        reply = self.call(tool, json.dumps(arguments))
        result = None if reply is None else reply.get("result")
        if not isinstance(result, dict) or result.get("isError"):
            msg = f"{tool} failed: {reply}; stderr: {self.stderr()}"
            raise AssertionError(msg)
        content = result.get("structuredContent")
        assert isinstance(content, dict), result
        return content

    def stderr(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode("utf-8", "replace")[-4000:]

    # -- the verbs --------------------------------------------------------------------------
    def add(self, session: str, user: str, turns: Sequence[Turn]) -> None:
        for turn in turns:
            self.ok(
                "remember", session_id=session, role=turn.role, text=turn.text, user_id=user,
                id=turn.id,
            )  # fmt: skip
            self.registry.note(turn.id, turn.text)

    def pin(self, text: str, id: str, session: str | None = None, user: str | None = None) -> None:
        scope = {"session_id": session} if session is not None else {"user_id": user}
        self.ok("remember_fact", text=text, id=id, **scope)
        self.registry.note(id, text)

    def send(self, session: str, user: str, query: str, budget: int) -> Received:
        document = self.ok(
            "context", session_id=session, question=query, budget=budget, user_id=user
        )
        return document_received(document, self.registry.texts)

    def bad(self, argument: str, value: object) -> Refusal | None:
        if isinstance(value, float) and not math.isfinite(value):
            msg = "JSON has no NaN or infinities: an MCP client cannot send one"
            raise Inexpressible(msg)
        tool, arguments = _bad_arguments(argument, to_json(value))
        reply = self.call(tool, arguments, NO_REPLY)
        if reply is None:
            alive = "running" if self.process.poll() is None else "exited"
            return Refusal("NoReply", f"no reply in {NO_REPLY:.0f} s (server {alive})", False)
        if "error" in reply:  # a JSON-RPC error, not a tool's
            error = reply["error"]
            return Refusal("JSONRPCError", str(error.get("message", error)), False)
        result = reply.get("result", {})
        if not result.get("isError"):
            return None
        text = "".join(
            b.get("text", "") for b in result.get("content", []) if isinstance(b, Mapping)
        )
        return Refusal("ToolError", text, "validation error" not in text.lower())

    def catching(self, signum: int, timeout: float) -> bool:
        """Wait until the process has its own handler for ``signum`` (Linux: /proc), unserved.

        From then on it is starting up (importing, opening its store) with the signal in its
        hands: a signal sent now tests start-up, not Python's default action.
        """
        mask = 1 << (int(signum) - 1)
        status = Path(f"/proc/{self.process.pid}/status")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.process.poll() is None:
            with contextlib.suppress(OSError):
                for line in status.read_text().splitlines():
                    if line.startswith("SigCgt:") and int(line.split()[1], 16) & mask:
                        return True
            time.sleep(0.01)
        return False

    def stop(self, signum: int, timeout: float) -> int | None:
        self.process.send_signal(signal.Signals(signum))
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            return None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._process is None:
            self._stderr.close()
            return
        try:
            if self.process.poll() is None and self.process.stdin is not None:
                self.process.stdin.close()  # a client leaving: the server stores and exits
                try:
                    self.process.wait(timeout=EXIT)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait()
        finally:
            for stream in (self.process.stdin, self.process.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
            if self._reader is not None:
                self._reader.join(timeout=5)
            self._stderr.close()

    def after_close(self) -> BaseException | None:
        return None  # no "close": a client ends a server by closing stdin or signalling it


def _bad_arguments(argument: str, value: str) -> tuple[str, str]:
    """The tool and its arguments (JSON text) that take ``argument=value``."""
    session = json.dumps(BAD_SESSION)
    if argument == "budget":
        return "context", f'{{"session_id": {session}, "question": "hello", "budget": {value}}}'
    if argument == "query":
        return "context", f'{{"session_id": {session}, "question": {value}, "budget": 500}}'
    if argument == "k":
        return "recall", f'{{"query": "hello", "session_id": {session}, "k": {value}}}'
    base = f'"role": "user", "id": "bad-{os.urandom(4).hex()}"'
    if argument == "text":
        return "remember", f'{{"session_id": {session}, {base}, "text": {value}}}'
    if argument == "timestamp":
        return "remember", (
            f'{{"session_id": {session}, {base}, "text": "hello", "timestamp": {value}}}'
        )
    if argument == "session_id":
        return "remember", f'{{"session_id": {value}, {base}, "text": "hello"}}'
    if argument == "user_id":
        return (
            "remember",
            f'{{"session_id": {session}, {base}, "text": "hello", "user_id": {value}}}',
        )
    return "context", (
        f'{{"session_id": {session}, "question": "hello", "budget": 500, "{argument}": {value}}}'
    )


def make(place: Place) -> McpStdio:
    """The driver of ``ctxbudget mcp`` over stdio on ``place``."""
    return McpStdio(place)
