"""Retrying calls to a Chroma server: which failures are transient, and how long to wait.

`ChromaStore` retries a call to a Chroma *server* when the failure says the server could not be
reached or was briefly unavailable (`is_transient`): connection refused or reset, a timeout, a
response cut short, HTTP 429/502/503/504. Input errors are never retried, and an embedded Chroma
is never retried (a full disk or a read-only folder does not fix itself in two seconds).

Every call the store retries is safe to repeat: reads; ``upsert`` of the same ids with the same
content; ``delete`` by id; and the seq claims, which ``add`` an id that Chroma keeps only once
and then read back who owns it. A call whose reply was lost is therefore repeated without
writing anything twice.

Waits grow exponentially with jitter, so clients that lost the same server do not all come back
at the same instant: the wait before retry ``n`` (from 0) is
``min(max_delay, backoff * multiplier**n)``, scaled by a random factor in ``[1 - jitter, 1]``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from ctxbudget.errors import StoreInputError

__all__ = [
    "TRANSIENT_STATUS",
    "RetryPolicy",
    "causes",
    "is_transient",
    "never_sent",
    "retry_call",
]

T = TypeVar("T")

TRANSIENT_STATUS = frozenset({429, 502, 503, 504})
"""HTTP statuses that mean "try again shortly": rate limited, or a proxy without a server."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently a server call is retried.

    The defaults try 3 times and wait at most 0.5 + 1.0 s between tries, so a lost server is
    reported within about 2 seconds. ``RetryPolicy(attempts=1)`` turns retries off.

    Attributes:
        attempts: tries in all, the first one included (at least 1).
        backoff: the longest wait before the first retry, in seconds.
        multiplier: each wait is this many times the previous one (at least 1).
        max_delay: no wait is longer than this.
        jitter: the fraction of each wait that is random (0: fixed waits, 1: anywhere from 0).
        timeout: the longest one request to the server may take, in seconds, before it counts
            as failed (and, being transient, is tried again); None waits forever. A server that
            accepts connections but never answers is then reported instead of hanging the app.

    >>> RetryPolicy().max_wait
    1.5
    >>> RetryPolicy(attempts=5, backoff=0.25, max_delay=1.0).max_wait
    2.75
    """

    attempts: int = 3
    backoff: float = 0.5
    multiplier: float = 2.0
    max_delay: float = 4.0
    jitter: float = 0.5
    timeout: float | None = 30.0

    def __post_init__(self) -> None:
        if isinstance(self.attempts, bool) or not isinstance(self.attempts, int):
            msg = f"attempts must be an int of at least 1, got {self.attempts!r}"
            raise StoreInputError(msg)
        if self.attempts < 1:
            msg = f"attempts must be at least 1 (1 means no retry), got {self.attempts}"
            raise StoreInputError(msg)
        for name, low in (("backoff", 0.0), ("multiplier", 1.0), ("max_delay", 0.0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value >= low:
                msg = f"{name} must be a number of at least {low}, got {value!r}"
                raise StoreInputError(msg)
        if isinstance(self.jitter, bool) or not isinstance(self.jitter, int | float):
            msg = f"jitter must be a number from 0 to 1, got {self.jitter!r}"
            raise StoreInputError(msg)
        if not 0.0 <= self.jitter <= 1.0:
            msg = f"jitter must be a number from 0 to 1, got {self.jitter!r}"
            raise StoreInputError(msg)
        timeout = self.timeout
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0
        ):
            msg = f"timeout must be a positive number of seconds or None, got {timeout!r}"
            raise StoreInputError(msg)

    def longest(self, retry: int) -> float:
        """The wait before retry number ``retry`` (0 for the first retry) before jitter."""
        if self.backoff == 0:
            return 0.0
        try:
            grown = self.backoff * self.multiplier**retry
        except OverflowError:
            return float(self.max_delay)
        return float(min(self.max_delay, grown))

    def delay(self, retry: int, rng: random.Random | None = None) -> float:
        """The wait before retry number ``retry`` (0 for the first retry), jitter applied."""
        draw = (rng or random).random()
        return self.longest(retry) * (1.0 - self.jitter * draw)

    @property
    def max_wait(self) -> float:
        """The most time spent waiting between tries (the calls themselves not counted)."""
        return sum(self.longest(n) for n in range(self.attempts - 1))


def _status(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    if isinstance(status, int):
        return status
    code = getattr(exc, "code", None)  # chromadb.errors.ChromaError.code()
    if callable(code):
        try:
            value = code()
        except TypeError:
            return None
        return value if isinstance(value, int) else None
    return None


def causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, then what it was raised from or during, and so on (each exception once).

    >>> try:
    ...     try:
    ...         raise OSError("down")
    ...     except OSError as inner:
    ...         raise ValueError("wrapped") from inner
    ... except ValueError as outer:
    ...     [type(e).__name__ for e in causes(outer)]
    ['ValueError', 'OSError']
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def is_transient(exc: BaseException) -> bool:
    """Whether a failed server call may succeed if tried again shortly.

    True for connection errors (refused, reset, aborted), timeouts, a reply cut short, and HTTP
    429/502/503/504, also when wrapped in another exception (chromadb turns a refused connection
    into ``ValueError("Could not connect...")``). False for everything else, in particular for
    any input error.

    >>> is_transient(ConnectionRefusedError())
    True
    >>> is_transient(ValueError("bad filter"))
    False
    """
    for current in causes(exc):
        if isinstance(current, StoreInputError):
            return False
        if isinstance(current, ConnectionError | TimeoutError):
            return True
        if _status(current) in TRANSIENT_STATUS:
            return True
        if _is_httpx_transient(current):
            return True
    return False


def never_sent(exc: BaseException) -> bool:
    """Whether a failed call never reached the server (no connection), so it changed nothing.

    >>> never_sent(ConnectionRefusedError())
    True
    >>> never_sent(ConnectionResetError())
    False
    """
    try:
        import httpx
    except ImportError:  # pragma: no cover - httpx comes with chromadb
        httpx = None  # type: ignore[assignment]
    for current in causes(exc):
        if isinstance(current, ConnectionRefusedError):
            return True
        if httpx is not None and isinstance(current, httpx.ConnectError | httpx.ConnectTimeout):
            return True
    return False


def _is_httpx_transient(exc: BaseException) -> bool:
    try:
        import httpx
    except ImportError:  # pragma: no cover - httpx comes with chromadb
        return False
    return isinstance(exc, httpx.TimeoutException | httpx.NetworkError | httpx.RemoteProtocolError)


def retry_call(
    call: Callable[[], T],
    *,
    policy: RetryPolicy,
    catch: tuple[type[BaseException], ...],
    fail: Callable[[BaseException, int, float], BaseException],
    transient: Callable[[BaseException], bool] = is_transient,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
    on_retry: Callable[[BaseException, int, float], None] | None = None,
) -> T:
    """Run ``call``; on a transient error wait and try again, up to ``policy.attempts`` times.

    Args:
        call: the operation; it must be safe to repeat.
        policy: how many tries and how long to wait between them.
        catch: the exceptions that count as a failed call; others propagate untouched.
        fail: builds the error raised when the call failed for good, from the last exception,
            the tries made and the seconds spent; it is raised ``from`` the last exception.
        transient: which caught exceptions are worth another try.
        sleep: how to wait (tests may pass a recorder).
        rng: the source of jitter.
        on_retry: told of each retry before its wait: the exception, the try that failed
            (from 1) and the wait in seconds.

    Returns:
        What ``call`` returned.

    >>> retry_call(lambda: 42, policy=RetryPolicy(), catch=(OSError,),
    ...            fail=lambda exc, tries, spent: exc)
    42
    """
    started = time.monotonic()
    attempt = 1
    while True:
        try:
            return call()
        except catch as exc:
            if attempt >= policy.attempts or not transient(exc):
                raise fail(exc, attempt, time.monotonic() - started) from exc
            wait = policy.delay(attempt - 1, rng)
            if on_retry is not None:
                on_retry(exc, attempt, wait)
        sleep(wait)
        attempt += 1
