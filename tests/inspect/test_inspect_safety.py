"""The inspector is safe by construction: loopback, same origin, GET/HEAD, and it writes nothing."""

from __future__ import annotations

import contextlib
import http.client
import io
import json
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest
from inspect_helpers import Written, dump, get, get_json

from ctxbudget import ContextMemory
from ctxbudget.cli.main import main
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.inspect import InspectServer, serve
from ctxbudget.inspect.pages import session_url
from ctxbudget.inspect.server import CSP


def raw(
    url: str, method: str = "GET", headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    """A request with exactly these headers (Host included when given)."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    given = headers or {}
    conn.putrequest(method, parts.path or "/", skip_host="Host" in given)
    for name, value in given.items():
        conn.putheader(name, value)
    conn.endheaders()
    answer = conn.getresponse()
    body = answer.read()
    conn.close()
    return answer.status, dict(answer.getheaders()), body


@pytest.fixture
def page(reader: ContextMemory):  # type: ignore[no-untyped-def]
    with serve(reader, port=0) as served:
        yield served


def test_listens_on_loopback_only(page: InspectServer) -> None:
    assert page.url == f"http://127.0.0.1:{page.port}/"
    assert page._httpd.server_address[0] == "127.0.0.1"


@pytest.mark.parametrize(
    "host",
    [
        "evil.example",
        "evil.example:{port}",
        "127.0.0.1:1",
        "127.0.0.2:{port}",
        "0.0.0.0:{port}",
        "",
    ],
)
def test_foreign_host_is_refused(page: InspectServer, host: str) -> None:
    status, headers, body = raw(page.url, headers={"Host": host.format(port=page.port)})
    assert status == 403
    assert headers["Content-Security-Policy"] == CSP
    assert b"maya" not in body


def test_missing_host_is_refused(page: InspectServer) -> None:
    assert raw(page.url, headers={"Host": ""})[0] == 403
    conn = http.client.HTTPConnection("127.0.0.1", page.port, timeout=30)
    conn.putrequest("GET", "/", skip_host=True)
    conn.endheaders()
    assert conn.getresponse().status == 403
    conn.close()


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "LOCALHOST:{port}"])
def test_own_host_is_served(page: InspectServer, host: str) -> None:
    assert raw(page.url, headers={"Host": host.format(port=page.port)})[0] == 200


@pytest.mark.parametrize(
    "origin", ["http://evil.example", "null", "http://127.0.0.1:1", "https://127.0.0.1:{port}"]
)
def test_foreign_origin_is_refused(page: InspectServer, origin: str) -> None:
    headers = {"Origin": origin.format(port=page.port)}
    assert get(page.url + "?format=json", headers=headers)[0] == 403


def test_same_origin_is_served(page: InspectServer) -> None:
    for origin in (f"http://127.0.0.1:{page.port}", f"http://localhost:{page.port}"):
        assert get(page.url, headers={"Origin": origin})[0] == 200


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "BREW"])
def test_only_get_and_head(page: InspectServer, method: str) -> None:
    status, headers, _ = raw(page.url, method, headers={"Host": f"127.0.0.1:{page.port}"})
    assert status == 405 and headers["Allow"] == "GET, HEAD"


def test_head_has_headers_only(page: InspectServer) -> None:
    status, headers, body = raw(page.url, "HEAD", headers={"Host": f"127.0.0.1:{page.port}"})
    assert status == 200 and body == b"" and int(headers["Content-Length"]) > 0
    assert headers["Content-Security-Policy"] == CSP
    assert headers["X-Content-Type-Options"] == "nosniff"


def test_pages_hold_no_script(page: InspectServer, demo_store: Written) -> None:
    for path in ("", session_url(demo_store.latest).lstrip("/")):
        _, headers, body = get(page.url + path)
        assert "<script" not in body and " on" not in body.split("<body>")[1].split(">")[0]
        assert (
            "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
            in headers["Content-Security-Policy"]
        )


def test_browsing_writes_nothing(demo_store: Written, embedder: OnnxEmbedder) -> None:
    before = dump(demo_store.path)
    files = sorted(p.relative_to(demo_store.path) for p in demo_store.path.rglob("*"))
    memory = ContextMemory(
        demo_store.path, embedder=embedder, write_behind=False, inclusion_log=False
    )
    try:
        with serve(memory, port=0) as page:
            base = page.url.rstrip("/")
            for session in ("s1", demo_store.latest, "typo-session", 'evil"><b>session</b>'):
                get(base + session_url(session))
                get(base + session_url(session, "message", "s1-0001"))
                for record in get_json(page.url)["users"][0]["sessions"]:
                    get(base + session_url(record["session"]))
            for call in get_json(base + session_url(demo_store.latest))["assemblies"]:
                get(base + session_url(demo_store.latest, "assembly", call["id"]))
            get(page.url + "?q=" + quote("Lisbon"))
            get(base + session_url("ghost", "assembly", "0000-x"))
    finally:
        memory.close()
    assert dump(demo_store.path) == before
    assert sorted(p.relative_to(demo_store.path) for p in demo_store.path.rglob("*")) == files
    assert not (demo_store.path / "ctxbudget-journal").exists() or files


def small_store(path: Path, embedder: OnnxEmbedder) -> None:
    with ContextMemory(path, embedder=embedder) as memory:
        memory.add_messages(
            "s1",
            [
                {"id": "m1", "role": "user", "text": "My locker code is 4417."},
                {"id": "m2", "role": "assistant", "text": "Noted: locker code 4417."},
            ],
            user_id="u1",
        )
        memory.assemble("s1", "what is my locker code?", budget=300)


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(argv))
    return status, out.getvalue(), err.getvalue()


def logged(path: Path, embedder: OnnxEmbedder, session: str) -> int:
    with ContextMemory(path, embedder=embedder, write_behind=False, inclusion_log=False) as m:
        return len(m.contexts(session))


@pytest.mark.parametrize("command", ["explain", "assemble"])
def test_cli_explain_and_assemble_log_only_when_asked(
    tmp_path: Path, embedder: OnnxEmbedder, command: str
) -> None:
    small_store(tmp_path, embedder)
    before = dump(tmp_path)
    status, _, _ = cli("--path", str(tmp_path), command, "locker code?", "--session", "s1")
    assert status == 0
    assert dump(tmp_path) == before  # not logged: looking changes nothing
    status, _, err = cli(
        "--path", str(tmp_path), command, "locker?", "--session", "s1-typo", "--log"
    )
    assert status == 0 and "holds no records" in err
    after = dump(tmp_path)
    assert after == before  # a mistyped session starts no log, even with --log
    status, _, _ = cli("--path", str(tmp_path), command, "locker code?", "--session", "s1", "--log")
    assert status == 0
    assert logged(tmp_path, embedder, "s1") == 2
    assert logged(tmp_path, embedder, "s1-typo") == 0


def test_cli_inspect_serves_and_stops_on_sigterm(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    small_store(tmp_path, embedder)
    before = dump(tmp_path)
    process = subprocess.Popen(
        [sys.executable, "-m", "ctxbudget.cli", "--path", str(tmp_path), "inspect", "--port", "0"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        assert "ctxbudget: inspect page at http://127.0.0.1:" in line, line
        url = line.split(" at ", 1)[1].split()[0]
        doc = get_json(url)
        assert doc["users"][0]["sessions"][0]["assemblies"] == 1
        assert get_json(url + "session/s1/message/m1")["included_in"] == [1]
        process.terminate()
        assert process.wait(timeout=60) == 0
    finally:
        process.kill()
        process.wait()
        if process.stderr is not None:
            process.stderr.close()
    assert dump(tmp_path) == before


def test_cli_inspect_refuses_a_missing_folder(tmp_path: Path) -> None:
    status, _, err = cli("--path", str(tmp_path / "nope"), "inspect", "--port", "0")
    assert status == 2 and "no store there" in err
    assert not (tmp_path / "nope").exists()


def test_a_running_app_serves_its_own_folder(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    """The folder lock refuses a second process; the app serves the page on its own memory."""
    small_store(tmp_path, embedder)
    with ContextMemory(tmp_path, embedder=embedder) as app:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "ctxbudget.cli",
                "--path",
                str(tmp_path),
                "inspect",
                "--port",
                "0",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 2 and "ctxbudget.inspect.serve(memory" in done.stderr, done.stderr
        with serve(app, port=0) as page:
            assert get_json(page.url + "session/s1")["messages"] == 2
            app.add_message("s1", "user", "And my bike lock is 9021.", id="m3")
            ctx = app.assemble("s1", "bike lock?", budget=300)
            shown = get_json(page.url + "session/s1")
            assert shown["messages"] == 3
            assert shown["assemblies"][-1]["tokens_used"] == ctx.tokens_used
            for _ in range(3):  # the app's calls go on while the page is read
                app.assemble("s1", "locker?", budget=300)
                get(page.url + "session/s1")
        assert len(app.contexts("s1")) == 5  # the page's reads added no record


def test_json_twin_is_json(page: InspectServer) -> None:
    status, headers, body = get(page.url + "?format=json")
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    assert json.loads(body)["page"] == "sessions"


def test_cli_inspect_port_in_use_is_one_line(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    small_store(tmp_path, embedder)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        status, _, err = cli("--path", str(tmp_path), "inspect", "--port", port)
    assert status == 2 and f"--port {port}: cannot listen on 127.0.0.1" in err
    status, _, err = cli("--path", str(tmp_path), "inspect", "--port", "70000")
    assert status == 2 and "--port must be between 0 and 65535" in err


def test_bidi_controls_cannot_turn_the_page_around(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    """A stored right-to-left override shows as its code: the page's own text stays as written.

    Before 2026-12-01 a user id ``"\\u202eevil"`` rendered "user seilbmessa deggol 2 ;segassem 2"
    (everything after it reversed, figures included) in a real browser.
    """
    with ContextMemory(tmp_path, embedder=embedder) as app:
        app.add_message(
            "s\u202e1", "user", "Hi \u2067there\u2069 \u202dfriend", user_id="\u202eevil"
        )
        app.assemble("s\u202e1", "hi", budget=300, user_id="\u202eevil")
        with serve(app, port=0) as page:
            bodies = [get(page.url)[2], get(page.url + session_url("s\u202e1")[1:])[2]]
    for body in bodies:
        assert not any(0x202A <= ord(c) <= 0x202E or 0x2066 <= ord(c) <= 0x2069 for c in body)
    assert "[U+202E]evil" in bodies[0]
    assert "Hi [U+2067]there[U+2069] [U+202D]friend" in bodies[1]


def test_a_silent_connection_is_closed(
    page: InspectServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A half-sent request held its thread for ever before 2026-12-01 (no socket timeout)."""
    from ctxbudget.inspect import server

    monkeypatch.setattr(server._Handler, "timeout", 0.5)
    parts = urlsplit(page.url)
    with socket.create_connection((parts.hostname or "", parts.port or 0), timeout=10) as conn:
        conn.sendall(b"GET / HTTP/1.1\r\nHost: ")  # and then nothing
        assert conn.recv(1024) == b""  # closed by the server, well before this socket's 10 s
    status, _, _ = get(page.url)
    assert status == 200  # and the server goes on answering
