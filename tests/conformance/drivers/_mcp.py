"""What the two doors of ``ctxbudget mcp`` share: the tools, the verbs, the server process.

A transport's driver (`mcp_stdio`, `mcp_http`) subclasses `McpDoor` with how it starts the
process (`McpDoor.transport`), sends a request and a notification (`McpDoor.request`,
`McpDoor.notify`) and leaves (`McpDoor.leave`); the handshake, the tools and the signals are
here. The drivers write the protocol's JSON themselves, as any client may: the SDK's client
cannot send some valid JSON (a lone surrogate's ``\\ud800`` escape) and would hide a request
that never gets a reply behind its own timeout. A request without a reply in `NO_REPLY`
seconds is a `Refusal` of kind ``NoReply``.

Tools: ``remember`` (add), ``remember_fact`` (pin), ``edit_message`` (edit), ``context`` (send;
what the client receives is the document's ``messages``, the report is the rest of it),
``recall`` (k).
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
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from mcp.types.version import LATEST_HANDSHAKE_VERSION

from .base import Inexpressible, Place, Received, Refusal, Turn
from .cli import BAD_SESSION, document_received, to_json
from .common import Registry

__all__ = ["COMMAND", "ENV", "EXIT", "NO_REPLY", "REPLY", "START", "McpDoor", "bad_arguments"]

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
EXIT = 30.0  # seconds a server may take to store and exit once told to


class McpDoor:
    """A ``ctxbudget mcp`` process, spoken to in JSON-RPC over one transport."""

    name = "mcp"
    can = frozenset({"add", "send", "report", "removal", "bad", "pin", "signals", "edit"})
    takes = frozenset({"budget", "k", "query", "text", "timestamp", "session_id", "user_id"})
    transport: tuple[str, ...] = ()
    """The ``mcp`` command's options for the transport."""
    reads_stdout = False
    """The protocol is on the process's stdout (else stdout goes nowhere)."""

    def __init__(self, place: Place) -> None:
        self.place = place
        self.registry = Registry()
        self.ids = itertools.count(1)
        self._stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        self._process: subprocess.Popen[bytes] | None = None
        self._ready = False
        self._closed = False

    @property
    def process(self) -> subprocess.Popen[bytes]:
        """The server process, started on first use (a skipped test starts none)."""
        if self._process is None:
            self._process = subprocess.Popen(
                [COMMAND, *self.place.cli_options(), "mcp", *self.transport],
                stdin=subprocess.PIPE,  # left open: a signal stops it whatever stdin does
                stdout=subprocess.PIPE if self.reads_stdout else subprocess.DEVNULL,
                stderr=self._stderr,
                env={**os.environ, **ENV},
            )
            self.started()
        return self._process

    # -- the transport (a subclass's) -------------------------------------------------------
    def started(self) -> None:
        """Called once the process is started."""

    def request(self, method: str, params: str, timeout: float) -> dict[str, Any] | None:
        """Send a request (``params``: its JSON text); its reply, or None when none came."""
        raise NotImplementedError

    def notify(self, text: str) -> None:
        """Send a notification (its JSON text)."""
        raise NotImplementedError

    def initialized(self, result: Mapping[str, Any]) -> None:
        """Called with the ``initialize`` result, before ``notifications/initialized``."""

    def leave(self) -> None:
        """End the connection as a client leaving does, the process still running."""

    # -- the protocol -----------------------------------------------------------------------
    def number(self) -> int:
        """A new request id."""
        return next(self.ids)

    def _start(self) -> None:
        if self._ready:
            return
        hello = {
            "protocolVersion": LATEST_HANDSHAKE_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "conformance", "version": "0"},
        }
        reply = self.request("initialize", json.dumps(hello), START)
        if reply is None or not isinstance(reply.get("result"), dict):
            msg = f"the MCP server did not start: {reply}; stderr: {self.stderr()}"
            raise AssertionError(msg)
        self.initialized(reply["result"])
        self.notify('{"jsonrpc": "2.0", "method": "notifications/initialized"}')
        self._ready = True

    def call(self, tool: str, arguments: str, timeout: float = REPLY) -> dict[str, Any] | None:
        """``tools/call`` of ``tool`` with ``arguments`` (JSON text): the reply, or None."""
        first = not self._ready
        self._start()
        params = f'{{"name": "{tool}", "arguments": {arguments}}}'
        return self.request("tools/call", params, START if first else timeout)

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

    def edit(self, session: str, user: str, id: str, text: str) -> None:  # noqa: A002
        self.ok("edit_message", session_id=session, id=id, text=text, user_id=user)
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
        tool, arguments = bad_arguments(argument, to_json(value))
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
        return self._wait(timeout)

    def _wait(self, timeout: float) -> int | None:
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
            self.closed()
            self._stderr.close()
            return
        try:
            if self.process.poll() is None:
                self.leave()
                self._wait(EXIT)
        finally:
            for stream in (self.process.stdin, self.process.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
            self.closed()
            self._stderr.close()

    def closed(self) -> None:
        """Called once the process has ended (or never started): let go of the transport."""

    def after_close(self) -> BaseException | None:
        return None  # no "close": a client ends a server by leaving or signalling it


def bad_arguments(argument: str, value: str) -> tuple[str, str]:
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
