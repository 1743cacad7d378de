"""A model server's reply passes one boundary: deadline, origin, size, depth, window range.

Hostile replies come from real sockets on 127.0.0.1: `served_stub.StubServer` with raw bodies,
and `Scripted`, a server that answers what a test scripts (a redirect, a body that trickles in)
and records every request's headers.
"""

from __future__ import annotations

import json
import socketserver
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from served_stub import Served, StubServer

from ctxbudget import Budget, ConfigurationError, WindowDetectionError, detect_window
from ctxbudget.tokens.server_api import MAX_WINDOW
from ctxbudget.tokens.server_http import MAX_JSON_DEPTH, MAX_REPLY_BYTES

Script = Callable[[str, str], tuple[bytes, list[bytes], float]]
"""``(method, path) -> (status line and headers, body chunks, seconds between chunks)``."""


@dataclass
class Scripted:
    """A server on 127.0.0.1 that answers as ``script`` says and records each request."""

    script: Script
    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    _server: socketserver.ThreadingTCPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> Scripted:
        outer = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                line = self.rfile.readline().decode("latin-1").split()
                headers: dict[str, str] = {}
                while (header := self.rfile.readline().decode("latin-1").strip()) != "":
                    name, _, value = header.partition(":")
                    headers[name.strip().lower()] = value.strip()
                self.rfile.read(int(headers.get("content-length", "0")))
                outer.requests.append((line[0], line[1], headers))
                head, chunks, pause = outer.script(line[0], line[1])
                try:
                    self.wfile.write(head)
                    for chunk in chunks:
                        self.wfile.write(chunk)
                        self.wfile.flush()
                        time.sleep(pause)
                except OSError:  # the client gave up
                    pass

        socketserver.ThreadingTCPServer.daemon_threads = True
        socketserver.ThreadingTCPServer.allow_reuse_address = True
        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()


def _head(status: str, length: int | None = None, extra: str = "") -> bytes:
    sized = f"Content-Length: {length}\r\n" if length is not None else ""
    return (
        f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{sized}{extra}"
        "Connection: close\r\n\r\n"
    ).encode()


def _json_reply(payload: object) -> tuple[bytes, list[bytes], float]:
    raw = json.dumps(payload).encode()
    return _head("200 OK", len(raw)), [raw], 0.0


VLLM_MODELS = {"object": "list", "data": [{"id": "m", "object": "model", "max_model_len": 4096}]}


# -- a total deadline ---------------------------------------------------------------------------
def test_a_body_that_trickles_in_is_cut_at_the_deadline() -> None:
    # Before: the timeout was per read, so 1 byte every 0.2 s kept the caller for the whole body.
    body = json.dumps(VLLM_MODELS).encode()
    chunks = [body[i : i + 1] for i in range(len(body))]
    with Scripted(lambda m, p: (_head("200 OK", len(body)), chunks, 0.2)) as server:
        started = time.monotonic()
        with pytest.raises(WindowDetectionError, match=r"no answer within 0\.5 s"):
            detect_window("vllm:m", base_url=server.url, timeout=0.5)
        waited = time.monotonic() - started
    assert waited < 0.5 + 2.0, waited  # the whole body would take len(body) * 0.2 = 16 s


def test_a_reply_in_time_is_read_in_chunks() -> None:
    body = json.dumps(VLLM_MODELS).encode()
    chunks = [body[:10], body[10:]]
    with Scripted(lambda m, p: (_head("200 OK", len(body)), chunks, 0.01)) as server:
        assert detect_window("vllm:m", base_url=server.url, timeout=2).window == 4096


# -- redirects: the origin only, the key never elsewhere ---------------------------------------
def test_a_redirect_to_another_host_is_not_followed_and_the_key_stays_home() -> None:
    with Scripted(lambda m, p: _json_reply(VLLM_MODELS)) as elsewhere:
        target = f"{elsewhere.url}/v1/models"
        moved = _head("302 Found", 0, f"Location: {target}\r\n")
        with Scripted(lambda m, p: (moved, [], 0.0)) as server:
            with pytest.raises(WindowDetectionError, match="another origin") as caught:
                detect_window("vllm:m", base_url=server.url, api_key="sk-secret")
            assert server.requests[0][2]["authorization"] == "Bearer sk-secret"
    assert elsewhere.requests == []  # neither followed nor given the key
    assert target in str(caught.value) and "base_url" in str(caught.value)
    assert isinstance(caught.value, ConfigurationError)


def test_a_redirect_to_another_port_of_the_same_host_is_another_origin() -> None:
    with Scripted(lambda m, p: _json_reply(VLLM_MODELS)) as elsewhere:
        moved = _head("307 Temporary Redirect", 0, f"Location: {elsewhere.url}/v1/models\r\n")
        with Scripted(lambda m, p: (moved, [], 0.0)) as server:
            with pytest.raises(WindowDetectionError, match="another origin"):
                detect_window("vllm:m", base_url=server.url, api_key="sk-secret")
    assert elsewhere.requests == []


def test_a_redirect_within_the_server_is_followed_with_its_key() -> None:
    def script(method: str, path: str) -> tuple[bytes, list[bytes], float]:
        if path == "/v1/models":
            return _head("307 Temporary Redirect", 0, "Location: /v1/models/\r\n"), [], 0.0
        return _json_reply(VLLM_MODELS)

    with Scripted(script) as server:
        assert detect_window("vllm:m", base_url=server.url, api_key="sk-local").window == 4096
    assert [r[1] for r in server.requests] == ["/v1/models", "/v1/models/"]
    assert all(r[2]["authorization"] == "Bearer sk-local" for r in server.requests)


# -- size and depth -----------------------------------------------------------------------------
def test_a_reply_larger_than_the_limit_is_refused_by_name() -> None:
    body = b'{"data": ["' + b"x" * (MAX_REPLY_BYTES + 10) + b'"]}'
    with StubServer(kind="vllm") as vllm:
        vllm.raw[("GET", "/v1/models")] = (200, body)
        with pytest.raises(WindowDetectionError, match=f"more than {MAX_REPLY_BYTES:,} bytes"):
            detect_window("vllm:m", base_url=vllm.url)


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 100_000])
def test_json_nested_too_deeply_is_refused_not_a_recursion_error(depth: int) -> None:
    # Before: 100,000 nested lists raised RecursionError out of detect_window.
    body = b"[" * depth + b"]" * depth
    with StubServer(kind="vllm") as vllm:
        vllm.raw[("GET", "/v1/models")] = (200, body)
        with pytest.raises(WindowDetectionError, match=f"nested more than {MAX_JSON_DEPTH} deep"):
            detect_window("vllm:m", base_url=vllm.url)


# -- windows in range ---------------------------------------------------------------------------
def test_a_num_ctx_that_is_not_ascii_digits_is_quoted_not_a_bare_value_error() -> None:
    # Before: "²".isdigit() is True and int("²") raised a bare ValueError.
    with StubServer(kind="ollama") as ollama:
        ollama.add(Served("llama3.1:8b"))
        show = {"parameters": "num_ctx                        ²", "model_info": {}}
        ollama.raw[("POST", "/api/show")] = (200, json.dumps(show).encode())
        with pytest.raises(WindowDetectionError, match=r"num_ctx = '²'"):
            detect_window("ollama:llama3.1:8b", base_url=ollama.url)


@pytest.mark.parametrize("window", [0, -5, 10**12, 10**20, MAX_WINDOW + 1])
def test_absurd_windows_are_refused_with_the_reply_quoted(window: int) -> None:
    # Before: vLLM and LM Studio windows of 10**12 and an Ollama num_ctx of 10**20 were taken.
    quoted = str(window) if window < 10**30 else "a huge int"
    with StubServer(kind="vllm") as vllm:
        vllm.add(Served("m", max_model_len=window))
        with pytest.raises(WindowDetectionError, match=f"max_model_len = {quoted}"):
            detect_window("vllm:m", base_url=vllm.url)
    with StubServer(kind="lmstudio") as studio:
        studio.add(Served("m", loaded=window, trained=None))
        with pytest.raises(WindowDetectionError, match=f"context_length = {quoted}"):
            detect_window("lmstudio:m", base_url=studio.url)
    with StubServer(kind="ollama") as ollama:
        ollama.add(Served("m:1b", num_ctx=window, trained=None))
        with pytest.raises(WindowDetectionError, match=f"num_ctx = '?{quoted}"):
            Budget.for_model("ollama:m:1b", base_url=ollama.url)


def test_a_loaded_window_above_the_trained_length_is_refused() -> None:
    with StubServer(kind="lmstudio") as studio:
        studio.add(Served("m", loaded=200_000, trained=131_072))
        with pytest.raises(WindowDetectionError, match="more than the 131,072 tokens"):
            detect_window("lmstudio:m", base_url=studio.url)


# -- generated hostile replies ------------------------------------------------------------------
@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, StubServer]]:
    with (
        StubServer(kind="ollama") as ollama,
        StubServer(kind="vllm") as vllm,
        StubServer(kind="lmstudio") as studio,
    ):
        ollama.add(Served("m:1b", num_ctx=8192, loaded=4096))
        vllm.add(Served("m:1b", max_model_len=8192))
        studio.add(Served("m:1b", loaded=8192))
        yield {"ollama": ollama, "vllm": vllm, "lmstudio": studio}


_PATHS = {
    "ollama": [("POST", "/api/show"), ("GET", "/api/ps"), ("GET", "/api/version")],
    "vllm": [("GET", "/v1/models")],
    "lmstudio": [("GET", "/api/v1/models"), ("GET", "/api/v0/models")],
}
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**25), max_value=10**25)
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(["²", "８１９２", "8192", "1e9", "num_ctx 8192", "m:1b"])
)
_json = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
_fields = st.sampled_from(
    [
        "models",
        "data",
        "model_info",
        "parameters",
        "context_length",
        "max_model_len",
        "loaded_instances",
        "config",
        "id",
        "key",
        "name",
        "model",
        "loaded_context_length",
        "max_context_length",
        "general.architecture",
        "llama.context_length",
        "version",
    ]
)
# Replies shaped like the real ones, with any value in their fields.
_shaped = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_fields, inner, max_size=5),
    max_leaves=25,
)
_bodies = (
    _shaped.map(lambda v: json.dumps(v).encode())
    | _json.map(lambda v: json.dumps(v).encode())
    | st.binary(max_size=64)
    | st.integers(min_value=1, max_value=5000).map(lambda n: b"[" * n + b"]" * n)
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    kind=st.sampled_from(["ollama", "vllm", "lmstudio"]),
    which=st.integers(min_value=0, max_value=2),
    status=st.sampled_from([200, 200, 200, 404, 500, 401]),
    body=_bodies,
)
def test_any_reply_gives_a_window_in_range_or_a_window_detection_error(
    servers: dict[str, StubServer], kind: str, which: int, status: int, body: bytes
) -> None:
    server = servers[kind]
    paths = _PATHS[kind]
    server.raw = {paths[which % len(paths)]: (status, body)}
    try:
        found = detect_window(f"{kind}:m:1b", base_url=server.url, refresh=True)
    except WindowDetectionError as exc:
        assert server.url in str(exc) and exc.url == server.url
        return
    finally:
        server.raw = {}
    assert isinstance(found.window, int) and 1 <= found.window <= MAX_WINDOW
    assert found.model_max is None or found.window <= found.model_max


@settings(max_examples=12, deadline=None)
@given(
    pieces=st.integers(min_value=1, max_value=8),
    pause=st.sampled_from([0.0, 0.02, 0.1, 0.3]),
)
def test_any_delay_is_an_answer_in_time_or_an_error_at_the_deadline(
    pieces: int, pause: float
) -> None:
    body = json.dumps(VLLM_MODELS).encode()
    size = -(-len(body) // pieces)
    chunks = [body[i : i + size] for i in range(0, len(body), size)]
    timeout = 0.4
    with Scripted(lambda m, p: (_head("200 OK", len(body)), chunks, pause)) as server:
        started = time.monotonic()
        try:
            found: Any = detect_window("vllm:m", base_url=server.url, timeout=timeout)
        except WindowDetectionError as exc:
            assert "no answer within 0.4 s" in str(exc)
            found = None
        waited = time.monotonic() - started
    assert waited < timeout + 1.5, waited
    if found is not None:
        assert found.window == 4096
