"""Talking to Chroma: importing it, URLs, HTTP clients that cannot hang, and why writes failed.

Helpers of `ctxbudget.store.chroma_store`. chromadb's behaviours worked around here (checked on
chromadb 1.5.9): its HTTP client has no timeout; an error reply that is not Chroma's own (a
proxy's 503) surfaces as a bare ``Exception``; a failed embedded open leaves a broken System
cached for the folder; a full disk shows as "Failed to apply logs to the metadata segment"; and
a closed embedded client fails every later call with ``AttributeError: 'RustBindingsAPI' object
has no attribute 'bindings'``. So closed is one rule (`Closable`): once ``close()`` ran, every
public method of a store or memory raises `MemoryClosedError` before it reaches Chroma.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import os
import threading
import time
import urllib.parse
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from ctxbudget.errors import MemoryClosedError, StoreInputError
from ctxbudget.extras import missing_extra
from ctxbudget.store.replies import bounded_body, stamp_start
from ctxbudget.store.retry import causes
from ctxbudget.telemetry.spans import refused_span

__all__ = [
    "CLOSE_METHODS",
    "Closable",
    "close_client",
    "closed_message",
    "file_size_limit",
    "forget_failed_system",
    "http_client",
    "import_chromadb",
    "index_not_ready",
    "is_server",
    "parse_url",
    "raise_for_status",
    "run_callbacks",
    "valid_collection_name",
    "watch_status",
    "write_problem",
]

logger = logging.getLogger(__name__)

# Below this much free space, a failed write in an embedded Chroma is reported as a full disk.
_LOW_SPACE = 16 * 1024 * 1024


def parse_url(url: str) -> tuple[str, int, bool]:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        msg = (
            f"Chroma URL {url!r} is not an http(s) URL with a host; use e.g. http://127.0.0.1:8000"
        )
        raise StoreInputError(msg)
    if parts.path not in ("", "/"):
        msg = f"Chroma URL {url!r} has a path; give only scheme, host and port"
        raise StoreInputError(msg)
    try:
        port = parts.port
    except ValueError as exc:
        msg = f"Chroma URL {url!r} has an invalid port: {exc}"
        raise StoreInputError(msg) from exc
    ssl = parts.scheme == "https"
    return parts.hostname, port or (443 if ssl else 8000), ssl


def import_chromadb() -> tuple[Any, Any, tuple[type[BaseException], ...]]:
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
    try:
        import chromadb
        import chromadb.errors
        import httpx
        from chromadb.config import Settings
    except ImportError as exc:
        error = missing_extra(
            "memory", "ChromaStore (and ContextMemory, which keeps its data there)", exc
        )
        raise error from exc
    # Connection failures surface as httpx transport errors; server-side failures as ChromaError;
    # error replies that are not Chroma's own as HTTPStatusError (see `watch_status`).
    errors: tuple[type[BaseException], ...] = (
        httpx.TransportError,
        httpx.HTTPStatusError,
        chromadb.errors.ChromaError,
    )
    return chromadb, Settings, errors


def raise_for_status(response: Any) -> None:
    # chromadb raises a bare Exception for an error reply that is not one of its own (a proxy's
    # 502 or 503, a gateway's 401), which nothing can catch or retry by type: raise httpx's
    # HTTPStatusError for those instead. Chroma's own errors (a JSON body naming one) stay.
    # A redirect is no Chroma reply either: chromadb would raise a bare, empty Exception.
    if response.status_code < 300:
        return
    import chromadb.errors

    response.read()
    try:
        body = json.loads(response.text)
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("error") in chromadb.errors.error_types:
        return
    response.raise_for_status()


def watch_status(client: Any) -> None:
    session = getattr(getattr(client, "_server", None), "_session", None)
    hooks = getattr(session, "event_hooks", None)
    if isinstance(hooks, dict):
        requests = [*hooks.get("request", []), stamp_start]
        responses = [*hooks.get("response", []), raise_for_status, bounded_body]
        session.event_hooks = {  # type: ignore[union-attr]
            **hooks,
            "request": requests,
            "response": responses,
        }


def http_client(
    chromadb: Any, host: str, port: int, ssl: bool, settings: Any, timeout: float | None
) -> Any:
    """chromadb.HttpClient, with every request bounded by ``timeout`` seconds.

    chromadb's HTTP client waits forever (httpx ``timeout=None``), so a server that accepts the
    connection but never answers would hang the caller, already in the constructor (it asks the
    server for its tenant). The heartbeat is asked first with the timeout, then the client's own
    session gets it.
    """
    if timeout is None:
        return chromadb.HttpClient(host=host, port=port, ssl=ssl, settings=settings)
    import httpx

    scheme = "https" if ssl else "http"
    httpx.get(f"{scheme}://{host}:{port}/api/v2/heartbeat", timeout=timeout).raise_for_status()
    client = chromadb.HttpClient(host=host, port=port, ssl=ssl, settings=settings)
    for owner in (client, getattr(client, "_admin_client", None)):
        session = getattr(getattr(owner, "_server", None), "_session", None)
        if isinstance(session, httpx.Client):
            session.timeout = httpx.Timeout(timeout)
    return client


def forget_failed_system(folder: str) -> None:
    # chromadb caches one System per folder *before* starting it; when the start fails (a
    # read-only folder, a full disk) the broken System stays cached and every later open of
    # that folder in this process fails with an AttributeError. Drop it if no client uses it.
    try:
        from chromadb.api.shared_system_client import SharedSystemClient
    except ImportError:  # pragma: no cover - the module exists in every chromadb 1.x
        return
    systems = getattr(SharedSystemClient, "_identifier_to_system", None)
    counts = getattr(SharedSystemClient, "_identifier_to_refcount", None)
    if isinstance(systems, dict) and isinstance(counts, dict) and not counts.get(folder):
        systems.pop(folder, None)


def file_size_limit() -> int | None:
    try:
        import resource
    except ImportError:  # not on Windows
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    return None if soft == resource.RLIM_INFINITY else int(soft)


def write_problem(folder: Path) -> tuple[str, str] | None:
    """Why an embedded Chroma in ``folder`` cannot write and what to do, if the system shows it.

    Chroma's own errors rarely say (a full disk shows as "Failed to apply logs to the metadata
    segment"), so the folder is looked at: a read-only mount, no write permission, little free
    space, a file size limit (RLIMIT_FSIZE) the store's files are close to.
    """
    probe = folder
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    statvfs = getattr(os, "statvfs", None)
    if statvfs is None:  # not on Windows
        return None
    try:
        stats = statvfs(probe)
    except OSError:
        return None
    if stats.f_flag & os.ST_RDONLY:
        return "its file system is mounted read-only", "remount it read-write"
    files = [probe, *probe.glob("chroma.sqlite3*")]
    locked = [f for f in files if not os.access(f, os.W_OK)]
    if locked:
        what = "the folder" if locked[0] == probe else locked[0].name
        return f"{what} is read-only (no write permission)", "make it writable"
    free = stats.f_bavail * stats.f_frsize
    if free < _LOW_SPACE:
        return f"no space left on its device ({free // 1024:,} KiB free)", "free some space"
    limit = file_size_limit()
    if limit is not None:
        sizes = {f: f.stat().st_size for f in probe.rglob("*") if f.is_file()}
        largest = max(sizes, key=sizes.__getitem__, default=None)
        if largest is not None and sizes[largest] + _LOW_SPACE >= limit:
            problem = (
                f"this process may not write files over {limit:,} bytes (RLIMIT_FSIZE) and "
                f"{largest.name} has {sizes[largest]:,}"
            )
            return problem, "raise the limit (ulimit -f)"
    return None


CLOSE_METHODS = frozenset({"close", "aclose"})
"""The public methods of a `Closable` that a closed object still answers (closing is a no-op)."""


def closed_message(what: str, where: str, again: str | None = None) -> str:
    """The `MemoryClosedError` message: what was closed, where its data is, what to open again."""
    return (
        f"this {what} ({where}) was closed and cannot be used any more (nothing was done); "
        f"its data is still there: open a new {again or what} on it to go on"
    )


class Closable:
    """A base whose public methods (its subclasses' and their other bases' too) check it is open.

    Every public function found on a subclass, except `CLOSE_METHODS`, is wrapped once so that
    ``self._check_open()`` runs first (an async method's check runs when it is awaited); a
    method added later cannot escape the rule. Properties are left as they are: what they
    return reaches Chroma only through the store, which checks too. A subclass sets
    ``self._closed = True`` when it closes and says where its data is (``_where``).
    """

    _closed = False
    _open_again: str | None = None  # what the message says to open instead (default: the class)
    # A subclass whose close waits for the calls other threads are running (`_wait_for_calls`).
    _counts_calls = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in dir(cls):
            if name.startswith("_") or name in CLOSE_METHODS:
                continue
            method = inspect.getattr_static(cls, name)
            if inspect.isfunction(method) and not getattr(method, "__ctxbudget_checks_open__", 0):
                setattr(cls, name, _checked(method))

    def _wait_for_calls(self, excused: Callable[[], Collection[int]], timeout: float) -> None:
        """Wait until no other thread runs a method of this object (``timeout`` at most).

        For a close (`_counts_calls`): a sync call another thread started before it is not
        cut between two of its store calls (a value written and its stamp not yet, reported
        as "nothing was done"). Threads in ``excused()`` (re-read as the wait goes on) and
        this one are not waited for. Past ``timeout``, one warning, and the close goes on.
        """
        me = threading.get_ident()
        calls: dict[int, int] = vars(self).setdefault("_calls_running", {})
        deadline = time.monotonic() + timeout
        while True:
            left = excused()
            others = [t for t in list(calls) if t != me and t not in left]
            if not others:
                return
            if time.monotonic() >= deadline:
                logger.warning(
                    "closing %s while %d call(s) of other threads still run after %.0f s: "
                    "they end with MemoryClosedError",
                    type(self).__name__,
                    len(others),
                    timeout,
                )
                return
            time.sleep(0.002)

    def _check_open(self) -> None:
        """Raise `MemoryClosedError` if ``close()`` ran."""
        if self._closed:
            msg = closed_message(type(self).__name__, self._where(), self._open_again)
            raise MemoryClosedError(msg)

    def _where(self) -> str:
        raise NotImplementedError  # pragma: no cover - each subclass says where its data is


def _checked(method: Callable[..., Any]) -> Callable[..., Any]:
    wrapper: Callable[..., Any]

    def check(self: Closable) -> None:  # a refused call still ends its span, in error
        try:
            self._check_open()
        except MemoryClosedError as exc:
            refused_span(method, exc)
            raise

    if inspect.iscoroutinefunction(method):

        async def checked_async(self: Closable, /, *args: Any, **kwargs: Any) -> Any:
            check(self)
            return await method(self, *args, **kwargs)

        wrapper = checked_async
    else:

        def checked(self: Closable, /, *args: Any, **kwargs: Any) -> Any:
            if not self._counts_calls:
                check(self)
                return method(self, *args, **kwargs)
            # Calls running, by thread (each thread changes its own count only). Counted
            # before the check: a close that begins after the check waits for this call.
            calls: dict[int, int] = vars(self).setdefault("_calls_running", {})
            me = threading.get_ident()
            depth = calls.get(me, 0)
            calls[me] = depth + 1
            try:
                # A call made inside a running one (assemble asks candidates) goes on: the
                # close waits for the running call, and cutting it half-way is what it avoids
                # (until 2026-12-01 an assemble running at a close raised MemoryClosedError).
                if not depth:
                    check(self)
                return method(self, *args, **kwargs)
            finally:
                if calls[me] > 1:
                    calls[me] -= 1
                else:
                    del calls[me]

        wrapper = checked
    wrapper = functools.wraps(method)(wrapper)
    wrapper.__ctxbudget_checks_open__ = True  # type: ignore[attr-defined]
    return wrapper


def run_callbacks(callbacks: list[Callable[[], None]]) -> Exception | None:
    """Run and remove each callback in turn; return the first error (the others still run).

    One cut by Ctrl-C (any ``BaseException`` but an ``Exception``) stays first in the list, so
    the next close runs it again, and the cut is raised.
    """
    failed: Exception | None = None
    while callbacks:
        callback = callbacks.pop(0)
        try:
            callback()
        except Exception as exc:  # noqa: BLE001 - returned, after the other callbacks ran
            failed = failed or exc
        except BaseException:
            callbacks.insert(0, callback)
            raise
    return failed


def close_client(client: Any) -> None:
    close = getattr(client, "close", None)
    if callable(close):
        close()
    # chromadb 1.5's Client.close() stops its System but leaves the HTTP clients' httpx
    # connection pools open (a ResourceWarning per socket at exit): close them here.
    for owner in (client, getattr(client, "_admin_client", None)):
        session = getattr(getattr(owner, "_server", None), "_session", None)
        close_session = getattr(session, "close", None)
        if callable(close_session):
            close_session()


def is_server(client: Any) -> bool:
    # An HTTP client may share its server with other processes; an embedded one may not.
    try:
        implementation = str(client.get_settings().chroma_api_impl)
    except AttributeError:
        return True
    return "fastapi" in implementation.lower()


def valid_collection_name(name: object) -> str:
    if (
        not isinstance(name, str)
        or not 3 <= len(name) <= 500
        or not name[0].isascii()
        or not name[0].isalnum()
        or not name[-1].isascii()
        or not name[-1].isalnum()
        or any(not (c.isascii() and (c.isalnum() or c in "._-")) for c in name)
    ):
        msg = (
            f"collection must be 3-500 characters from [a-zA-Z0-9._-], starting and ending with "
            f"a letter or digit, got {name!r}"
        )
        raise StoreInputError(msg)
    return name


# What chromadb 1.5's local vector index says when a query reads it while a write is creating or
# updating it (chroma-core/chroma#4212): on a server, a search racing a new collection's first
# writes failed this way in 10 of 20 runs; once the write is done the same search succeeds.
_INDEX_NOT_READY = ("Error creating hnsw segment reader: Nothing found on disk", "Error finding id")


def index_not_ready(exc: BaseException) -> bool:
    """Whether a failed query met a vector index still being written (worth one more try)."""
    return any(text in str(e) for e in causes(exc) for text in _INDEX_NOT_READY)
