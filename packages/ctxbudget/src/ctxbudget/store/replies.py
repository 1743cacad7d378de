"""What a Chroma server answers: checked before the store believes it.

A server's reply is a value from outside. chromadb's HTTP client passes on whatever JSON comes
back, so a proxy, another service on the port or a mismatched server version could make a
search return a hit twice, more hits than ``k``, a similarity of 1.0 from a negative or NaN
distance, or a read return a record twice, or fail with a bare ``KeyError`` or ``TypeError``.
So:

- `query_reply` and `get_reply` check the shape of a query's and a get's reply (one row per
  query, rows of equal length, no id twice, at most ``k`` hits, only ids asked for, finite
  cosine distances) and raise `ReplyError` otherwise; nothing is taken from such a reply.
- `json_reply` turns a reply that is not JSON, or JSON that chromadb's HTTP client cannot read
  as the object it expects (a list, ``null``, an object without ``ids``), into a `ReplyError`.
- `bounded_body` bounds the time to read a reply's body in all (a server that trickles its
  reply a byte at a time would otherwise keep every read under the per-read timeout forever).

`Connection.call` catches `ReplyError` (it is never retried) and raises the `StoreError` that
names the server, what failed and what to do.
"""

from __future__ import annotations

import functools
import json
import os
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

__all__ = ["ReplyError", "bounded_body", "get_reply", "json_reply", "query_reply", "stamp_start"]

T = TypeVar("T")

# Cosine distances lie in [0, 2]; float32 rounding goes a little past either end.
_DISTANCE_SLACK = 1e-3
_START = "ctxbudget.start"
_CHROMADB = f"{os.sep}chromadb{os.sep}"
_CLIENT = os.path.join("chromadb", "api", "fastapi.py")


class ReplyError(ValueError):
    """A server's reply that is not a Chroma reply to the request made."""


def _bad(what: str, problem: str) -> ReplyError:
    msg = f"its reply to a {what} is not Chroma's ({problem}); nothing was taken from it"
    return ReplyError(msg)


def json_reply(call: Callable[[], T]) -> T:
    """``call()``, with a reply that is not JSON, or not the object expected, as `ReplyError`."""
    try:
        return call()
    except json.JSONDecodeError as exc:  # orjson's error subclasses it
        msg = f"its reply is not JSON ({exc}); nothing was taken from it"
        raise ReplyError(msg) from exc
    except (AttributeError, KeyError, TypeError) as exc:
        if not _reading_reply(exc):
            raise
        problem = f"{type(exc).__name__}: {exc}"
        msg = f"its reply is not the object Chroma answers ({problem}); nothing was taken from it"
        raise ReplyError(msg) from exc


def _reading_reply(exc: BaseException) -> bool:
    """Whether ``exc`` was raised where chromadb's HTTP client reads a reply's JSON.

    chromadb's ``FastAPI`` client indexes the parsed body (``resp_json["ids"]``,
    ``resp_json.get(...)``, ``CollectionModel.from_json(resp_json)``) without checking it is an
    object: a list, ``null`` or an object without a key fails there, before `query_reply` or
    `get_reply` sees the reply. Any other such error is not the reply's and is raised as it is.
    """
    last = traceback.extract_tb(exc.__traceback__)[-1:]
    if not last:
        return False
    frame = last[0]
    if frame.filename.endswith(_CLIENT):
        return "resp_json" in (frame.line or "")
    return frame.name == "from_json" and _CHROMADB in frame.filename


def _rows(got: Mapping[str, Any], key: str, count: int, what: str) -> list[Any]:
    rows = got.get(key)
    if rows is None or isinstance(rows, str | bytes) or not hasattr(rows, "__len__"):
        raise _bad(what, f"{key!r} is {type(rows).__name__}, not a list")
    if len(rows) != count:
        raise _bad(what, f"{len(rows)} {key} for {count} rows")
    return list(rows)


def _ids(got: Mapping[str, Any], what: str) -> list[str]:
    if not isinstance(got, Mapping):
        raise _bad(what, f"a {type(got).__name__}, not an object")
    ids = got.get("ids")
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise _bad(what, f"'ids' is {type(ids).__name__}, not a list of str")
    if len(set(ids)) != len(ids):
        raise _bad(what, "an id comes twice")
    return ids


def _entries(got: Mapping[str, Any], key: str, count: int, what: str) -> None:
    types: tuple[type, ...] = (str, type(None)) if key == "documents" else (dict, type(None))
    rows = _rows(got, key, count, what)
    if not all(isinstance(row, types) for row in rows):
        raise _bad(what, f"an entry of {key!r} is not a {types[0].__name__}")


def query_reply(got: Any, *, queries: int, k: int) -> Any:
    """``got`` if it answers ``queries`` queries of at most ``k`` hits; else `ReplyError`."""
    what = "search"
    if not isinstance(got, Mapping):
        raise _bad(what, f"a {type(got).__name__}, not an object")
    ids = _rows(got, "ids", queries, what)
    for number, row in enumerate(ids):
        hits = _ids({"ids": row}, what)
        if len(hits) > k:
            raise _bad(what, f"{len(hits)} hits for a query asking at most {k}")
        part = {key: _rows(got, key, queries, what)[number] for key in ("documents", "metadatas")}
        for key, value in part.items():
            _entries({key: value}, key, len(hits), what)
        distances = _rows(got, "distances", queries, what)[number]
        distances = _rows({"distances": distances}, "distances", len(hits), what)
        for distance in distances:
            if (
                isinstance(distance, bool)
                or not isinstance(distance, int | float)
                or not -_DISTANCE_SLACK <= distance <= 2 + _DISTANCE_SLACK
            ):
                raise _bad(what, f"distance {distance!r} is not a cosine distance (0 to 2)")
    return got


def get_reply(got: Any, *, asked: Sequence[str] | None, include: Sequence[str]) -> Any:
    """``got`` if it answers a get of ``asked`` ids (None: any); else `ReplyError`."""
    what = "read"
    ids = _ids(got, what)
    if asked is not None and not set(ids) <= set(asked):
        raise _bad(what, f"{len(set(ids) - set(asked))} ids that were not asked for")
    for key in include:
        if key in ("documents", "metadatas"):
            _entries(got, key, len(ids), what)
        elif key == "embeddings":
            vectors = _rows(got, key, len(ids), what)
            if len({len(v) for v in vectors}) > 1:
                raise _bad(what, "embeddings of different dimensions")
            try:  # one pass in numpy: a get of 300 vectors checked by element took 20 ms
                finite = bool(np.isfinite(np.asarray(vectors, dtype=np.float64)).all())
            except (TypeError, ValueError):
                finite = False
            if not finite:
                raise _bad(what, "an embedding that is not finite (or not numbers)")
    return got


def stamp_start(request: Any) -> None:
    """An httpx request hook: note when the request started (for `bounded_body`)."""
    request.extensions[_START] = time.monotonic()


@functools.cache
def _bounded_class() -> type:
    import httpx  # comes with chromadb, like every caller of this module's hooks

    class Bounded(httpx.SyncByteStream):
        """A response stream that fails once its request has taken longer than ``deadline``."""

        def __init__(self, stream: Any, request: Any, deadline: float) -> None:
            self._stream = stream
            self._request = request
            self._deadline = deadline

        def __iter__(self) -> Iterator[bytes]:
            for chunk in self._stream:
                if time.monotonic() > self._deadline:
                    msg = "the reply did not end within the request timeout"
                    raise httpx.ReadTimeout(msg, request=self._request)
                yield chunk

        def close(self) -> None:
            self._stream.close()

    return Bounded


def bounded_body(response: Any) -> None:
    """An httpx response hook: reading the body fails once the request took its timeout.

    httpx's timeouts bound each read of the socket, not the whole reply.
    """
    request = response.request
    started = request.extensions.get(_START)
    timeout = (request.extensions.get("timeout") or {}).get("read")
    if started is None or timeout is None:
        return
    response.stream = _bounded_class()(response.stream, request, started + float(timeout))
