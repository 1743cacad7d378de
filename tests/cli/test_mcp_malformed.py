"""``ctxbudget mcp`` over stdio: a line the MCP SDK drops gets a JSON-RPC error all the same.

Before, the SDK logged such a line and dropped it: a client waiting for the reply waited
forever. The stdin relay answers it (`ctxbudget.mcp.malformed`), as JSON-RPC 2.0 says: parse
error -32700 with id null, invalid request -32600, invalid params -32602 with the request's id.
Its replies go out between the SDK's, whole lines (`ctxbudget.mcp.stdout`). Raw lines to a real
server process (`RawServer`): no client SDK sends them.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_mcp_raw import RawServer

from ctxbudget.mcp.malformed import reply_to
from ctxbudget.mcp.stdio import readable


def still_serving(raw: RawServer) -> None:
    """The next reply is the ping's: nothing more was written for the line before."""
    number = next(raw.ids)
    raw.send_line(f'{{"jsonrpc": "2.0", "id": {number}, "method": "ping"}}')
    assert raw.reply() == {"jsonrpc": "2.0", "id": number, "result": {}}


SURROGATE_ID = '{"jsonrpc": "2.0", "id": "\\ud800", "method": "ping"}'
LINES = [
    # (line, code, id, words the message holds)
    ('{"jsonrpc": "2.0", "id": 41, "method": "pi', -32700, None, ["Parse error", "character 40"]),
    ("not json at all", -32700, None, ["the line is not JSON"]),
    ('[{"jsonrpc": "2.0", "id": 42, "method": "ping"}]', -32600, 42, ["a batch", "one message"]),
    ("[]", -32600, None, ["a batch"]),
    ('"ping"', -32600, None, ['a message is a JSON object, got "ping"']),
    ('{"jsonrpc": "2.0", "id": 43, "method": "ping", "params": []}', -32602, 43, ["by name"]),
    (SURROGATE_ID, -32600, None, ["id must be a string or an integer", "lone surrogate"]),
    ('{"jsonrpc": "2.0", "id": null, "method": "ping"}', -32600, None, ["got null"]),
    ('{"jsonrpc": "2.0", "id": 4.5, "method": "ping"}', -32600, None, ["got 4.5"]),
    ('{"jsonrpc": "1.0", "id": 44, "method": "ping"}', -32600, 44, ['must be "2.0"', '"1.0"']),
    ('{"id": 45, "method": "ping"}', -32600, 45, ['"jsonrpc" must be "2.0"', "got none"]),
    ('{"jsonrpc": "2.0", "id": 46}', -32600, 46, ['needs a "method"']),
    ('{"jsonrpc": "2.0", "id": 47, "method": 5}', -32600, 47, ['"method" must be a string']),
]


@pytest.mark.parametrize(("line", "code", "id_", "words"), LINES)
def test_a_line_the_sdk_drops_is_answered_with_a_json_rpc_error(
    raw: RawServer, line: str, code: int, id_: int | None, words: list[str]
) -> None:
    raw.send_line(line)
    reply = raw.reply()
    assert reply["jsonrpc"] == "2.0" and reply["id"] == id_, reply
    assert reply["error"]["code"] == code, reply
    for word in words:
        assert word in reply["error"]["message"], reply
    still_serving(raw)  # and nothing more was written for that line


def test_a_batch_gets_one_error_per_request_in_it(raw: RawServer) -> None:
    raw.send_line(
        '[{"jsonrpc": "2.0", "id": 51, "method": "ping"}, '
        '{"jsonrpc": "2.0", "method": "notifications/initialized"}, '
        '{"jsonrpc": "2.0", "id": "52", "method": "tools/list"}]'
    )
    replies = [raw.reply(), raw.reply()]
    assert sorted(str(r["id"]) for r in replies) == ["51", "52"], replies
    assert all(r["error"]["code"] == -32600 for r in replies), replies
    still_serving(raw)


def test_a_notification_is_never_answered(raw: RawServer) -> None:
    raw.send_line('{"jsonrpc": "2.0", "method": "notifications/whatever", "params": [1]}')
    raw.send_line("")  # a blank line: nothing was asked either
    raw.send_line('{"jsonrpc": "2.0", "id": 61, "method": "ping"}')
    assert raw.reply() == {"jsonrpc": "2.0", "id": 61, "result": {}}


def test_replies_are_whole_lines_among_the_sdks_large_ones(raw: RawServer) -> None:
    """The relay's replies never tear the SDK's, which are written in many pieces."""
    for n in range(3):
        long = f"Long note {n}: " + "the quick brown fox jumps over the lazy dog " * 1500
        assert not raw.call(
            "remember", json.dumps({"session_id": "long", "role": "user", "text": long})
        ).get("isError")
    sent: dict[int, str] = {}
    assert raw.process.stdin is not None
    burst = []
    for n in range(20):
        number = 1000 + 2 * n
        arguments = {"session_id": "long", "question": "fox?", "budget": 100_000}
        burst.append(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": number,
                    "method": "tools/call",
                    "params": {"name": "context", "arguments": arguments},
                }
            )
        )
        burst.append(f'{{"jsonrpc": "1.0", "id": {number + 1}, "method": "ping"}}')
        sent[number], sent[number + 1] = "result", "error"
    raw.process.stdin.write("".join(line + "\n" for line in burst).encode())
    raw.process.stdin.flush()
    replies: list[dict[str, Any]] = [raw.reply() for _ in sent]  # each line parses whole
    assert {r["id"]: "result" if "result" in r else "error" for r in replies} == sent
    big = [r for r in replies if "result" in r]
    assert all(not r["result"].get("isError") for r in big), big[0]
    assert min(len(json.dumps(r)) for r in big) > 100_000  # written in many pieces
    still_serving(raw)


@pytest.mark.parametrize(
    "line",
    [
        '{"jsonrpc": "2.0", "id": 1, "method": "ping"}',
        '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}}',
        '{"jsonrpc": "2.0", "method": "notifications/initialized"}',
        '{"jsonrpc": "2.0", "id": 3, "result": {}}',
        '{"jsonrpc": "2.0", "id": 3, "result": 5}',  # a client's response: never answered
    ],
)
def test_what_the_sdk_answers_or_must_not_answer_the_relay_leaves_alone(line: str) -> None:
    assert reply_to(readable(line.encode() + b"\n")) is None
