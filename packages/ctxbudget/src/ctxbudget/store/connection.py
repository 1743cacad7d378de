"""One Chroma opened for a store, and the one way the store calls it.

Which Chroma: a client given as is, a server (``url``) or an embedded Chroma in a folder; the
store's folder lock (`ctxbudget.store.lock`) keeps an embedded folder to one process.

Every call to Chroma goes through `Connection.call`, which keeps three promises:

- On a server, a call that fails transiently is retried (`ctxbudget.store.retry`); a search is
  also retried when it meets a new collection's index still being written (its own
  ``transient``). An embedded Chroma is never retried.
- On an embedded Chroma, calls run one at a time: each holds the store's lock.
- A failure becomes a `StoreError` that names where the data is, what failed, what may have
  been written and what to do.

Within a process, stores on the same location (path, URL or client) and collection share one
lock (`store_lock`): writes hold it while they read, plan and write, and an embedded store holds
it for every call.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ctxbudget.errors import MemoryClosedError, StoreError
from ctxbudget.store.client import (
    close_client,
    closed_message,
    forget_failed_system,
    http_client,
    is_server,
    parse_url,
    watch_status,
    write_problem,
)
from ctxbudget.store.lock import FolderLock, hold_folder
from ctxbudget.store.replies import ReplyError, json_reply
from ctxbudget.store.retry import RetryPolicy, is_transient, never_sent, retry_call

__all__ = ["ENV_URL", "Connection", "store_lock"]

T = TypeVar("T")

ENV_URL = "CTXBUDGET_CHROMA_URL"
"""The environment variable naming the server a store uses when given no location."""
_DEFAULT_PATH = "./.ctxbudget"
_NO_RETRY = RetryPolicy(attempts=1)

_LOCKS: dict[tuple[str, ...], threading.RLock] = {}
_LOCKS_GUARD = threading.Lock()


def store_lock(key: tuple[str, ...]) -> threading.RLock:
    """The lock of one (location, collection) in this process, the same for every store on it."""
    with _LOCKS_GUARD:
        lock = _LOCKS.get(key)
        if lock is None:
            lock = _LOCKS[key] = threading.RLock()
        return lock


class Connection:
    """A Chroma client opened for one store: where it is, its lock, and how it is called.

    Args:
        chroma: what `ctxbudget.store.client.import_chromadb` returns: chromadb, its
            ``Settings`` class and the exceptions that mean a Chroma call failed.
        collection: the store's collection name (part of the lock's key).
        retry: how server calls are retried (None: `RetryPolicy()`).
        logger: where the store's warnings go (retries, migrations, embedder changes).
        path: folder of the embedded Chroma.
        url: a Chroma server; with no ``path`` and no ``client``, `ENV_URL` if set.
        client: a chromadb client to use as is (not closed here).

    Raises:
        StoreError: Chroma cannot be opened or reached.
        StoreInputError: a malformed URL.
    """

    def __init__(
        self,
        chroma: tuple[Any, Any, tuple[type[BaseException], ...]],
        collection: str,
        retry: RetryPolicy | None,
        logger: logging.Logger,
        *,
        path: str | os.PathLike[str] | None,
        url: str | None,
        client: Any,
    ) -> None:
        chromadb, settings_cls, io_errors = chroma
        settings = settings_cls(anonymized_telemetry=False)
        self.retry = policy = RetryPolicy() if retry is None else retry
        self.io_errors = io_errors
        self.logger = logger
        self.folder: Path | None = None
        self._folder_lock: FolderLock | None = None
        self._owns_client = client is None
        self._closed = False
        if url is None and client is None and path is None:
            url = os.environ.get(ENV_URL) or None
        if client is not None:
            self.location = f"the given Chroma client ({type(client).__name__})"
            self._hint = "check the client passed to ChromaStore"
            lock_key = ("client", str(id(client)), collection)
            self.client: Any = client
        elif url is not None:
            host, port, ssl = parse_url(url)
            self.location = f"the Chroma server at {url}"
            self._hint = (
                f"check that it is running and reachable (chroma run --host {host} --port {port}) "
                f"or fix the url / {ENV_URL}"
            )
            lock_key = ("url", f"{host}:{port}", collection)
            # chromadb turns a refused connection into a ValueError ("Could not connect").
            refused: tuple[type[BaseException], ...] = (ValueError, *io_errors)
            self.client = retry_call(
                # A reply of the wrong shape is a ReplyError, a ValueError: refused, as is.
                lambda: json_reply(
                    lambda: http_client(chromadb, host, port, ssl, settings, policy.timeout)
                ),
                policy=policy,
                catch=refused,
                fail=lambda exc, tries, spent: self.failure(
                    f"cannot connect to {self.location}", exc, tries, spent
                ),
                on_retry=lambda exc, tries, wait: logger.warning(
                    "cannot connect to %s (try %d of %d: %s); retrying in %.2f s",
                    self.location,
                    tries,
                    policy.attempts,
                    exc,
                    wait,
                ),
            )
            watch_status(self.client)
        else:
            folder = Path(path if path is not None else _DEFAULT_PATH).resolve()
            self.location = f"the embedded Chroma in {folder}"
            self._hint = f"check that {folder} is a writable folder no other process has open"
            lock_key = ("path", str(folder), collection)
            unusable: tuple[type[BaseException], ...] = (OSError, *io_errors)
            self.folder = folder
            # One process per folder (see ctxbudget.store.lock): a second one is refused here.
            self._folder_lock = hold_folder(folder)
            try:
                self.client = chromadb.PersistentClient(path=str(folder), settings=settings)
            except unusable as exc:
                self._folder_lock.release()
                forget_failed_system(str(folder))
                what = f"cannot open {self.location}"
                raise self.failure(what, exc, 1, 0.0) from exc
        self.key = lock_key
        """What identifies the store in this process (its folder, server or client, and name)."""
        self.lock = store_lock(lock_key)
        self.shared = is_server(self.client)  # other processes may use it too

    def close(self) -> None:
        """Release the client if it was created here, and the folder (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self._owns_client:
            close_client(self.client)
        if self._folder_lock is not None:
            self._folder_lock.release()

    def failure(
        self, what: str, exc: BaseException, tries: int, spent: float, wrote: str = ""
    ) -> StoreError:
        """The `StoreError` for a failed call: what failed, why, what to do, what was written."""
        after = f" after {tries} attempts over {spent:.1f} s" if tries > 1 else ""
        problem = None if self.folder is None else write_problem(self.folder)
        if problem is not None:
            reason, fix = problem
            msg = f"cannot write to {self.folder}: {reason}; {what}: {exc}; {fix}, then try again"
            msg += wrote
        else:
            msg = f"{what}{after}: {exc}; {self._hint}{wrote}"
        return StoreError(msg)

    def call(
        self,
        action: str,
        call: Callable[[], T],
        *,
        wrote: str = "",
        unsure: str = "",
        transient: Callable[[BaseException], bool] = is_transient,
    ) -> T:
        """Run one Chroma call, retried on a server; a failure becomes a StoreError.

        ``wrote`` ends the message when the call certainly changed nothing of its own (it never
        reached the server), ``unsure`` (if given) when it may have been applied in part.
        ``transient`` tells which failures of a server call are worth another try.
        """

        def fail(exc: BaseException, tries: int, spent: float) -> StoreError:
            done = unsure if unsure and not never_sent(exc) else wrote
            return self.failure(f"{self.location} failed to {action}", exc, tries, spent, done)

        def retrying(exc: BaseException, tries: int, wait: float) -> None:
            self.logger.warning(
                "%s failed to %s (try %d of %d: %s); retrying in %.2f s",
                self.location,
                action,
                tries,
                self.retry.attempts,
                exc,
                wait,
            )

        if self.shared:
            self._check_open()
            try:
                # A reply that is not Chroma's (not JSON, the wrong shape) is not retried.
                return retry_call(
                    lambda: json_reply(call),
                    policy=self.retry,
                    catch=(*self.io_errors, ReplyError),
                    fail=fail,
                    transient=lambda exc: not self._closed and transient(exc),
                    on_retry=retrying,
                )
            except Exception as exc:
                # Closed by another thread under this call: the HTTP client fails with its own
                # RuntimeError ("the client has been closed") or a bad file descriptor.
                if self._closed and not isinstance(exc, MemoryClosedError):
                    raise self._closed_error() from exc
                raise
        # An embedded Chroma is not safe for concurrent calls within one process: a query that
        # overlaps a write can read a vector index still being built or saved and fail with
        # "Error creating hnsw segment reader: Nothing found on disk" or "Error finding id"
        # (measured with chromadb 1.5.9: about 1 in 40 runs of 4 writers and 3 readers). So
        # every call on an embedded store holds the store's lock; embedding stays outside it.
        with self.lock:
            self._check_open()
            return retry_call(
                call, policy=_NO_RETRY, catch=(*self.io_errors, ReplyError), fail=fail
            )

    def _check_open(self) -> None:
        # A closed chromadb client fails with an AttributeError ('RustBindingsAPI' object has
        # no attribute 'bindings'): whatever still holds the store's parts gets the clear error.
        if self._closed:
            raise self._closed_error()

    def _closed_error(self) -> MemoryClosedError:
        where = f"{self.location}, collection {self.key[-1]!r}"
        return MemoryClosedError(
            closed_message("ChromaStore", where, "ChromaStore or ContextMemory")
        )
