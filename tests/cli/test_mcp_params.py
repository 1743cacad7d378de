"""``ctxbudget mcp``: params the MCP schema refuses, and a request before ``initialize``, said.

Before, the SDK answered each of them with -32602 ``Invalid request parameters`` and empty
``data``: a client author could not tell which param was wrong, or that the connection was not
initialized at all (a ``tools/call`` sent first). `ctxbudget.mcp.explained` says which param,
what it must be and what it got. Raw JSON-RPC lines to a real server process over stdio.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_mcp import COMMAND, ENV, TIMEOUT
from test_mcp_raw import RawServer

from ctxbudget.mcp.explained import said

NOT_INITIALIZED = "before initialize: this connection is not initialized yet"


def replied(process: subprocess.Popen[bytes], line: str) -> dict[str, Any]:
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(line.encode() + b"\n")
    process.stdin.flush()
    ready, _, _ = select.select([process.stdout], [], [], TIMEOUT)
    assert ready, "no reply: the client would wait forever"
    reply: dict[str, Any] = json.loads(process.stdout.readline())
    return reply


def test_a_request_before_initialize_says_to_initialize_first(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [COMMAND, "--path", str(tmp_path / "store"), "mcp"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, **ENV},
    )  # fmt: skip
    try:
        call = '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "sessions"}}'
        reply = replied(process, call)
        assert reply["id"] == 1 and reply["error"]["code"] == -32602, reply
        message = reply["error"]["message"]
        assert message.startswith(f"tools/call {NOT_INITIALIZED}"), message
        assert '"initialize" request first' in message, message
        listed = replied(process, '{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}')
        assert NOT_INITIALIZED in listed["error"]["message"], listed
        initialize = {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "test", "version": "0"},
            },
        }
        assert "result" in replied(process, json.dumps(initialize))
        done = replied(process, call.replace('"id": 1', '"id": 4'))
        assert done["result"]["structuredContent"]["sessions"] == [], done
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()


@pytest.fixture(scope="module")
def raw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RawServer]:
    served = RawServer(tmp_path_factory.mktemp("mcp-params") / "store")
    try:
        yield served
    finally:
        served.stop()


PARAMS = [
    # (method, params, words the message holds)
    (
        "tools/call",
        {"name": "sessions", "arguments": {}, "_meta": 5},
        ["params._meta must be an object, got 5"],
    ),
    ("tools/call", {"name": "sessions", "task": "x"}, ['params.task must be an object, got "x"']),
    ("tools/list", {"cursor": 5}, ["params.cursor must be a string, got 5"]),
    ("resources/read", {}, ["params.uri is missing"]),
    ("prompts/get", {"name": 5}, ["params.name must be a string, got 5"]),
    ("logging/setLevel", {"level": "loud"}, ["params.level must be 'alert'", 'got "loud"']),
    (
        "completion/complete",
        {},
        ["params.argument is missing", "params.ref is missing", "fix them"],
    ),
    (
        "initialize",
        {"capabilities": {}, "clientInfo": {"name": "c", "version": "0"}},
        ["params.protocolVersion is missing"],
    ),
]


@pytest.mark.parametrize(("method", "params", "words"), PARAMS)
def test_params_the_schema_refuses_are_named_with_what_they_must_be(
    raw: RawServer, method: str, params: dict[str, Any], words: list[str]
) -> None:
    number = next(raw.ids)
    raw.send_line(json.dumps({"jsonrpc": "2.0", "id": number, "method": method, "params": params}))
    reply = raw.reply()
    assert reply["id"] == number and reply["error"]["code"] == -32602, reply
    message = reply["error"]["message"]
    assert message.startswith(f"Invalid params: {method}: "), message
    assert "Invalid request parameters" not in message and "Input should" not in message
    for word in words:
        assert word in message, message
    done = raw.call("sessions", "{}")  # and the server keeps serving
    assert done.get("isError") is not True, done


def test_a_progress_token_of_the_wrong_type_is_one_clause() -> None:
    from mcp.types import CallToolRequestParams
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as refused:
        CallToolRequestParams.model_validate({"name": "x", "_meta": {"progressToken": [1]}})
    message = said("tools/call", refused.value)
    assert "params._meta.progressToken must be a string or an integer, got [1]" in message, message
