"""Requests passed on to the MCP SDK and not answered yet: what the stdin relay waits for.

Before the relay (`ctxbudget.mcp.stdio`) ends the SDK's input it waits for the replies of the
requests in flight. Counting the requests the server's handlers are running (`CALLS`) misses
one the SDK has read but not dispatched yet: under load (a dispatch later than the relay's
quiet checks) its reply was dropped at SIGTERM (8 of 100 in one run). So the relay notes the id
of each request it passes on (`Awaiting.asked`), the stdout copier (`ctxbudget.mcp.stdout`)
strikes the id of each reply it sends (`Awaiting.answered`), a cancellation strikes the request
it cancels (the SDK need not answer it), and the relay waits until none is outstanding (at most
`ctxbudget.mcp.stdio.DRAIN` seconds).
"""

from __future__ import annotations

import threading

from pydantic_core import from_json

__all__ = ["AWAITING", "Awaiting"]

_HEAD = 256  # bytes of a reply read for its id: the SDK writes ``jsonrpc``, ``id``, then the rest


class Awaiting:
    """The ids of the requests passed on to the SDK that no reply answered yet (thread-safe)."""

    def __init__(self) -> None:
        self._ids: set[tuple[str, object]] = set()
        self._lock = threading.Lock()
        self.counting = False
        """Whether replies are counted (the stdout copier runs): else nothing is waited for."""

    def asked(self, lines: bytes) -> None:
        """Note the requests among ``lines`` (whole JSON-RPC lines the SDK is about to read)."""
        for line in lines.splitlines():
            message = _parsed(line)
            if message is None or not isinstance(message.get("method"), str):
                continue
            if "id" in message:
                with self._lock:
                    self._ids.add(_key(message["id"]))
            elif message["method"] == "notifications/cancelled":
                params = message.get("params")
                if isinstance(params, dict) and "requestId" in params:
                    with self._lock:
                        self._ids.discard(_key(params["requestId"]))

    def answered(self, lines: bytes) -> None:
        """Strike the requests ``lines`` (whole lines the SDK wrote to the client) answer."""
        for line in lines.splitlines():
            message = _parsed(line[:_HEAD], partial=True)
            if message is None or "id" not in message or not _reply(message):
                message = _parsed(line)  # a reply with its id further in
            if message is not None and "id" in message and _reply(message):
                with self._lock:
                    self._ids.discard(_key(message["id"]))

    @property
    def outstanding(self) -> int:
        """How many requests passed on wait for a reply (0 while replies are not counted)."""
        with self._lock:
            return len(self._ids) if self.counting else 0

    def clear(self) -> None:
        """Forget every request (a server that serves again starts with none)."""
        with self._lock:
            self._ids.clear()


def _parsed(line: bytes, *, partial: bool = False) -> dict[str, object] | None:
    try:
        value = from_json(line, allow_partial=partial)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _reply(message: dict[str, object]) -> bool:
    return "method" not in message and ("result" in message or "error" in message)


def _key(request_id: object) -> tuple[str, object]:
    """An id as a set member: 1 and "1" are different requests (a list or object never is)."""
    return (type(request_id).__name__, request_id if isinstance(request_id, str | int) else None)


#: The requests this process's stdin relay passed on and its stdout has not answered yet.
AWAITING = Awaiting()
