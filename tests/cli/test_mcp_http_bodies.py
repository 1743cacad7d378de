r"""``ctxbudget mcp --transport http``: a body the SDK cannot read gets the stdio transport's error.

Before, the SDK answered such a POST with HTTP 400 and pydantic's validation text (``4
validation errors for union[JSONRPCRequest, ...] ... [type=model_type ...]``) as -32602 for a
batch, a message that is not an object, ``"jsonrpc": "1.0"`` or a missing method; a lone
surrogate escape (``"\ud800"``, valid JSON) was a "parse error" instead of the core's refusal;
``"id": null`` was taken for a notification and never answered; an oversized body got plain
text. `ctxbudget.mcp.posted` reads each body first. Raw POSTs (httpx) to a real server process:
no client SDK sends these.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_mcp import COMMAND, ENV, TIMEOUT, stored_texts, wait_for_address

from ctxbudget.mcp.posted import LIMIT, reply_to_body


def reply_of(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC reply a 200 holds: the JSON body (the server's way), or an SSE event's."""
    if not response.headers.get("content-type", "").startswith("text/event-stream"):
        body: dict[str, Any] = response.json()
        return body
    data = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
    assert data, "an empty reply"
    reply: dict[str, Any] = json.loads(data[-1])
    return reply


class HttpServer:
    """A ``ctxbudget mcp --transport http`` process and one initialized MCP session of raw POSTs."""

    def __init__(self, store: Path, log: Path) -> None:
        self.store = store
        argv = [COMMAND, "--path", str(store), "mcp", "--transport", "http", "--port", "0"]
        with log.open("w", encoding="utf-8") as errlog:
            self.process = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errlog,
                env={**os.environ, **ENV},
            )  # fmt: skip
        self.url = wait_for_address(log, self.process)
        self.http = httpx.Client(timeout=TIMEOUT)
        self.headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        self.ids = iter(range(1, 1_000_000))
        reply = self.post(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 0,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {},
                        "clientInfo": {"name": "test", "version": "0"},
                    },
                }
            )
        )
        assert reply.status_code == 200, reply.text
        self.headers["mcp-session-id"] = reply.headers["mcp-session-id"]
        self.headers["mcp-protocol-version"] = "2025-06-18"
        done = self.post('{"jsonrpc": "2.0", "method": "notifications/initialized"}')
        assert done.status_code == 202, done.text

    def post(self, body: str | bytes) -> httpx.Response:
        content = body.encode() if isinstance(body, str) else body
        return self.http.post(self.url, content=content, headers=self.headers)

    def answer(self, body: str) -> dict[str, Any]:
        """The JSON-RPC reply to a request the SDK answers (`reply_of`)."""
        response = self.post(body)
        assert response.status_code == 200, response.text
        return reply_of(response)

    def call(self, tool: str, arguments: str) -> dict[str, Any]:
        number = next(self.ids)
        reply = self.answer(
            f'{{"jsonrpc": "2.0", "id": {number}, "method": "tools/call", '
            f'"params": {{"name": "{tool}", "arguments": {arguments}}}}}'
        )
        assert reply["id"] == number, reply
        result: dict[str, Any] = reply["result"]
        return result

    def still_serving(self) -> None:
        number = next(self.ids)
        reply = self.answer(f'{{"jsonrpc": "2.0", "id": {number}, "method": "ping"}}')
        assert reply == {"jsonrpc": "2.0", "id": number, "result": {}}

    def stop(self) -> None:
        self.http.close()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    folder = tmp_path_factory.mktemp("mcp-http-bodies")
    served = HttpServer(folder / "store", folder / "stderr.txt")
    try:
        yield served
    finally:
        served.stop()


SURROGATE_ID = '{"jsonrpc": "2.0", "id": "\\ud800", "method": "ping"}'
BODIES = [
    # (body, code, id, words the message holds)
    ('{"jsonrpc": "2.0", "id": 41, "method": "pi', -32700, None, ["Parse error", "not JSON"]),
    ("not json at all", -32700, None, ["the body is not JSON"]),
    ('"ping"', -32600, None, ['a message is a JSON object, got "ping"']),
    ("[]", -32600, None, ["a batch"]),
    ('{"jsonrpc": "2.0", "id": 43, "method": "ping", "params": []}', -32602, 43, ["by name"]),
    (SURROGATE_ID, -32600, None, ["id must be a string or an integer", "lone surrogate"]),
    ('{"jsonrpc": "2.0", "id": null, "method": "ping"}', -32600, None, ["got null"]),
    ('{"jsonrpc": "2.0", "id": 4.5, "method": "ping"}', -32600, None, ["got 4.5"]),
    ('{"jsonrpc": "1.0", "id": 44, "method": "ping"}', -32600, 44, ['must be "2.0"', '"1.0"']),
    ('{"id": 45, "method": "ping"}', -32600, 45, ['"jsonrpc" must be "2.0"', "got none"]),
    ('{"jsonrpc": "2.0", "id": 46}', -32600, 46, ['needs a "method"']),
    ('{"jsonrpc": "2.0", "id": 47, "method": 5}', -32600, 47, ['"method" must be a string']),
    ('{"jsonrpc": "2.0", "method": "notifications/x", "params": [1]}', -32602, None, ["by name"]),
    ("", -32600, None, ["the body is empty"]),
]


def assert_clear(error: dict[str, Any]) -> None:
    """Our words, never pydantic's."""
    message = error["message"]
    for pydantic_said in ("validation error", "type=", "pydantic", "union["):
        assert pydantic_said not in message, message


@pytest.mark.parametrize(("body", "code", "id_", "words"), BODIES)
def test_a_body_the_sdk_cannot_read_gets_the_stdio_transports_error(
    server: HttpServer, body: str, code: int, id_: int | None, words: list[str]
) -> None:
    response = server.post(body)
    assert response.status_code == 400, response.text
    assert response.headers["content-type"] == "application/json"
    reply = response.json()
    assert reply["jsonrpc"] == "2.0" and reply["id"] == id_, reply
    assert reply["error"]["code"] == code, reply
    assert_clear(reply["error"])
    for word in words:
        assert word in reply["error"]["message"], reply
    server.still_serving()


def test_a_batch_gets_an_array_with_one_error_per_request(server: HttpServer) -> None:
    response = server.post(
        '[{"jsonrpc": "2.0", "id": 51, "method": "ping"}, '
        '{"jsonrpc": "2.0", "method": "notifications/initialized"}, '
        '{"jsonrpc": "2.0", "id": "52", "method": "tools/list"}]'
    )
    assert response.status_code == 400, response.text
    replies = response.json()
    assert isinstance(replies, list) and [r["id"] for r in replies] == [51, "52"], replies
    for reply in replies:
        assert reply["error"]["code"] == -32600 and "a batch" in reply["error"]["message"]
        assert_clear(reply["error"])
    server.still_serving()


def test_a_lone_surrogate_in_an_argument_gets_the_cores_refusal_over_http(
    server: HttpServer,
) -> None:
    refused = server.call("remember", '{"session_id": "u", "role": "user", "text": "a\\ud800b"}')
    assert refused["isError"] is True, refused
    text = refused["content"][0]["text"]
    assert "lone surrogate U+D800" in text and "nothing was written" in text, text
    assert "Parse error" not in text
    done = server.call("remember", '{"session_id": "u", "role": "user", "text": "fine"}')
    assert done.get("isError") is not True, done
    tagged_key = server.call("sessions", '{"user_\\udc00id": "x"}')
    assert tagged_key["isError"] is True and "has no argument" in tagged_key["content"][0]["text"]


def test_a_body_over_the_limit_gets_a_json_rpc_error_naming_it(server: HttpServer) -> None:
    text = "a" * (LIMIT + 10)
    body = (
        '{"jsonrpc": "2.0", "id": 61, "method": "tools/call", "params": {"name": "remember", '
        f'"arguments": {{"session_id": "big", "role": "user", "text": "{text}"}}}}}}'
    )
    response = server.post(body)
    assert response.status_code == 413, response.text
    error = response.json()["error"]
    assert error["code"] == -32600 and "larger than 4 MiB" in error["message"], error
    server.still_serving()


def test_what_was_stored_is_kept_through_bad_bodies(server: HttpServer) -> None:
    done = server.call("remember", '{"session_id": "kept", "role": "user", "text": "one"}')
    assert done.get("isError") is not True, done
    for body, *_ in BODIES:
        server.post(body)
    listed = server.call("recall", '{"query": "one", "session_id": "kept"}')
    assert [hit["text"] for hit in listed["structuredContent"]["hits"]] == ["one"]


def test_the_reply_is_computed_without_a_server() -> None:
    passed, reply = reply_to_body(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}')
    assert reply is None and passed == b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
    _, reply = reply_to_body(b'[{"jsonrpc": "2.0", "id": 7, "method": "ping"}]')
    assert reply is not None and json.loads(reply)[0]["id"] == 7


def test_stored_messages_survive_the_server_stopping(tmp_path: Path) -> None:
    served = HttpServer(tmp_path / "store", tmp_path / "stderr.txt")
    try:
        served.call("remember", '{"session_id": "z", "role": "user", "text": "kept"}')
        served.post("[]")
    finally:
        served.stop()
    assert served.process.returncode == 0
    assert stored_texts(tmp_path / "store", "z") == ["kept"]


def test_requests_in_flight_with_one_id_are_each_answered_and_only_answered_ones_stored(
    server: HttpServer,
) -> None:
    """Before, of 6 concurrent POSTs with id 7 in one session, 2 got an empty 200 and 2 hung
    until the connection dropped (40 s), while all 6 were stored: done, never acknowledged."""

    def post(number: int) -> httpx.Response:
        body = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 7,
                "method": "tools/call",
                "params": {
                    "name": "remember",
                    "arguments": {"session_id": "same-id", "role": "user", "text": f"t{number}"},
                },
            }
        )
        with httpx.Client(timeout=20) as http:
            return http.post(server.url, content=body, headers=server.headers)

    pool = ThreadPoolExecutor(6)
    futures = [pool.submit(post, number) for number in range(6)]
    _, waiting = wait(futures, timeout=30)
    pool.shutdown(wait=False)
    assert not waiting, f"{len(waiting)} of 6 requests never answered"
    responses = [future.result() for future in futures]
    acknowledged = []
    for number, response in enumerate(responses):
        if response.status_code == 409:
            error = response.json()
            assert error["id"] == 7 and error["error"]["code"] == -32600, error
            assert "still answering" in error["error"]["message"], error
            continue
        assert response.status_code == 200, response.text
        assert response.content, f"request {number}: an empty reply"
        reply = reply_of(response)
        assert reply["id"] == 7 and reply["result"].get("isError") is not True, reply
        acknowledged.append(f"t{number}")
    assert acknowledged  # the first is always served
    found = server.call("recall", '{"query": "t", "session_id": "same-id", "k": 20}')
    stored = sorted(hit["text"] for hit in found["structuredContent"]["hits"])
    assert stored == sorted(acknowledged)  # what was refused was not done
    server.still_serving()


def test_a_sigterm_lets_every_call_in_flight_send_its_reply(tmp_path: Path) -> None:
    """Before, SIGTERM ended the event stream of every POST still running at once (sse_starlette's
    drain): slow ``context`` calls ended with 0 bytes, writes were stored and never acknowledged.
    Replies are JSON bodies now, which uvicorn's stop lets each running request send."""
    served = HttpServer(tmp_path / "store", tmp_path / "stderr.txt")
    try:
        served.call(
            "remember", json.dumps({"session_id": "big", "role": "user", "text": "w " * 90_000})
        )
        headers = dict(served.headers)

        def post(number: int) -> httpx.Response:
            read = {"session_id": "big", "question": "w?", "budget": 500}
            write = {"session_id": "s", "role": "user", "text": f"t{number}"}
            call = (
                {"name": "context", "arguments": read}
                if number < 3
                else {"name": "remember", "arguments": write}
            )
            body = {"jsonrpc": "2.0", "id": 100 + number, "method": "tools/call", "params": call}
            with httpx.Client(timeout=TIMEOUT) as http:
                return http.post(served.url, content=json.dumps(body), headers=headers)

        pool = ThreadPoolExecutor(12)
        futures = [pool.submit(post, number) for number in range(12)]
        time.sleep(1.0)  # every POST sent; the slow reads still run
        served.process.send_signal(signal.SIGTERM)
        _, waiting = wait(futures, timeout=TIMEOUT)
        pool.shutdown(wait=False)
        assert not waiting
        replies = [reply_of(future.result()) for future in futures]
        assert [r["id"] for r in replies] == [100 + n for n in range(12)]
        assert not [r for r in replies if r["result"].get("isError")], replies
        assert served.process.wait(TIMEOUT) == 0
    finally:
        served.stop()
    assert sorted(stored_texts(tmp_path / "store", "s")) == sorted(f"t{n}" for n in range(3, 12))
