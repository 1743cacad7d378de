"""The door ``ctxbudget mcp --transport http``: a real server process, spoken to in HTTP POSTs.

The process is ``ctxbudget <place options> mcp --transport http --port 0`` (any free port on
127.0.0.1), started on the driver's first use; the address is the one it announces on stderr,
read with the handshake (``initialize``) on the first call, so a signal sent before it lands
during start-up. Each JSON-RPC message is one POST of raw JSON (httpx), as the server's own
HTTP tests send them (tests/cli/test_mcp_http_bodies.py); a reply comes as an SSE event or as
JSON (HTTP 4xx: the server's JSON-RPC error for a body it refuses). A body over the transport's
limit (`ctxbudget.mcp.posted.LIMIT`, 4 MiB: a 10 MB text) is refused with HTTP 413 before any
tool reads it, as documented (tests/cli/test_mcp_http_bodies.py): an HTTP client cannot give
this door such a value, so it is `Inexpressible` here, with the server's answer. The tools,
the verbs and what a refusal is: `_mcp` (shared with `mcp_stdio`). A client leaves by deleting
its MCP session; the server runs on until SIGTERM, then stores what it acknowledged and exits.
"""

from __future__ import annotations

import json
import re
import signal
import time
from collections.abc import Mapping
from typing import Any

import httpx
from mcp.types.version import LATEST_HANDSHAKE_VERSION

from ctxbudget.mcp.posted import LIMIT

from ._mcp import START, McpDoor
from .base import Inexpressible, Place

__all__ = ["McpHttp", "make"]

ANNOUNCED = re.compile(r"MCP server at (http://127\.0\.0\.1:\d+/mcp) ")


class McpHttp(McpDoor):
    """A ``ctxbudget mcp --transport http`` process."""

    name = "mcp_http"
    transport = ("--transport", "http", "--port", "0")

    def __init__(self, place: Place) -> None:
        super().__init__(place)
        self._http = httpx.Client()
        self._url: str | None = None
        self._headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }

    @property
    def url(self) -> str:
        """The address the server announced (waited for, up to `START` seconds)."""
        deadline = time.monotonic() + START
        while self._url is None:
            found = ANNOUNCED.search(self.stderr())
            if found:
                self._url = found[1]
            elif self.process.poll() is not None or time.monotonic() > deadline:
                msg = f"the MCP server announced no address; stderr: {self.stderr()}"
                raise AssertionError(msg)
            else:
                time.sleep(0.05)
        return self._url

    def _post(self, body: str, timeout: float) -> httpx.Response | None:
        """The response to one POST of ``body``, or None (no response in ``timeout`` s)."""
        try:
            return self._http.post(
                self.url, content=body.encode("utf-8"), headers=self._headers, timeout=timeout
            )
        except httpx.TransportError:  # a timeout, or the server went
            return None

    def request(self, method: str, params: str, timeout: float) -> dict[str, Any] | None:
        number = self.number()
        response = self._post(
            f'{{"jsonrpc": "2.0", "id": {number}, "method": "{method}", "params": {params}}}',
            timeout,
        )
        if response is None:
            return None
        if response.status_code == 413:  # the transport's limit, before any tool sees it
            msg = f"a POST over HTTP takes at most {LIMIT:,} bytes: {response.text[:300]}"
            raise Inexpressible(msg)
        self._session(response)
        for reply in _replies(response):
            if reply.get("id") == number or (reply.get("id") is None and "error" in reply):
                return reply
        message = f"HTTP {response.status_code} without a JSON-RPC reply: {response.text[:500]}"
        return {"jsonrpc": "2.0", "id": number, "error": {"code": 0, "message": message}}

    def notify(self, text: str) -> None:
        response = self._post(text, START)
        assert response is not None and response.status_code == 202, response

    def initialized(self, result: Mapping[str, Any]) -> None:
        version = str(result.get("protocolVersion", LATEST_HANDSHAKE_VERSION))
        self._headers["mcp-protocol-version"] = version

    def _session(self, response: httpx.Response) -> None:
        session = response.headers.get("mcp-session-id")
        if session is not None:
            self._headers.setdefault("mcp-session-id", session)

    def leave(self) -> None:
        if "mcp-session-id" in self._headers:  # a client leaving ends its MCP session
            try:
                self._http.delete(self.url, headers=self._headers, timeout=5)
            except httpx.TransportError:
                pass
        self.process.send_signal(signal.SIGTERM)  # a running server: stopped by its owner

    def closed(self) -> None:
        self._http.close()


def _replies(response: httpx.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a response: SSE events' data, or a JSON body (or array)."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        found = [
            line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")
        ]
    else:
        found = [response.text]
    replies: list[dict[str, Any]] = []
    for data in found:
        try:
            message = json.loads(data)
        except ValueError:
            continue
        for one in message if isinstance(message, list) else [message]:
            if isinstance(one, dict):
                replies.append(one)
    return replies


def make(place: Place) -> McpHttp:
    """The driver of ``ctxbudget mcp --transport http`` on ``place``."""
    return McpHttp(place)
