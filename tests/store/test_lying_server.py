"""A server whose replies are not Chroma's: a clear StoreError, never a wrong result or a hang.

A real ``chroma run`` behind a proxy in the test process that, for chosen requests, changes the
reply: a hit or a record twice, a distance no cosine index gives, a body that is not JSON, a
redirect, a body trickled a byte at a time. See `ctxbudget.store.replies`.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from ctxbudget.errors import StoreError, StoreInputError
from ctxbudget.store.chroma_store import ChromaStore
from ctxbudget.store.records import Record
from ctxbudget.store.replies import ReplyError, query_reply
from ctxbudget.store.retry import RetryPolicy
from ctxbudget.testing import ChromaServer

Lie = Callable[[int, bytes], tuple[int, bytes, float]]  # status, body -> status, body, drip


class LyingProxy:
    """A proxy to a real Chroma server that changes the replies to paths ending in ``suffix``."""

    def __init__(self, upstream: ChromaServer) -> None:
        self.suffix = ""
        self.lie: Lie | None = None
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                connection = http.client.HTTPConnection("127.0.0.1", upstream.port, timeout=60)
                try:
                    skip = {"host", "connection", "content-length"}
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in skip}
                    connection.request(self.command, self.path, body, headers)
                    reply = connection.getresponse()
                    status, data = reply.status, reply.read()
                finally:
                    connection.close()
                drip = 0.0
                lie = proxy.lie
                if lie is not None and proxy.suffix and self.path.endswith(proxy.suffix):
                    status, data, drip = lie(status, data)
                self.send_response(status)
                if 300 <= status < 400:
                    self.send_header("Location", "http://127.0.0.1:9/elsewhere")
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    if not drip:
                        self.wfile.write(data)
                    for byte in data if drip else b"":
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        time.sleep(drip)
                except OSError:
                    pass  # the client gave up

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _forward

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


class HashEmbedder:
    """Eight numbers from a text's digest: enough for a search to rank, no model to load."""

    name = "hash-8"

    def _vector(self, text: str) -> list[float]:
        return [b / 255 for b in hashlib.sha256(text.encode()).digest()[:8]]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


# A lie is answered at once, so the timeout of these stores is only the bound on an honest reply
# from the shared server: long, since a loaded CI machine once took over 1 s for one read. Only
# the trickle test needs a short one, and opens its own store for it.
PATIENT = RetryPolicy(attempts=1, timeout=30.0)


@pytest.fixture
def lying(chroma_server: ChromaServer) -> Iterator[tuple[LyingProxy, ChromaStore]]:
    proxy = LyingProxy(chroma_server)
    store = ChromaStore(
        url=proxy.url, embedder=HashEmbedder(), collection=f"lie-{uuid.uuid4().hex}", retry=PATIENT
    )
    records = [
        Record(f"m{i}", "message", f"hello {i}", "ns", session_id="s", role="user")
        for i in range(4)
    ]
    store.add(records)
    try:
        yield proxy, store
    finally:
        store.close()
        proxy.close()


def _rewrite(change: Callable[[dict[str, Any]], None]) -> Lie:
    def lie(status: int, data: bytes) -> tuple[int, bytes, float]:
        reply = json.loads(data)
        change(reply)
        return status, json.dumps(reply).encode(), 0.0

    return lie


def _twice(reply: dict[str, Any]) -> None:
    for key in ("ids", "documents", "metadatas", "distances"):
        rows = reply.get(key)
        if rows and isinstance(rows[0], list):
            reply[key] = [row + row[:1] for row in rows]
        elif rows:
            reply[key] = rows + rows[:1]


def _search(store: ChromaStore) -> list[str]:
    return [h.record.id for h in store.search("hello 1", namespace="ns", k=3, session_id="s")]


@pytest.mark.integration
def test_a_search_reply_with_a_hit_twice_is_refused(
    lying: tuple[LyingProxy, ChromaStore],
) -> None:
    proxy, store = lying
    proxy.suffix, proxy.lie = "/query", _rewrite(_twice)
    # Before the fix the search returned the best hit twice (k=3: 'm1', 'm1', ...).
    with pytest.raises(StoreError, match="not Chroma's .an id comes twice") as info:
        _search(store)
    assert proxy.url in str(info.value)
    proxy.lie = None
    assert _search(store)[0] == "m1"


@pytest.mark.integration
def test_a_read_reply_with_a_record_twice_is_refused(
    lying: tuple[LyingProxy, ChromaStore],
) -> None:
    proxy, store = lying
    proxy.suffix, proxy.lie = "/get", _rewrite(_twice)
    # Before the fix session_messages returned every message twice.
    with pytest.raises(StoreError, match="an id comes twice"):
        store.session_messages(namespace="ns", session_id="s")
    proxy.lie = None
    assert [r.id for r in store.session_messages(namespace="ns", session_id="s")] == [
        f"m{i}" for i in range(4)
    ]


@pytest.mark.integration
def test_a_search_reply_that_is_not_json_is_a_store_error_not_a_bad_filter(
    lying: tuple[LyingProxy, ChromaStore],
) -> None:
    proxy, store = lying
    proxy.suffix, proxy.lie = "/query", lambda status, data: (status, data[: len(data) // 2], 0.0)
    # Before the fix: StoreInputError("invalid where filter None: unexpected end of data ...").
    with pytest.raises(StoreError, match="its reply is not JSON") as info:
        _search(store)
    assert not isinstance(info.value, StoreInputError)


@pytest.mark.integration
def test_a_read_reply_that_is_not_json_is_a_store_error(
    lying: tuple[LyingProxy, ChromaStore],
) -> None:
    proxy, store = lying
    proxy.suffix, proxy.lie = "/get", lambda status, data: (status, b'{"ids": [', 0.0)
    # Before the fix orjson.JSONDecodeError escaped.
    with pytest.raises(StoreError, match="its reply is not JSON"):
        store.get(["m1"], namespace="ns", session_id="s")


@pytest.mark.integration
def test_a_redirect_is_a_store_error(lying: tuple[LyingProxy, ChromaStore]) -> None:
    proxy, store = lying
    proxy.suffix, proxy.lie = "/get", lambda status, data: (307, b"", 0.0)
    # Before the fix chromadb raised a bare, empty Exception.
    with pytest.raises(StoreError, match="307 Temporary Redirect"):
        store.get(["m1"], namespace="ns", session_id="s")


@pytest.mark.integration
def test_a_reply_trickled_a_byte_at_a_time_ends_at_the_timeout(
    lying: tuple[LyingProxy, ChromaStore],
) -> None:
    proxy, patient = lying
    store = ChromaStore(
        url=proxy.url,
        embedder=HashEmbedder(),
        collection=patient.collection,
        retry=RetryPolicy(attempts=1, timeout=3.0),
    )
    # Every byte comes well within the 3 s read timeout, the whole reply would take minutes.
    proxy.suffix, proxy.lie = "/query", lambda status, data: (status, data + b" " * 2000, 0.3)
    try:
        started = time.monotonic()
        with pytest.raises(StoreError, match="the reply did not end within the request timeout"):
            _search(store)
        print(f"ended after {time.monotonic() - started:.1f} s")  # printed, never asserted
    finally:
        store.close()


@pytest.mark.parametrize(
    ("distance", "problem"),
    [(-5.0, "-5.0"), (float("nan"), "nan"), ("0.1", "'0.1'"), (True, "True"), (2.5, "2.5")],
)
def test_a_distance_no_cosine_index_gives_is_refused(distance: object, problem: str) -> None:
    reply = {"ids": [["a"]], "documents": [["t"]], "metadatas": [[{}]], "distances": [[distance]]}
    # Before the fix a negative or NaN distance became a similarity of 1.0.
    with pytest.raises(ReplyError, match=f"distance {problem} is not a cosine distance"):
        query_reply(reply, queries=1, k=1)


def test_rounding_past_the_ends_of_cosine_distances_is_accepted() -> None:
    reply = {
        "ids": [["a", "b"]],
        "documents": [["t", None]],
        "metadatas": [[{}, None]],
        "distances": [[-1.2e-7, 2.0000002]],
    }
    assert query_reply(reply, queries=1, k=2) is reply


def test_more_hits_than_asked_are_refused() -> None:
    reply = {
        "ids": [["a", "b"]],
        "documents": [["t", "u"]],
        "metadatas": [[{}, {}]],
        "distances": [[0.1, 0.2]],
    }
    with pytest.raises(ReplyError, match="2 hits for a query asking at most 1"):
        query_reply(reply, queries=1, k=1)


@pytest.mark.integration
@pytest.mark.parametrize("body", [b"[1, 2]", b"null", b"3", b'"ids"', b"{}"])
@pytest.mark.parametrize("suffix", ["/query", "/get"])
def test_a_reply_that_is_not_the_object_chroma_answers_is_a_store_error(
    lying: tuple[LyingProxy, ChromaStore], suffix: str, body: bytes
) -> None:
    proxy, store = lying
    proxy.suffix, proxy.lie = suffix, lambda status, data: (status, body, 0.0)
    # Before the fix chromadb's client failed on it: AttributeError ('list' object has no
    # attribute 'get') or KeyError ('ids').
    with pytest.raises(StoreError, match="its reply is not the object Chroma answers") as info:
        if suffix == "/query":
            _search(store)
        else:
            store.session_messages(namespace="ns", session_id="s")
    assert proxy.url in str(info.value)
    proxy.lie = None
    assert _search(store)[0] == "m1"


@pytest.mark.integration
@pytest.mark.parametrize("suffix", ["/collections", "/databases/default_database"])
def test_opening_on_a_server_whose_reply_is_not_an_object_is_a_store_error(
    chroma_server: ChromaServer, suffix: str
) -> None:
    proxy = LyingProxy(chroma_server)
    proxy.suffix, proxy.lie = suffix, lambda status, data: (status, b"[1]", 0.0)
    try:
        # Before the fix: TypeError (list indices must be integers or slices, not str).
        with pytest.raises(StoreError, match="its reply is not the object Chroma answers"):
            ChromaStore(
                url=proxy.url,
                embedder=HashEmbedder(),
                collection=f"lie-{uuid.uuid4().hex}",
                retry=PATIENT,
            )
    finally:
        proxy.close()
