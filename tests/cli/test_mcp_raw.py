"""``ctxbudget mcp`` over stdio with raw JSON-RPC lines: the argument boundary, and stopping.

Raw lines, because a client SDK cannot send what these tests send (a lone surrogate escape, a
5,000-digit number) and closes stdin before it signals. A real server process (real tiktoken,
embedded Chroma, the default embedder); the core's own messages from an in-process
`ContextMemory`, for the same values.
"""

from __future__ import annotations

import json
import math
import os
import select
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.types.version import LATEST_HANDSHAKE_VERSION
from nested_values import DEPTH, nested
from test_mcp import COMMAND, ENV, TIMEOUT

from ctxbudget import CtxBudgetError
from ctxbudget.mcp.transports import Shutdown, serve
from ctxbudget.memory.context import ContextMemory


class RawServer:
    """``ctxbudget --path <store> mcp`` driven with raw JSON-RPC lines; stdin stays open."""

    def __init__(self, store: Path, *options: str) -> None:
        self.process = subprocess.Popen(
            [COMMAND, "--path", str(store), "mcp", *options],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **ENV},
        )
        self.ids = iter(range(1, 1_000_000))
        self.pending = bytearray()  # read from stdout, not yet a whole line
        self.send_line(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 0,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": LATEST_HANDSHAKE_VERSION,
                        "capabilities": {},
                        "clientInfo": {"name": "test", "version": "0"},
                    },
                }
            )  # fmt: skip
        )
        assert self.reply()["id"] == 0
        self.send_line('{"jsonrpc": "2.0", "method": "notifications/initialized"}')

    def send_line(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line.encode() + b"\n")
        self.process.stdin.flush()

    def reply(self) -> dict[str, Any]:
        """The next line of stdout, read whole (one write may hold several replies)."""
        assert self.process.stdout is not None
        out = self.process.stdout.fileno()
        while b"\n" not in self.pending:
            ready, _, _ = select.select([out], [], [], TIMEOUT)
            assert ready, "no reply: the client would wait forever"
            data = os.read(out, 1 << 16)
            assert data, "stdout closed"
            self.pending += data
        line, _, rest = bytes(self.pending).partition(b"\n")
        self.pending = bytearray(rest)
        reply: dict[str, Any] = json.loads(line)
        return reply

    def call(self, tool: str, arguments: str) -> dict[str, Any]:
        """A tools/call with ``arguments`` as JSON text, written as given; its result."""
        number = next(self.ids)
        self.send_line(
            f'{{"jsonrpc": "2.0", "id": {number}, "method": "tools/call", '
            f'"params": {{"name": "{tool}", "arguments": {arguments}}}}}'
        )
        reply = self.reply()
        assert reply["id"] == number, reply
        result: dict[str, Any] = reply["result"]
        return result

    def error(self, tool: str, arguments: str) -> str:
        result = self.call(tool, arguments)
        assert result.get("isError") is True, result
        return "".join(block["text"] for block in result["content"])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.communicate()


def core_refusal(call: Callable[[], object]) -> str:
    with pytest.raises(CtxBudgetError) as refused:
        call()
    return str(refused.value)


def still_serving(raw: RawServer) -> None:
    assert raw.call("sessions", "{}")["structuredContent"]["sessions"] == ["s"]


# -- the boundary: every argument passes the core's checks -------------------------------------
# Bools, numeric strings, 5,000-digit and deeply nested numbers, lone surrogates in text and
# question: tests/conformance/test_bad_values.py (every door). Here, what it does not send.
def search(memory: ContextMemory, k: Any) -> object:
    return memory.search("hi", k=k, session_id="s")


CASES: list[tuple[str, str, Callable[[ContextMemory], object]]] = [
    (
        "recall",
        '{"query": "hi", "session_id": "s", "k": 7.0}',
        lambda m: m.search("hi", k=7.0, session_id="s"),
    ),
    (
        "context",
        '{"session_id": "s", "question": "hi", "budget": 200.0}',
        lambda m: m.assemble("s", "hi", budget=200.0),
    ),
    (
        "remember",
        '{"session_id": "s", "role": "user", "text": "hi", "id": "m4", "name": 5}',
        lambda m: m.add_message("s", "user", "hi", id="m4", name=5),  # type: ignore[arg-type]
    ),
    (
        "remember",
        '{"session_id": "s", "role": "user", "text": "hi", "id": "m5", "timestamp": 1e400}',
        lambda m: m.add_message("s", "user", "hi", id="m5", timestamp=math.inf),
    ),
    (
        "recall",
        '{"query": "hi\\ud800", "session_id": "s"}',
        lambda m: m.search("hi\ud800", session_id="s"),
    ),
    (
        "recall",
        '{"query": "hi", "session_id": "s", "k": %s}' % ("[" * DEPTH + "]" * DEPTH),
        lambda m: m.search("hi", k=nested(), session_id="s"),
    ),
]


@pytest.mark.parametrize(("tool", "arguments", "same_value"), CASES)
def test_each_argument_is_refused_as_the_core_refuses_it(
    raw: RawServer,
    core: ContextMemory,
    tool: str,
    arguments: str,
    same_value: Callable[[ContextMemory], object],
) -> None:
    message = raw.error(tool, arguments)
    assert core_refusal(lambda: same_value(core)) in message
    assert "Traceback" not in message
    still_serving(raw)


def test_nothing_refused_was_stored(raw: RawServer) -> None:
    hits = raw.call("recall", '{"query": "hi", "session_id": "s", "k": 20}')
    assert [h["text"] for h in hits["structuredContent"]["hits"]] == ["hello"]


@pytest.mark.parametrize(
    ("tool", "arguments", "misspelled"),
    [
        (
            "remember",
            '{"session_id": "s", "role": "user", "text": "x", "tiemstamp": 1}',
            "tiemstamp",
        ),
        ("context", '{"session_id": "s", "question": "hi", "budgte": 10}', "budgte"),
        ("sessions", '{"user": "a"}', "user"),
    ],
)
def test_an_unknown_argument_is_refused_by_name(
    raw: RawServer, tool: str, arguments: str, misspelled: str
) -> None:
    message = raw.error(tool, arguments)
    assert f"{tool} has no argument {misspelled!r}" in message, message
    assert "nothing was done" in message
    still_serving(raw)


NOT_COUNTS = st.one_of(
    st.booleans(),
    st.integers(max_value=0),
    st.integers(min_value=10**100 + 1, max_value=10**120),
    st.integers(min_value=1, max_value=10**6).map(str),
    st.floats(allow_nan=False, allow_infinity=False),
    st.lists(st.integers(min_value=1, max_value=9), max_size=2),
)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(budget=NOT_COUNTS)
def test_any_budget_that_is_not_a_count_is_refused_as_the_core_refuses_it(
    raw: RawServer, core: ContextMemory, budget: object
) -> None:
    arguments = json.dumps({"session_id": "s", "question": "hi", "budget": budget})
    message = raw.error("context", arguments)
    assert core_refusal(lambda: core.assemble("s", "hi", budget=budget)) in message  # type: ignore[arg-type]


# -- stopping: SIGTERM and SIGINT whatever stdin does ----------------------------------------
# A real server stopped by SIGTERM or SIGINT with stdin open (start-up too), storing what it
# acknowledged: tests/conformance/test_signals.py (the mcp_stdio driver). Here, the handler.
def test_a_sigterm_during_start_up_ends_the_command() -> None:
    with Shutdown() as shutdown:
        with pytest.raises(SystemExit) as exited:
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(500):  # the handler runs in this thread at the next instruction
                time.sleep(0.01)
        assert exited.value.code == 0 and shutdown.requested == signal.SIGTERM
        # and serving, had start-up gone on, does not start
        serve(object(), shutdown=shutdown)  # type: ignore[arg-type]
        with shutdown.serving():
            os.kill(os.getpid(), signal.SIGTERM)  # a second one while closing: ignored
            time.sleep(0.05)
    assert shutdown.exit_status() == 0
