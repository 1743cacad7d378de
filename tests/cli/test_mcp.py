"""``ctxbudget mcp`` end to end, driven by the MCP SDK's own clients.

A real server process (``ctxbudget --path <tmp> mcp``: real tiktoken, embedded Chroma, the
default embedder) over stdio through ``mcp.client.stdio.stdio_client`` and ``ClientSession``,
one process for most of the module; one more to check what it stores when it exits, and one
over streamable HTTP on 127.0.0.1. Raw JSON-RPC lines (the argument boundary, signals with stdin
open): tests/cli/test_mcp_raw.py; two users starting one session: tests/cli/test_mcp_owners.py.
The command line's own mistakes run in-process.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import IO, Any

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent

from ctxbudget.cli.main import main
from ctxbudget.memory.context import ContextMemory
from ctxbudget.tokens.counter import TokenCounter

COMMAND = str(Path(sys.executable).parent / "ctxbudget")  # the environment's own command
ENV = {
    "ANONYMIZED_TELEMETRY": "False",
    "ORT_DISABLE_TELEMETRY": "1",
    "HF_HUB_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}
TIMEOUT = 120  # seconds for any one request (the first loads the embedding model)
TOOLS = {
    "remember",
    "remember_fact",
    "recall",
    "context",
    "sessions",
    "edit_message",
    "forget_messages",
    "forget_session",
    "forget_fact",
}
A_TURNS = [
    ("user", "My cat is named Miso and she loves sardines."),
    ("assistant", "Miso is a lovely name for a cat."),
    ("user", "I am planning a trip to Lisbon in May."),
    ("assistant", "Lisbon in May is warm; pack light clothes."),
]
B_TURNS = [
    ("user", "I play the cello every Sunday morning."),
    ("assistant", "The cello suits a quiet Sunday."),
]


class Client:
    """A `ClientSession` used from synchronous tests, through an anyio blocking portal."""

    def __init__(self, portal: BlockingPortal, session: ClientSession) -> None:
        self.portal = portal
        self.session = session

    def call(self, tool: str, **arguments: Any) -> CallToolResult:
        return self.portal.call(partial(self.session.call_tool, tool, arguments))

    def ok(self, tool: str, **arguments: Any) -> dict[str, Any]:
        result = self.call(tool, **arguments)
        assert not result.is_error, text_of(result)
        assert isinstance(result.structured_content, dict)
        # The text block carries the same document, for clients that read only text.
        assert json.loads(text_of(result)) == result.structured_content
        return result.structured_content

    def error(self, tool: str, **arguments: Any) -> str:
        result = self.call(tool, **arguments)
        assert result.is_error, result
        return text_of(result)


def text_of(result: CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, TextContent))


def parameters(store: Path, *options: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=COMMAND, args=["--path", str(store), "mcp", *options], env=ENV
    )


@asynccontextmanager
async def connected(
    server: StdioServerParameters, errlog: IO[str], problems: list[object]
) -> AsyncIterator[ClientSession]:
    async def handle(message: object) -> None:
        if isinstance(message, Exception):  # e.g. a stdout line that is not JSON-RPC
            problems.append(message)

    async with stdio_client(server, errlog=errlog) as (read, write):
        async with ClientSession(
            read, write, read_timeout_seconds=TIMEOUT, message_handler=handle
        ) as session:
            await session.initialize()
            yield session


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Client, list[object]]]:
    """One server for the module, with a conversation of user a (a1) and one of user b (b1)."""
    folder = tmp_path_factory.mktemp("mcp")
    problems: list[object] = []
    with (
        (folder / "stderr.txt").open("w", encoding="utf-8") as errlog,
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(
            connected(parameters(folder / "store"), errlog, problems)
        ) as session,
    ):
        client = Client(portal, session)
        for role, text in A_TURNS:
            client.ok("remember", session_id="a1", role=role, text=text, user_id="a")
        for role, text in B_TURNS:
            client.ok("remember", session_id="b1", role=role, text=text, user_id="b")
        yield client, problems
    log = (folder / "stderr.txt").read_text("utf-8")
    assert "Traceback" not in log, log


@pytest.fixture
def client(served: tuple[Client, list[object]]) -> Iterator[Client]:
    yield served[0]
    assert served[1] == [], "the server wrote something other than protocol on stdout"


def journals(store: Path) -> list[Path]:
    """Acknowledged messages not yet stored: journal files left behind (none after a clean exit)."""
    return sorted((store / "ctxbudget-journal").rglob("*.jsonl"))


def stored_texts(store: Path, session: str) -> list[str]:
    with ContextMemory(path=store) as memory:
        return [record.text for record in memory.history(session)]


# -- over stdio -------------------------------------------------------------------------------
def test_the_tools_are_listed_with_their_arguments(client: Client) -> None:
    listed = {tool.name: tool for tool in client.portal.call(client.session.list_tools).tools}
    assert set(listed) == TOOLS
    for tool in listed.values():
        assert tool.description and tool.input_schema["type"] == "object"
        assert tool.annotations is not None
    assert set(listed["remember"].input_schema["required"]) == {"session_id", "role", "text"}
    assert listed["remember"].input_schema["properties"]["role"]["enum"] == [
        "user",
        "assistant",
        "system",
    ]
    assert listed["context"].input_schema["properties"]["budget"]["default"] == 4096
    for name in ("recall", "context", "sessions"):
        assert listed[name].annotations.read_only_hint is True
    for name in ("edit_message", "forget_messages", "forget_session", "forget_fact"):
        assert listed[name].annotations.destructive_hint is True


def test_remember_acknowledges_with_the_id_and_scope(client: Client) -> None:
    done = client.ok(
        "remember",
        session_id="a3",
        role="user",
        text="Note for later.",
        user_id="a",
        id="n1",
        timestamp="2026-03-02T09:14:00Z",
    )
    assert done == {"id": "n1", "session_id": "a3", "user_id": "a", "namespace": "default"}
    hits = client.ok("recall", query="note for later", session_id="a3")["hits"]
    assert [(h["id"], h["timestamp"]) for h in hits] == [("n1", "2026-03-02T09:14:00+00:00")]


@pytest.mark.parametrize("budget", [40, 80, 200, 4096])
def test_a_context_fits_its_budget_and_holds_what_was_remembered(
    client: Client, budget: int
) -> None:
    question = "What is my cat called?"
    document = client.ok("context", session_id="a1", question=question, budget=budget, user_id="a")
    messages = document["messages"]
    assert messages[-1] == {"role": "user", "content": question}
    # Counted again with the real tokenizer, on the messages as the client received them.
    assert TokenCounter.for_model("gpt-4o").count_messages(messages) == document["tokens_used"]
    assert document["tokens_used"] <= document["tokens_available"] <= budget
    if budget >= 80:
        assert any("Miso" in m["content"] for m in messages[:-1]), messages
    if budget == 4096:  # room for everything: the whole conversation, in order
        sent = iter(m["content"] for m in messages[:-1])
        assert all(any(text == s for s in sent) for _, text in A_TURNS), messages
        assert document["pruned"] == [] and document["warnings"] == []


def test_a_context_in_text_format_with_a_system_prompt(client: Client) -> None:
    document = client.ok(
        "context",
        session_id="a1",
        question="Where am I travelling?",
        budget=300,
        system="Be brief.",
        format="text",
    )
    assert document["format"] == "text"
    assert document["text"].startswith("Be brief.") and "Lisbon" in document["text"]
    assert document["tokens_used"] <= 300


def test_each_user_sees_only_their_own_memory(client: Client) -> None:
    client.ok("remember_fact", text="The user is vegetarian.", user_id="a")
    document = client.ok(
        "context", session_id="b1", question="What is my cat called?", budget=4096, user_id="b"
    )
    seen = json.dumps(document)
    assert "Miso" not in seen and "vegetarian" not in seen and "Lisbon" not in seen
    assert {m["content"] for m in document["messages"][:-1]} == {t for _, t in B_TURNS}
    for query in ("cat named Miso", "vegetarian", "trip to Lisbon"):
        hits = client.ok("recall", query=query, user_id="b", k=20)["hits"]
        assert hits and all(h["user_id"] == "b" for h in hits), hits
        assert not any("Miso" in h["text"] or "Lisbon" in h["text"] for h in hits)
    assert client.ok("sessions", user_id="b")["sessions"] == ["b1"]
    assert "b1" not in client.ok("sessions", user_id="a")["sessions"]
    # a's own facts reach a's other conversations, never b's
    fresh = client.ok("context", session_id="a2", question="What should I cook?", user_id="a")
    assert any("vegetarian" in m["content"] for m in fresh["messages"])
    assert fresh["warnings"] and "a2" in fresh["warnings"][0]  # a session with no messages


def test_recall_takes_k_as_the_core_does(client: Client) -> None:
    # Before: the server capped k at 100 of its own ("k must be at most 100"); the core's
    # search takes any k up to 2,147,483,647.
    found = client.ok("recall", query="what is the cat's name", session_id="a1", k=150)
    assert found["hits"] and "Miso" in found["hits"][0]["text"]


def test_recall_finds_what_was_remembered_best_first(client: Client) -> None:
    found = client.ok("recall", query="what is the cat's name", session_id="a1", k=2)
    assert found["scope"] == ["session", "a1"]
    assert len(found["hits"]) <= 2
    assert "Miso" in found["hits"][0]["text"]
    scores = [h["score"] for h in found["hits"]]
    assert scores == sorted(scores, reverse=True)


def test_forget_session_removes_it_everywhere(client: Client) -> None:
    for text in ("Temporary plan one.", "Temporary plan two."):
        client.ok("remember", session_id="gone", role="user", text=text, user_id="a")
    assert "gone" in client.ok("sessions", user_id="a")["sessions"]
    assert client.ok("forget_session", session_id="gone")["removed"] == 2
    assert "gone" not in client.ok("sessions")["sessions"]
    assert client.ok("recall", query="temporary plan", session_id="gone")["hits"] == []
    after = client.ok("context", session_id="gone", question="What was the plan?")
    assert [m["content"] for m in after["messages"]] == ["What was the plan?"]
    assert client.ok("forget_session", session_id="gone")["removed"] == 0


def test_forget_fact_removes_only_that_pin(client: Client) -> None:
    pinned = client.ok("remember_fact", text="Prefers the window seat.", session_id="a1")
    assert pinned["scope"] == ["session", "a1"]
    again = client.ok("remember_fact", text="Prefers the window seat.", session_id="a1")
    assert again["id"] == pinned["id"]  # the same fact is pinned once
    gone = client.ok("forget_fact", id=pinned["id"], session_id="a1")
    assert gone == {"id": pinned["id"], "scope": ["session", "a1"], "removed": True}
    assert client.ok("forget_fact", id=pinned["id"], session_id="a1")["removed"] is False
    left = client.ok("recall", query="window seat", session_id="a1")["hits"]
    assert left and all(h["kind"] == "message" for h in left)


def test_edit_and_forget_messages_leave_nothing_of_the_old_text(client: Client) -> None:
    said = [("user", "My gate code is 4417."), ("assistant", "Noted."), ("user", "Thanks.")]
    ids = [
        client.ok("remember", session_id="e1", role=r, text=t, user_id="e")["id"] for r, t in said
    ]
    edited = client.ok("edit_message", session_id="e1", id=ids[0], text="My gate code is 9031.")
    assert edited["id"] == ids[0]
    document = client.ok("context", session_id="e1", question="what is my gate code?")
    texts = [m["content"] for m in document["messages"]]
    assert any("9031" in t for t in texts) and not any("4417" in t for t in texts), texts
    hits = client.ok("recall", query="gate code", session_id="e1")["hits"]
    assert [h["text"] for h in hits if h["id"] == ids[0]] == ["My gate code is 9031."]
    gone = client.ok("forget_messages", session_id="e1", ids=[ids[0], "nope"])
    assert gone["removed"] == 1
    hits = client.ok("recall", query="gate code", session_id="e1")["hits"]
    assert ids[0] not in [h["id"] for h in hits]
    assert client.ok("forget_messages", session_id="e1", ids=[ids[0]])["removed"] == 0


@pytest.mark.parametrize(
    ("tool", "arguments", "needles"),
    [
        (
            "remember",
            {"role": "user", "text": "hi"},
            ["remember needs the argument 'session_id' (the conversation", "pass it"],
        ),
        ("remember", {"session_id": "s", "role": "robot", "text": "hi"}, ["role"]),
        ("remember", {"session_id": "s", "role": "user", "text": ""}, ["empty text"]),
        ("remember", {"session_id": "", "role": "user", "text": "hi"}, ["session_id"]),
        ("remember", {"session_id": "s", "role": "user", "text": 12}, ["text"]),
        ("context", {"session_id": "a1", "question": "hi", "budget": 0}, ["Budget", "got 0"]),
        ("context", {"session_id": "a1", "question": "hi", "budget": "lots"}, ["budget"]),
        (
            "context",
            {"session_id": "a1", "question": "hi", "budget": 20, "system": "word " * 200},
            ["system", "tokens"],
        ),
        ("recall", {"query": "cat"}, ["session_id", "user_id"]),
        ("recall", {"query": "cat", "user_id": "a", "k": -1}, ["k must be 0 or more"]),
        # The core's bound (ContextMemory.search's), not one of the server's own.
        (
            "recall",
            {"query": "cat", "user_id": "a", "k": 2**31},
            ["k must be at most 2,147,483,647"],
        ),
        ("recall", {"query": "cat", "user_id": "a", "kinds": ["document"]}, ["kinds"]),
        ("recall", {"query": " ", "user_id": "a"}, ["query"]),
        ("remember_fact", {"text": "A fact."}, ["session_id", "user_id"]),
        ("forget_fact", {"id": "x"}, ["session_id", "user_id"]),
        ("forget_session", {}, ["forget_session needs the argument 'session_id'"]),
        ("forget_messages", {"session_id": "a1", "ids": "m1"}, ["ids"]),
        ("edit_message", {"session_id": "a1", "id": "nope", "text": "x"}, ["no message 'nope'"]),
        ("no_such_tool", {}, ["no tool 'no_such_tool'", "'remember'", "check the name"]),
    ],
)
def test_bad_arguments_are_tool_errors_and_the_server_keeps_serving(
    client: Client, tool: str, arguments: dict[str, Any], needles: list[str]
) -> None:
    message = client.error(tool, **arguments)
    for needle in needles:
        assert needle in message, message
    assert "Traceback" not in message and "validation error" not in message
    assert client.ok("sessions", user_id="b")["sessions"] == ["b1"]  # still serving


# -- a server for one user --------------------------------------------------------------------
def test_a_server_for_one_user_refuses_another_and_stores_everything_on_exit(
    tmp_path: Path,
) -> None:
    store = tmp_path / "store"
    with ContextMemory(path=store) as memory:  # another user's conversation, stored before
        memory.add_message("t1", "user", "Tomas keeps his bank PIN here.", user_id="tomas")
    problems: list[object] = []
    with (
        (tmp_path / "stderr.txt").open("w", encoding="utf-8") as errlog,
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(
            connected(parameters(store, "--user", "maya"), errlog, problems)
        ) as session,
    ):
        client = Client(portal, session)
        # A session id is no key to another user's conversation on a server for one user.
        for tool, arguments in [
            ("context", {"session_id": "t1", "question": "What is the PIN?"}),
            ("recall", {"query": "bank PIN", "session_id": "t1"}),
            ("remember", {"session_id": "t1", "role": "user", "text": "mine now"}),
            ("remember_fact", {"session_id": "t1", "text": "a pin"}),
            ("forget_session", {"session_id": "t1"}),
            ("forget_fact", {"id": "x", "session_id": "t1"}),
            ("edit_message", {"session_id": "t1", "id": "x", "text": "mine"}),
            ("forget_messages", {"session_id": "t1", "ids": ["x"]}),
        ]:
            message = client.error(tool, **arguments)
            assert "belongs to another user" in message and "PIN" not in message, message
        for n in range(5):
            done = client.ok("remember", session_id="s1", role="user", text=f"Turn number {n}.")
            assert done["user_id"] == "maya"
        message = client.error("recall", query="turn", user_id="tomas")
        assert "'tomas'" in message and "maya" in message and "leave user_id out" in message
        assert "tomas" in client.error(
            "remember", session_id="s1", role="user", text="hi", user_id="tomas"
        )
        assert len(client.ok("recall", query="turn number", k=10)["hits"]) == 5
        assert client.ok("sessions")["user_id"] == "maya"
    # The client closed stdin: the server closed its memory, storing every acknowledged message.
    assert problems == []
    assert journals(store) == []
    assert stored_texts(store, "s1") == [f"Turn number {n}." for n in range(5)]
    assert stored_texts(store, "t1") == ["Tomas keeps his bank PIN here."]  # untouched
    log = (tmp_path / "stderr.txt").read_text("utf-8")
    assert "Traceback" not in log and "error" not in log.lower(), log


# Stopping on SIGTERM/SIGINT with stdin open, over stdio: tests/conformance/test_signals.py.


# -- over streamable HTTP -----------------------------------------------------------------------
def wait_for_address(log: Path, process: subprocess.Popen[bytes]) -> str:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        found = re.search(r"MCP server at (http://127\.0\.0\.1:\d+/mcp) ", log.read_text("utf-8"))
        if found:
            return found[1]
        assert process.poll() is None, log.read_text("utf-8")
        time.sleep(0.1)
    raise AssertionError(f"no address announced: {log.read_text('utf-8')}")


@asynccontextmanager
async def connected_http(url: str) -> AsyncIterator[ClientSession]:
    async with streamable_http_client(url) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=TIMEOUT) as session:
            await session.initialize()
            yield session


@dataclass
class Served:
    """A ``ctxbudget mcp --transport http`` process with a connected client (`served_http`)."""

    process: subprocess.Popen[bytes]
    client: Client
    portal: BlockingPortal
    session: ClientSession
    out: bytes = b""  # its stdout, once stopped


@contextmanager
def served_http(store: Path, log: Path) -> Iterator[Served]:
    """Serve ``store`` over HTTP on a free port; on leaving, SIGTERM it and read its stdout.

    Its stderr goes to ``log``; a process still running when something fails is killed.
    """
    argv = [COMMAND, "--path", str(store), "mcp", "--transport", "http", "--port", "0"]
    with log.open("w", encoding="utf-8") as errlog:
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errlog,
            env={**os.environ, **ENV},
        )  # fmt: skip
        try:
            url = wait_for_address(log, process)
            with (
                start_blocking_portal() as portal,
                portal.wrap_async_context_manager(connected_http(url)) as session,
            ):
                served = Served(process, Client(portal, session), portal, session)
                yield served
            process.send_signal(signal.SIGTERM)
            served.out, _ = process.communicate(timeout=TIMEOUT)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()


def test_streamable_http_on_loopback_serves_and_stores_on_sigterm(tmp_path: Path) -> None:
    store, log = tmp_path / "store", tmp_path / "stderr.txt"
    with served_http(store, log) as served:
        client = served.client
        assert {t.name for t in served.portal.call(served.session.list_tools).tools} == TOOLS
        for role, text in A_TURNS:
            client.ok("remember", session_id="h1", role=role, text=text, user_id="a")
        document = client.ok(
            "context", session_id="h1", question="What is my cat called?", budget=100
        )
        assert document["tokens_used"] <= 100
        assert any("Miso" in m["content"] for m in document["messages"])
        assert "Budget" in client.error("context", session_id="h1", question="hi", budget=-1)
    assert served.process.returncode == 0, log.read_text("utf-8")
    assert served.out == b""  # over HTTP too, nothing on stdout
    assert journals(store) == []
    assert stored_texts(store, "h1") == [text for _, text in A_TURNS]


# -- the command line's own mistakes (in-process, before anything is served) -----------------
def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("options", "needles"),
    [
        (["--transport", "http", "--host", "0.0.0.0"], ["--host 0.0.0.0", "127.0.0.1 only"]),
        (["--host", "localhost"], ["127.0.0.1 only"]),
        (["--port", "8000"], ["--port is for --transport http"]),
        (["--user", ""], ["--user needs a user id"]),
        (["--user", "ma\udcffya"], ["--user holds a lone surrogate"]),
        (["--transport", "tcp"], ["invalid choice: 'tcp'"]),
    ],
)
def test_command_line_mistakes_are_one_error_line(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    options: list[str],
    needles: list[str],
) -> None:
    store = tmp_path / "store"
    try:
        code, out, err = run(capsys, "--path", str(store), "mcp", *options)
    except SystemExit as exc:  # argparse's own refusals
        code, (out, err) = int(str(exc.code)), capsys.readouterr()
    assert (code, out) == (2, "")
    assert err.startswith("ctxbudget: error: ") and err.count("\n") == 1, err
    for needle in needles:
        assert needle in err, err
    assert not store.exists()  # refused before the store was opened


def test_a_port_in_use_is_named(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        code, out, err = run(
            capsys, "--path", str(tmp_path / "s"), "mcp", "--transport", "http", "--port", str(port)
        )
    assert (code, out) == (2, "")
    assert f"--port {port}: cannot listen on 127.0.0.1:{port}" in err, err
    assert "--port 0" in err


def test_the_public_names_are_pinned() -> None:
    import ctxbudget.mcp

    assert sorted(ctxbudget.mcp.__all__) == ["MemoryTools", "Shutdown", "build_server", "serve"]
    for name in ctxbudget.mcp.__all__:
        assert getattr(ctxbudget.mcp, name) is not None


def test_without_the_extra_the_command_names_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in [n for n in sys.modules if n == "mcp" or n.startswith("mcp.")]:
        monkeypatch.setitem(sys.modules, name, None)  # as if the SDK were not installed
    monkeypatch.setitem(sys.modules, "mcp", None)
    store = tmp_path / "store"
    code, out, err = run(capsys, "--path", str(store), "mcp")
    assert (code, out) == (2, "")
    assert "ctxbudget mcp" in err and "pip install 'ctxbudget[mcp]'" in err, err
    assert not store.exists()
