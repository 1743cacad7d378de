"""``ctxbudget mcp``: the stdin relay's edges (replies at shutdown, keys, the tag, bad UTF-8).

Raw JSON-RPC lines to a real server process (`RawServer` of tests/cli/test_mcp_raw.py): what a
client SDK cannot send (a lone surrogate as an argument's name, bytes that are not UTF-8, a
burst of requests then a signal), and the relay's own tag written by a client, over stdio and
over streamable HTTP. Each refusal is the core's message for the same value
(`core_refusal`), and nothing refused is stored.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from test_mcp import (
    ENV,
    TIMEOUT,
    journals,
    served_http,
    stored_texts,
)
from test_mcp_raw import RawServer, core_refusal

from ctxbudget.mcp import stdio
from ctxbudget.memory.context import ContextMemory

OLD_TAG = "$ctxbudget.json"  # the relay's tag before it was drawn per process


def pinged(raw: RawServer) -> None:
    """The server answers a ping: it read the line before and serves on."""
    number = next(raw.ids)
    raw.send_line(f'{{"jsonrpc": "2.0", "id": {number}, "method": "ping"}}')
    assert raw.reply() == {"jsonrpc": "2.0", "id": number, "result": {}}


def stored_only_hello(raw: RawServer) -> None:
    hits = raw.call("recall", '{"query": "hello cafe tagged", "session_id": "s", "k": 50}')
    assert [h["text"] for h in hits["structuredContent"]["hits"]] == ["hello"]
    assert raw.call("sessions", "{}")["structuredContent"]["sessions"] == ["s"]


# -- a lone surrogate as an argument's name ---------------------------------------------------
# Before: the SDK's parser refused the line and nothing answered (the client waited forever).
def test_a_lone_surrogate_argument_name_is_refused_by_name(raw: RawServer) -> None:
    message = raw.error(
        "remember", '{"session_id": "s", "role": "user", "text": "x", "\\ud800": 1}'
    )
    assert "remember has no argument '\\ud800'" in message, message
    assert "nothing was done" in message and "Traceback" not in message
    pinged(raw)
    stored_only_hello(raw)


# -- the relay's tag, written by a client -----------------------------------------------------
# Before: a client's {"$ctxbudget.json": "150"} was turned back into 150 (any JSON, any depth).
FORGED = [
    ("context", "budget", {"session_id": "s", "question": "hi"}),
    ("remember", "text", {"session_id": "s", "role": "user"}),
    ("remember", "session_id", {"role": "user", "text": "tagged session"}),
]
FORGED_VALUE = {OLD_TAG: "150"}


def core_call(core: ContextMemory, tool: str, arguments: dict[str, Any]) -> object:
    if tool == "context":
        return core.assemble(
            arguments["session_id"], arguments["question"], budget=arguments["budget"]
        )
    return core.add_message(arguments["session_id"], arguments["role"], arguments["text"])


@pytest.mark.parametrize(("tool", "name", "others"), FORGED)
def test_a_forged_tag_is_refused_as_the_object_it_is(
    raw: RawServer, core: ContextMemory, tool: str, name: str, others: dict[str, Any]
) -> None:
    arguments = {**others, name: FORGED_VALUE}
    message = raw.error(tool, json.dumps(arguments))
    assert core_refusal(lambda: core_call(core, tool, arguments)) in message, message
    assert "Traceback" not in message
    pinged(raw)


def test_nothing_forged_was_stored(raw: RawServer) -> None:
    stored_only_hello(raw)


def test_the_tag_is_drawn_in_each_process() -> None:
    assert stdio.TAG != OLD_TAG and stdio.TAG.startswith(OLD_TAG)
    program = "from ctxbudget.mcp.stdio import TAG; print(TAG)"
    drawn = {
        subprocess.run(
            [sys.executable, "-c", program],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=True,
            env={**os.environ, **ENV},
        ).stdout.strip()
        for _ in range(2)
    }
    assert len(drawn) == 2 and stdio.TAG not in drawn and OLD_TAG not in drawn, drawn


def test_a_forged_tag_over_streamable_http_is_refused(tmp_path: Path, core: ContextMemory) -> None:
    store, log = tmp_path / "store", tmp_path / "stderr.txt"
    with served_http(store, log) as served:
        client = served.client
        client.ok("remember", session_id="s", role="user", text="hello")
        for tool, name, others in FORGED:
            arguments = {**others, name: FORGED_VALUE}
            message = client.error(tool, **arguments)
            expected = core_refusal(lambda: core_call(core, tool, arguments))  # noqa: B023
            assert expected in message, (tool, name, message)
        assert client.ok("sessions")["sessions"] == ["s"]
    assert served.process.returncode == 0, log.read_text("utf-8")
    assert stored_texts(store, "s") == ["hello"]


# -- bytes that are not UTF-8 -----------------------------------------------------------------
# Before: read with each bad byte replaced (U+FFFD) and stored so, without a word.
def test_invalid_utf8_in_a_text_is_refused_as_a_lone_surrogate(
    raw: RawServer, core: ContextMemory
) -> None:
    assert raw.process.stdin is not None
    number = next(raw.ids)
    raw.process.stdin.write(
        b'{"jsonrpc": "2.0", "id": %d, "method": "tools/call", "params": {"name": "remember", '
        b'"arguments": {"session_id": "s", "role": "user", "text": "caf\xe9 \xff", "id": "u8"}}}\n'
        % number
    )
    raw.process.stdin.flush()
    reply = raw.reply()
    assert reply["id"] == number, reply
    assert reply["result"].get("isError") is True, reply
    message = "".join(block["text"] for block in reply["result"]["content"])
    # each bad byte is read as the lone surrogate Python's surrogateescape gives it
    assert (
        core_refusal(lambda: core.add_message("s", "user", "caf\udce9 \udcff", id="u8")) in message
    )
    assert "surrogate" in message and "\ufffd" not in message, message
    pinged(raw)
    stored_only_hello(raw)


# -- replies in flight at shutdown ------------------------------------------------------------
# Before: the SDK stopped at the end of its input without sending the replies of the requests
# it was answering (about 45 of 100 dropped), though their messages were stored.
BURST = 100


def read_line(fd: int, buffer: bytearray) -> None:
    """Read ``fd`` until ``buffer`` holds a whole line."""
    deadline = time.monotonic() + TIMEOUT
    while b"\n" not in buffer:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        assert ready, "no reply"
        data = os.read(fd, 1 << 16)
        assert data, "stdout closed before any reply"
        buffer += data


def read_to_end(fd: int, buffer: bytearray) -> None:
    deadline = time.monotonic() + TIMEOUT
    while True:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        assert ready, f"stdout still open {TIMEOUT} s after the server was told to stop"
        data = os.read(fd, 1 << 16)
        if not data:
            return
        buffer += data


@pytest.mark.slow
@pytest.mark.parametrize("how", ["SIGTERM", "stdin closed"])
def test_every_request_read_before_stopping_is_answered_and_stored(
    tmp_path: Path, how: str
) -> None:
    store = tmp_path / "store"
    server = RawServer(store)
    process = server.process
    try:
        warm = server.call("remember", '{"session_id": "warm", "role": "user", "text": "warm"}')
        assert not warm.get("isError"), warm
        assert process.stdin is not None and process.stdout is not None
        lines = [
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 1000 + n,
                    "method": "tools/call",
                    "params": {
                        "name": "remember",
                        "arguments": {
                            "session_id": "s",
                            "role": "user",
                            "text": f"burst message {n}",
                            "id": f"m{n}",
                        },
                    },
                }
            )
            for n in range(BURST)
        ]
        process.stdin.write("".join(line + "\n" for line in lines).encode())
        process.stdin.flush()
        out = bytearray()
        read_line(process.stdout.fileno(), out)  # serving the burst: now stop
        if how == "SIGTERM":
            process.send_signal(signal.SIGTERM)
        else:
            process.stdin.close()
        read_to_end(process.stdout.fileno(), out)
        code = process.wait(timeout=TIMEOUT)
        assert process.stderr is not None
        log = process.stderr.read().decode("utf-8", "replace")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for pipe in (process.stdin, process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()
    assert code == 0, log
    assert "Traceback" not in log, log
    replies = [json.loads(line) for line in bytes(out).splitlines() if line.strip()]
    assert sorted(r["id"] for r in replies) == [1000 + n for n in range(BURST)], (
        f"{how}: {len(replies)} replies to {BURST} requests"
    )
    assert not any(r["result"].get("isError") for r in replies), replies
    assert journals(store) == []
    with ContextMemory(path=store) as memory:
        stored = [record.id for record in memory.history("s")]
    assert sorted(stored) == sorted(f"m{n}" for n in range(BURST))
