r"""``ctxbudget mcp``: values the stdio relay rewrote are said as sent, and HTTP header edges.

The relay rewrites a value the SDK's parser refuses (a lone surrogate escape, ``"\ud800"``) as
an object under its own tag (`ctxbudget.mcp.stdio`). Before 2026-11-30 only a call's arguments
were turned back: a tool name holding one was refused as "an object" quoting the tag (which a
client could then forge), ``arguments`` sent as such a string was read as an object and each of
its characters refused as an argument name, and a ``_meta`` value was quoted with the tag too.

An id of more than 4,300 digits (rewritten too) was said to be "a string holding a lone
surrogate", followed by all of its digits.

Over HTTP, a request with two ``Host`` headers was served (the SDK checks the first), and a POST
whose ``Content-Type`` is ``Application/JSON`` (media types are case-insensitive) got HTTP 415
after the SDK had opened an MCP session for it.

Real server processes (stdio: the ``raw`` fixture of conftest.py; HTTP: `HttpServer`).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from test_mcp_http_bodies import HttpServer, reply_of
from test_mcp_raw import RawServer

TAGGED = "$ctxbudget.json"  # the start of the relay's tag: never shown to a client


def request(raw: RawServer, params: str) -> dict[str, Any]:
    """The reply to a ``tools/call`` with ``params`` written as given."""
    number = next(raw.ids)
    raw.send_line(
        f'{{"jsonrpc": "2.0", "id": {number}, "method": "tools/call", "params": {params}}}'
    )
    reply = raw.reply()
    assert reply["id"] == number, reply
    assert TAGGED not in json.dumps(reply), reply
    return reply


def still_serving(raw: RawServer) -> None:
    assert raw.call("sessions", "{}")["structuredContent"]["sessions"] == ["s"]


def test_a_tool_name_holding_a_lone_surrogate_is_no_tool(raw: RawServer) -> None:
    reply = request(raw, '{"name": "remember\\ud800", "arguments": {}}')
    result = reply["result"]
    assert result["isError"] is True, reply
    text = result["content"][0]["text"]
    assert text.startswith("no tool 'remember\\ud800'"), text
    assert "'context'" in text  # the tools it has
    still_serving(raw)


@pytest.mark.parametrize("arguments", ['"\\ud800"', '"ab\\udfff"', '["\\ud800"]'])
def test_arguments_that_are_no_object_are_said_so_whatever_they_hold(
    raw: RawServer, arguments: str
) -> None:
    reply = request(raw, f'{{"name": "remember", "arguments": {arguments}}}')
    error = reply["error"]
    assert error["code"] == -32602, reply
    assert "arguments must be an object of argument names and values" in error["message"]
    kind = "an array" if arguments.startswith("[") else "a string"
    assert f"got {kind}" in error["message"], error
    assert "has no argument" not in error["message"]
    still_serving(raw)


def test_a_meta_value_holding_a_lone_surrogate_is_said_as_sent(raw: RawServer) -> None:
    reply = request(
        raw,
        '{"name": "sessions", "arguments": {}, "_meta": {"progressToken": "\\ud800"}}',
    )
    message = reply["error"]["message"]
    assert "params._meta.progressToken" in message, message
    assert 'a string holding a lone surrogate ("\\ud800")' in message, message
    still_serving(raw)


def test_nothing_rewritten_reaches_the_store(raw: RawServer) -> None:
    request(raw, '{"name": "remember\\ud800", "arguments": {"session_id": "s2", "role": "user", '
                 '"text": "x"}}')  # fmt: skip
    request(raw, '{"name": "remember", "arguments": "\\ud800"}')
    still_serving(raw)  # only "s" holds anything


@pytest.mark.parametrize("digits", [4400, 5000])
def test_an_id_of_too_many_digits_is_said_so(raw: RawServer, digits: int) -> None:
    raw.send_line(f'{{"jsonrpc": "2.0", "id": {"7" * digits}, "method": "ping"}}')
    reply = raw.reply()
    assert reply["id"] is None and reply["error"]["code"] == -32600, str(reply)[:300]
    message = reply["error"]["message"]
    assert f"got an integer of {digits:,} digits" in message, message[:300]
    assert "lone surrogate" not in message and "7" * 100 not in message, message[:300]
    still_serving(raw)


# -- HTTP headers -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    folder = tmp_path_factory.mktemp("mcp-probe2-http")
    served = HttpServer(folder / "store", folder / "stderr.txt")
    try:
        yield served
    finally:
        served.stop()


def raw_http(url: str, head: str, body: bytes = b"") -> tuple[int, bytes]:
    """Send ``head`` (request line and headers, CRLF-joined by the caller) and ``body``."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=60) as sock:
        sock.sendall(head.encode("latin-1") + b"\r\n" + body)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    status = int(answer.split(b" ", 2)[1])
    return status, answer.partition(b"\r\n\r\n")[2]


@pytest.mark.parametrize("order", ["own first", "foreign first"])
def test_two_host_headers_are_refused(http: HttpServer, order: str) -> None:
    own = f"127.0.0.1:{urlsplit(http.url).port}"
    hosts = [own, "evil.example"] if order == "own first" else ["evil.example", own]
    body = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
    for method in ("POST", "GET", "DELETE"):
        head = (
            f"{method} /mcp HTTP/1.1\r\n"
            + "".join(f"Host: {h}\r\n" for h in hosts)
            + "Content-Type: application/json\r\n"
            "Accept: application/json, text/event-stream\r\n"
            f"mcp-session-id: {http.headers['mcp-session-id']}\r\n"
            f"Content-Length: {len(body) if method == 'POST' else 0}\r\n"
            "Connection: close\r\n"
        )
        status, answer = raw_http(http.url, head, body if method == "POST" else b"")
        assert status == 400, (method, order, answer)
        error = json.loads(answer)["error"]
        assert error["code"] == -32600 and "more than one Host" in error["message"], error
    http.still_serving()  # the session was not ended by the refused DELETE


@pytest.mark.parametrize(
    "content_type", ["Application/JSON", "APPLICATION/JSON; charset=utf-8", "application/json"]
)
def test_a_media_type_in_any_case_is_served(http: HttpServer, content_type: str) -> None:
    number = next(http.ids)
    response = http.http.post(
        http.url,
        content=f'{{"jsonrpc": "2.0", "id": {number}, "method": "ping"}}'.encode(),
        headers={**http.headers, "Content-Type": content_type},
    )
    assert response.status_code == 200, response.text
    assert reply_of(response) == {"jsonrpc": "2.0", "id": number, "result": {}}


def test_an_id_of_too_many_digits_is_said_so_over_http(http: HttpServer) -> None:
    response = http.post(f'{{"jsonrpc": "2.0", "id": {"7" * 5000}, "method": "ping"}}')
    assert response.status_code == 400, response.text[:300]
    message = response.json()["error"]["message"]
    assert "got an integer of 5,000 digits" in message and "lone surrogate" not in message


def test_another_media_type_is_still_refused(http: HttpServer) -> None:
    response = http.http.post(
        http.url,
        content=b'{"jsonrpc": "2.0", "id": 7, "method": "ping"}',
        headers={**http.headers, "Content-Type": "text/plain"},
    )
    assert response.status_code == 400, response.text
    http.still_serving()
