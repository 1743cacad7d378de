"""``ctxbudget mcp --transport http``: a request from a bad Host or Origin gets the SDK's refusal.

The SDK checks each request's ``Host`` and ``Origin`` against the loopback names (DNS
rebinding protection: a page on another site must not reach the server through a name that
resolves to 127.0.0.1). Before, `ctxbudget.mcp.posted` read each POST's body first, so such a
request with a body the SDK cannot read (or one over the size limit) got the body's JSON-RPC
error (HTTP 400 or 413) instead: the server read, and answered, a request it must refuse
unread. Now the headers are checked first, as the SDK checks them. Raw POSTs (httpx) to a real
server process.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from test_mcp_http_bodies import HttpServer

from ctxbudget.mcp.posted import LIMIT

BAD_BODIES = ["[]", "not json at all", '{"jsonrpc": "1.0", "id": 1, "method": "ping"}']


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    folder = tmp_path_factory.mktemp("mcp-http-hosts")
    served = HttpServer(folder / "store", folder / "stderr.txt")
    try:
        yield served
    finally:
        served.stop()


def _post(server: HttpServer, body: str, **headers: str) -> tuple[int, str]:
    response = server.http.post(
        server.url, content=body.encode(), headers={**server.headers, **headers}
    )
    return response.status_code, response.text


@pytest.mark.parametrize("body", [*BAD_BODIES, '{"jsonrpc": "2.0", "id": 9, "method": "ping"}'])
def test_a_bad_host_gets_the_sdks_refusal_whatever_the_body(server: HttpServer, body: str) -> None:
    assert _post(server, body, Host="evil.example:80") == (421, "Invalid Host header")
    server.still_serving()


@pytest.mark.parametrize("body", [*BAD_BODIES, '{"jsonrpc": "2.0", "id": 9, "method": "ping"}'])
def test_a_bad_origin_gets_the_sdks_refusal_whatever_the_body(
    server: HttpServer, body: str
) -> None:
    got = _post(server, body, Origin="http://evil.example")
    assert got == (403, "Invalid Origin header")
    server.still_serving()


def test_a_bad_host_is_refused_before_a_body_over_the_limit_is_read(server: HttpServer) -> None:
    body = '{"jsonrpc": "2.0", "id": 3, "method": "ping", "pad": "' + "a" * LIMIT + '"}'
    assert _post(server, body, Host="evil.example:80") == (421, "Invalid Host header")
    server.still_serving()


def test_a_good_host_and_origin_still_get_the_body_checked(server: HttpServer) -> None:
    status, text = _post(server, "[]", Host=server.url.split("/")[2], Origin="http://localhost:1")
    assert status == 400 and "a batch" in text, text
    server.still_serving()
