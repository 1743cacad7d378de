"""A server that accepts connections but never answers is reported, not waited on forever."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from ctxbudget import RetryPolicy, StoreError, StoreInputError
from ctxbudget.embed.local import LocalEmbedder
from ctxbudget.store.chroma_store import ChromaStore
from ctxbudget.testing import ChromaServer


@pytest.fixture
def silent_url() -> Iterator[str]:
    """A loopback port whose connections are accepted (by the kernel) and never answered."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_a_server_that_never_answers_is_a_store_error_after_the_timeout(
    silent_url: str, embedder: LocalEmbedder
) -> None:
    policy = RetryPolicy(attempts=2, backoff=0.05, timeout=0.5)
    started = time.monotonic()
    with pytest.raises(StoreError, match=r"127\.0\.0\.1.*after 2 attempts.*chroma run"):
        ChromaStore(url=silent_url, embedder=embedder, retry=policy)
    print(f"reported after {time.monotonic() - started:.2f} s")  # printed, never asserted


@pytest.mark.parametrize("timeout", [0, -1.0, True, "30", float("nan")])
def test_bad_timeouts_are_refused(timeout: object) -> None:
    with pytest.raises(StoreInputError, match="timeout must be a positive number"):
        RetryPolicy(timeout=timeout)  # type: ignore[arg-type]


def test_no_timeout_is_allowed() -> None:
    assert RetryPolicy(timeout=None).timeout is None


@pytest.mark.integration
def test_requests_of_an_open_store_are_bounded_too(
    chroma_server: ChromaServer, embedder: LocalEmbedder
) -> None:
    # chromadb's own HTTP session has no timeout; the store sets the policy's on it. If a chromadb
    # upgrade moves the session, this test says so (and requests could hang again).
    store = ChromaStore(url=chroma_server.url, embedder=embedder, retry=RetryPolicy(timeout=7.0))
    try:
        session = store._client._server._session  # noqa: SLF001 - checking chromadb's internals
        assert session.timeout == httpx.Timeout(7.0)
    finally:
        store.close()
