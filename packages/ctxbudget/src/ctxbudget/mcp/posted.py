r"""The body of each HTTP POST, answered as the stdio relay answers a line (streamable HTTP).

The SDK's streamable HTTP transport reads a POST's body with its own JSON parser and answers
one it cannot read with HTTP 400 and pydantic's validation text (``4 validation errors for
union[JSONRPCRequest, ...] ... [type=model_type ...]``), as ``-32602`` whatever was wrong; a
lone surrogate escape (``"\ud800"``, valid JSON) is a "parse error"; a request with ``"id":
null`` is taken for a notification (202, never answered); a body over its size limit gets a
plain-text 413. `checked_bodies` wraps the transport's ASGI app and reads each POST's body
first, as the stdio relay reads a line (`ctxbudget.mcp.stdio`, `ctxbudget.mcp.malformed`).
The SDK's own header checks come before it (`SECURITY`: ``Content-Type``, and the ``Host`` and
``Origin`` of DNS rebinding protection), so a request the SDK refuses unread gets the SDK's
refusal (HTTP 400, 421 or 403), whatever its body, and its body is never read. Then:

- values the SDK's parser refuses are rewritten (`ctxbudget.mcp.stdio.readable`), so they reach
  the core's checks and are refused with its message;
- a body the SDK would refuse gets HTTP 400 and the JSON-RPC error the stdio transport sends for
  that line: -32700 for one that is not JSON, -32600 for a batch (an array of errors, one per
  request in it), a message that is not an object, ``"jsonrpc"`` other than ``"2.0"``, no
  ``"method"`` or an id that is no string or integer; -32602 for ``params`` that is not an
  object. A notification or a response the SDK cannot read gets one too (HTTP must answer);
- a body over `LIMIT` gets HTTP 413 with a JSON-RPC error saying the limit;
- a request whose id is the id of one the same MCP session is still answering gets HTTP 409
  and a JSON-RPC error saying so, and is not run: the SDK keeps one reply stream per id, so of
  two such requests one was never answered (its client waited until the connection dropped)
  and another got an empty reply, though both were done.

A request with more than one ``Host`` header (any method) gets HTTP 400: which one the client
meant is unsaid, and the SDK's check would read the first. A POST's ``Content-Type`` reaches the
SDK with its media type in lower case (``Application/JSON`` is ``application/json``; the SDK's
transport compared it case-sensitively and answered 415). Everything else reaches the SDK as it
was sent.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp.types import INVALID_PARAMS, INVALID_REQUEST, jsonrpc_message_adapter
from pydantic import ValidationError
from starlette.requests import Request

from ctxbudget.mcp.malformed import reply_to
from ctxbudget.mcp.stdio import readable

__all__ = ["LIMIT", "SECURITY", "checked_bodies", "reply_to_body"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

_SESSION = b"mcp-session-id"

#: The largest body taken, in bytes (the SDK's own limit: 4 MiB).
LIMIT = 4 * 1024 * 1024

#: The hosts and origins a request may name: the loopback names (the SDK's own settings for a
#: server on 127.0.0.1). Give the same to the SDK's app and to `checked_bodies`.
SECURITY = TransportSecuritySettings(
    enable_dns_rebinding_protection=True,
    allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
    allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
)


def checked_bodies(app: App, path: str, security: TransportSecuritySettings = SECURITY) -> App:
    """``app`` with each POST to ``path`` read first (see the module docstring).

    ``security``: the header checks ``app`` makes (its ``transport_security``), made before the
    body is read; a request they refuse gets the SDK's own response.
    """
    in_flight: set[tuple[bytes, str]] = set()  # (MCP session, request id) being answered
    headers_checked = TransportSecurityMiddleware(security)

    async def checked(scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") == "http" and _hosts(scope) > 1:
            await _respond(send, 400, _error(INVALID_REQUEST, _TWO_HOSTS))
            return
        if scope.get("type") != "http" or scope.get("method") != "POST" or scope["path"] != path:
            await app(scope, receive, send)
            return
        refused = await headers_checked.validate_request(Request(scope), is_post=True)
        if refused is not None:  # the SDK's refusal (bad Host, Origin or Content-Type), unread
            await refused(scope, receive, send)
            return
        body, more = bytearray(), True
        while more:
            message = await receive()
            if message.get("type") != "http.request":
                return  # the client went before its body was whole: nobody to answer
            body += message.get("body", b"")
            more = bool(message.get("more_body"))
            if len(body) > LIMIT:
                await _respond(send, 413, _too_large())
                return
        passed, reply = reply_to_body(bytes(body))
        if reply is not None:
            await _respond(send, 400, reply)
            return
        key = _request_key(scope, passed)
        if key is not None and key in in_flight:
            await _respond(send, 409, _id_in_use(passed))
            return
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": passed, "more_body": False}
            return await receive()

        headers = [
            (k, _media_type(v) if k.lower() == b"content-type" else v)
            for k, v in scope.get("headers", [])
            if k.lower() != b"content-length"
        ]
        headers.append((b"content-length", str(len(passed)).encode()))
        if key is not None:
            in_flight.add(key)
        try:
            await app({**scope, "headers": headers}, replay, send)
        finally:
            if key is not None:
                in_flight.discard(key)

    return checked


_TWO_HOSTS = (
    "Invalid request: the request names more than one Host; send one Host header, the "
    "server's own (127.0.0.1:PORT or localhost:PORT)"
)


def _hosts(scope: Scope) -> int:
    """How many ``Host`` headers the request has (more than one: which was meant is unsaid)."""
    return sum(1 for k, _ in scope.get("headers", []) if k.lower() == b"host")


def _media_type(value: bytes) -> bytes:
    """A ``Content-Type`` with its media type in lower case, as the SDK's transport compares it.

    Media types are case-insensitive (RFC 9110); ``Application/JSON`` got HTTP 415.
    """
    media, semicolon, rest = value.partition(b";")
    return media.strip().lower() + semicolon + rest


def _request_key(scope: Scope, body: bytes) -> tuple[bytes, str] | None:
    """(MCP session, request id) of a request in a session (None: no session, or no request).

    The SDK keeps one reply stream per ``str(id)`` in a session: a second request with the id
    of one it is still answering takes the first one's stream, and one of them is never answered.
    """
    session = next((v for k, v in scope.get("headers", []) if k.lower() == _SESSION), None)
    if session is None:
        return None
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict) or "method" not in message or "id" not in message:
        return None
    return session, str(message["id"])


def _id_in_use(body: bytes) -> bytes:
    found = json.loads(body)["id"]
    msg = (
        f"Invalid request: id {json.dumps(found)} is the id of a request this session is still "
        "answering; give each request in flight an id of its own (nothing was done for this one)"
    )
    reply = {"jsonrpc": "2.0", "id": found, "error": {"code": INVALID_REQUEST, "message": msg}}
    return json.dumps(reply).encode()


def reply_to_body(body: bytes) -> tuple[bytes, bytes | None]:
    """The body to pass on, and the error reply (JSON) for one the SDK cannot read (else None).

    >>> reply_to_body(b'[{"jsonrpc": "2.0", "id": 7, "method": "ping"}]')[1][:48]
    b'[{"jsonrpc": "2.0", "id": 7, "error": {"code": -'
    """
    passed = readable(body)
    if not passed.strip():
        return passed, _error(INVALID_REQUEST, "Invalid request: the body is empty; " + _SEND)
    reply = reply_to(passed)
    if reply is None:
        try:
            jsonrpc_message_adapter.validate_json(passed, by_name=False)
        except ValidationError:
            return passed, _unreadable(passed)  # a notification or a response: HTTP answers
        return passed, None
    for line_said, body_said in _WORDS:
        reply = reply.replace(line_said, body_said)
    replies = [json.loads(line) for line in reply.splitlines()]
    try:
        batch = passed.lstrip().startswith(b"[") and bool(json.loads(passed))
    except (ValueError, RecursionError):
        batch = False
    if batch:  # JSON-RPC answers a batch with an array
        return passed, json.dumps(replies).encode()
    return passed, reply.rstrip(b"\n")


#: The stdio transport's words for a line, and what they are for a body (JSON-escaped).
_WORDS = [
    (b"the line is not JSON", b"the body is not JSON"),
    (b"MCP reads one message per line", b"MCP takes one message per request"),
    (
        b"send each JSON-RPC message as one JSON object on a line of its own",
        b"send each JSON-RPC message as one JSON object, in a POST of its own",
    ),
    (b"JSON-RPC 2.0 request MCP can read; send each", b"JSON-RPC 2.0 request MCP can read; send"),
]

_SEND = 'send one JSON-RPC 2.0 message as a JSON object, e.g. {"jsonrpc": "2.0", ...}'


def _unreadable(body: bytes) -> bytes:
    """The reply to a notification or response the SDK cannot read (JSON-RPC answers neither)."""
    message = json.loads(body)
    if (
        isinstance(message, dict)
        and "params" in message
        and not isinstance(message["params"], dict)
    ):
        method = message.get("method")
        msg = (
            f"Invalid params: {method} takes its params as an object of names and values (MCP "
            'passes parameters by name); send "params": {"name": value, ...}'
        )
        return _error(INVALID_PARAMS, msg)
    what = "notification" if isinstance(message, dict) and "method" in message else "message"
    return _error(INVALID_REQUEST, f"Invalid request: a {what} MCP cannot read; {_SEND}")


def _too_large() -> bytes:
    msg = (
        f"Invalid request: the body is larger than {LIMIT // (1024 * 1024)} MiB, the most this "
        "server takes in one request; send less (a long text in several messages)"
    )
    return _error(INVALID_REQUEST, msg)


def _error(code: int, message: str) -> bytes:
    reply = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}
    return json.dumps(reply).encode()


async def _respond(send: Send, status: int, body: bytes) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})
