"""The JSON-RPC error for a stdin line the MCP SDK drops without a reply.

The SDK reads each line of stdin as one JSON-RPC message; a line its parser refuses (truncated
JSON, a batch, ``"jsonrpc": "1.0"``, ``params`` as an array, an id that is no string or integer)
is logged and dropped, and a client waiting for the reply waits forever. The stdio relay
(`ctxbudget.mcp.stdio`) asks `reply_to` about each line before passing it on; for one the SDK
would drop, it writes this reply itself (`ctxbudget.mcp.stdout`) and passes nothing on.

The line is tried with the SDK's own parser (``jsonrpc_message_adapter``), so what the SDK
answers is never answered twice. What JSON-RPC 2.0 says is answered:

- not JSON: parse error (-32700), id null;
- JSON that is not a request: invalid request (-32600), with the request's id when it has one
  the SDK can read (a string or an integer), else null; a batch gets one per request in it (MCP
  takes one message per line, so the replies are lines too), or one with id null;
- a request whose ``params`` is not an object (JSON-RPC's by-position form): invalid params
  (-32602), with its id;
- a notification or a response the SDK cannot read: nothing (JSON-RPC answers neither).

Each message says what was wrong, where, and what to send instead.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from mcp.types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    JSONRPCNotification,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError

from ctxbudget.core.numbers import shown
from ctxbudget.mcp.stdio import TAG, Refuse, restore

if TYPE_CHECKING:
    from ctxbudget.mcp.stdout import Replies

__all__ = ["answered_by", "reply_to"]

_ONE_PER_LINE = "send each JSON-RPC message as one JSON object on a line of its own"


def reply_to(line: bytes) -> bytes | None:
    """The error reply (JSON lines) for ``line`` as the SDK reads it; None: the SDK answers it.

    >>> reply_to(b'{"jsonrpc": "2.0", "id": 1, "method": "pi')[:60]
    b'{"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "me'
    """
    text = line.decode("utf-8", "replace").rstrip("\r\n")
    if not text.strip():
        return None  # a blank line: nothing was asked
    try:
        read = jsonrpc_message_adapter.validate_json(text, by_name=False)
    except ValidationError:
        pass
    else:
        if isinstance(read, JSONRPCNotification) and '"id"' in text:
            return _request(json.loads(text))  # an id it cannot read: taken for a notification
        return None
    try:
        message = json.loads(text)
    except json.JSONDecodeError as exc:
        said = exc.msg if exc.msg.endswith(" at") else f"{exc.msg} at"
        msg = f"Parse error: the line is not JSON ({said} character {exc.pos + 1}); {_ONE_PER_LINE}"
        return _error(None, PARSE_ERROR, msg)
    except (ValueError, RecursionError):
        return _error(None, PARSE_ERROR, f"Parse error: the line is not JSON; {_ONE_PER_LINE}")
    if isinstance(message, list):
        return _batch(message)
    if not isinstance(message, dict):
        msg = f"Invalid request: a message is a JSON object, got {_json(message)}; {_ONE_PER_LINE}"
        return _error(None, INVALID_REQUEST, msg)
    return _request(message)


def answered_by(replies: Replies) -> Refuse:
    """The relay's `Refuse`: each line the SDK would drop is answered through ``replies``."""

    def refuse(line: bytes) -> bool:
        reply = reply_to(line)
        if reply is None:
            return False
        replies.send(reply)
        return True

    return refuse


def _batch(messages: list[Any]) -> bytes:
    said = (
        "Invalid request: a batch (a JSON array of messages) is not taken, MCP reads one message "
        f"per line; {_ONE_PER_LINE}"
    )
    ids = [_id(item.get("id")) for item in messages if isinstance(item, dict) and "method" in item]
    replies = [_error(found, INVALID_REQUEST, said) for found in ids if found is not None]
    return b"".join(replies) if replies else _error(None, INVALID_REQUEST, said)


def _request(message: dict[str, Any]) -> bytes | None:
    """The reply to an object the SDK refused (None: a notification or a response)."""
    given = message.get("id")
    found = _id(given)
    version = message.get("jsonrpc")
    if version != "2.0":
        got = "none" if "jsonrpc" not in message else _json(version)
        msg = (
            f'Invalid request: "jsonrpc" must be "2.0" (this server speaks JSON-RPC 2.0), got {got}'
        )
        return _error(found, INVALID_REQUEST, msg)
    if "id" in message and found is None:
        msg = (
            f"Invalid request: id must be a string or an integer, got {_shown_id(given)}; "
            "use an id of plain text or a whole number (without one, a message is a "
            "notification and gets no reply)"
        )
        return _error(None, INVALID_REQUEST, msg)
    if "method" not in message:
        if "result" in message or "error" in message:
            return None  # a response of the client's: never answered
        msg = 'Invalid request: a request needs a "method" (the MCP method, e.g. "tools/call")'
        return _error(found, INVALID_REQUEST, msg)
    method = message["method"]
    if not isinstance(method, str):
        got = _json(method)
        msg = f'Invalid request: "method" must be a string (e.g. "tools/call"), got {got}'
        return _error(found, INVALID_REQUEST, msg)
    if found is None:
        return None  # a notification: JSON-RPC answers none, even a wrong one
    params = message.get("params")
    if "params" in message and not isinstance(params, dict):
        msg = (
            f"Invalid params: {method} takes its params as an object of names and values (MCP "
            f"passes parameters by name), got {_json(params)}; send "
            '"params": {"name": value, ...}'
        )
        return _error(found, INVALID_PARAMS, msg)
    msg = f"Invalid request: {method} is not a JSON-RPC 2.0 request MCP can read; {_ONE_PER_LINE}"
    return _error(found, INVALID_REQUEST, msg)


def _id(value: object) -> str | int | None:
    """A request id the SDK can read, echoed in the reply (None: none to echo)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return value if isinstance(value, str) else None


def _shown_id(value: object) -> str:
    """An id the relay rewrote (`ctxbudget.mcp.stdio`), said as the client sent it."""
    written = value.get(TAG) if isinstance(value, dict) else None
    if not isinstance(written, str):
        return _json(value)
    digits = written.removeprefix("-")
    if digits.isascii() and digits.isdigit():
        return f"an integer of {len(digits):,} digits (more than JSON-RPC ids here can hold)"
    return f"a string holding a lone surrogate ({_json(value)})"


def _json(value: object) -> str:
    """``value`` as the client wrote it (JSON), at most 80 characters."""
    value = restore(value)
    try:
        text = json.dumps(value)
    except (ValueError, RecursionError):
        return shown(value)
    return text if len(text) <= 80 else shown(value)


def _error(found: str | int | None, code: int, message: str) -> bytes:
    reply = {"jsonrpc": "2.0", "id": found, "error": {"code": code, "message": message}}
    return json.dumps(reply).encode() + b"\n"
