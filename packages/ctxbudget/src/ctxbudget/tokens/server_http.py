"""Asking a model server for JSON over HTTP, and the errors that say what came back.

The transport of `ctxbudget.tokens.server_api`: one small request at a time with the standard
library (loopback hosts bypass HTTP proxies), any HTTP status a reply, no answer an error; a
deadline for the whole request, redirects only within the server's origin, replies bounded in
size and JSON depth;
`json_object` and `not_served` turn a wrong reply into a `WindowDetectionError` that quotes it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxbudget.errors import WindowDetectionError

__all__ = [
    "MAX_JSON_DEPTH",
    "MAX_REPLY_BYTES",
    "PASS_WINDOW",
    "Ask",
    "ServerReply",
    "ask_json",
    "error_text",
    "json_object",
    "not_served",
]

PASS_WINDOW = (  # the end of every error: how to do without the server
    "or pass the window yourself: Budget.for_model(model, window=<tokens>) (on Ollama the "
    "num_ctx it serves the model with)"
)
_START = "`ollama serve`, `vllm serve <model>` or `lms server start`"


@dataclass(frozen=True, slots=True)
class ServerReply:
    """One answer: ``"GET /api/ps"``, the status, its JSON (None if not JSON) and its text."""

    request: str
    status: int
    body: object
    text: str


Ask = Callable[[str, Mapping[str, object] | None], ServerReply]
"""``ask(path, payload)``: GET ``path``, or POST ``payload`` as JSON when one is given."""


def ask_json(
    root: str, *, timeout: float, api_key: str | None = None, start: str | None = None
) -> Ask:
    """An `Ask` for the server at ``root``: any HTTP status is a reply, no answer an error.

    Like a careful client: each request has ``timeout`` seconds *in all* (connecting, the
    headers and a body that trickles in), a redirect is followed only within ``root``'s origin
    (scheme, host and port: ``api_key`` is never sent to another host), and a reply is at most
    `MAX_REPLY_BYTES` of JSON nested at most `MAX_JSON_DEPTH` deep. ``start`` says how to start
    the server, in the error when it does not answer.

    Raises (when called):
        WindowDetectionError: the server cannot be reached, does not answer in ``timeout``,
            redirects to another origin, or sends a reply too large or too deeply nested.
    """
    # Imported on first use: urllib.request pulls in http.client, email and ssl.
    import urllib.parse
    import urllib.request

    # A server on this machine is asked directly: an HTTP(S)_PROXY meant for the internet
    # would otherwise receive the request (or refuse it) unless NO_PROXY lists the host.
    host = (urllib.parse.urlsplit(root).hostname or "").lower()
    local = host in {"localhost", "::1"} or host.startswith("127.")
    handlers: list[urllib.request.BaseHandler] = [_same_origin(root)]
    if local:
        handlers.append(urllib.request.ProxyHandler({}))
    opener = urllib.request.build_opener(*handlers)

    def ask(path: str, payload: Mapping[str, object] | None) -> ServerReply:
        method = "GET" if payload is None else "POST"
        headers = {"Accept": "application/json"}
        data = None
        if payload is not None:
            data = json.dumps(payload).encode("utf-8")
            headers["Content-Type"] = "application/json"
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        request = urllib.request.Request(root + path, data=data, headers=headers, method=method)
        exchange = _Exchange(opener, request, timeout)
        status, raw = exchange.run()
        if exchange.failure is not None:
            raise _failure(exchange.failure, root, method, path, timeout, start)
        if len(raw) > MAX_REPLY_BYTES:
            msg = (
                f"the server at {root} answered {method} {path} with more than "
                f"{MAX_REPLY_BYTES:,} bytes; a model server's answer is far smaller: check "
                f"that {root} is a model server, {PASS_WINDOW}"
            )
            raise WindowDetectionError(msg, url=root)
        text = raw.decode("utf-8", "replace")
        return ServerReply(f"{method} {path}", status, _parse(text, root, method, path), text)

    return ask


MAX_REPLY_BYTES = 8 * 1024 * 1024
"""The largest reply read from a model server (8 MiB; Ollama's ``/api/show`` is a few KiB)."""

MAX_JSON_DEPTH = 32
"""The deepest nesting of a reply's JSON (the servers' documented replies nest 4 deep)."""

_CHUNK = 64 * 1024


class _Redirected(Exception):
    """A redirect out of the server's origin, not followed."""

    def __init__(self, target: str) -> None:
        super().__init__(target)
        self.target = target


def _origin(url: str) -> tuple[str, str, int | None]:
    import urllib.parse

    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    port = parts.port or {"http": 80, "https": 443}.get(scheme)
    return scheme, (parts.hostname or "").lower(), port


def _same_origin(root: str) -> Any:
    # The handler class is made here: urllib.request is imported on first use.
    import urllib.request

    class SameOrigin(urllib.request.HTTPRedirectHandler):
        """Follows a redirect within ``root``'s origin only; refuses any other."""

        max_redirections = 4

        def redirect_request(
            self,
            req: urllib.request.Request,
            fp: Any,
            code: int,
            msg: str,
            headers: Any,
            newurl: str,
        ) -> urllib.request.Request | None:
            if _origin(newurl) != _origin(root):
                fp.close()
                raise _Redirected(newurl)
            return super().redirect_request(req, fp, code, msg, headers, newurl)

    return SameOrigin()


class _Exchange:
    """One request on a worker thread, so that the caller waits ``timeout`` in all.

    urllib's timeout bounds each socket operation, not the request: a body sent a byte at a
    time would keep the caller waiting for as long as it trickles. The worker reads in chunks
    and stops at the deadline or once it is abandoned.
    """

    def __init__(self, opener: Any, request: Any, timeout: float) -> None:
        self._opener, self._request, self._timeout = opener, request, timeout
        self._deadline = time.monotonic() + timeout
        self._abandoned = threading.Event()
        self.failure: BaseException | None = None
        self._status = 0
        self._raw = bytearray()

    def run(self) -> tuple[int, bytes]:
        worker = threading.Thread(target=self._work, name="ctxbudget-window-request", daemon=True)
        worker.start()
        worker.join(max(0.0, self._deadline - time.monotonic()))
        if worker.is_alive():
            self._abandoned.set()
            self.failure = TimeoutError()
            return 0, b""
        return self._status, bytes(self._raw)

    def _work(self) -> None:
        import http.client
        import urllib.error

        try:
            try:
                with self._opener.open(self._request, timeout=self._timeout) as response:
                    self._status = int(response.status)
                    self._read(response)
            except urllib.error.HTTPError as exc:
                with exc:
                    self._status = exc.code
                    self._read(exc)
        except (OSError, http.client.HTTPException, _Redirected) as exc:
            self.failure = exc

    def _read(self, response: Any) -> None:
        read = getattr(response, "read1", None) or response.read
        while not self._abandoned.is_set() and len(self._raw) <= MAX_REPLY_BYTES:
            if time.monotonic() > self._deadline:
                raise TimeoutError
            chunk = read(_CHUNK)
            if not chunk:
                return
            self._raw += chunk


def _failure(
    exc: BaseException, root: str, method: str, path: str, timeout: float, start: str | None
) -> WindowDetectionError:
    if isinstance(exc, _Redirected):
        msg = (
            f"the server at {root} redirected {method} {path} to {exc.target[:120]!r}, another "
            "origin; ctxbudget does not follow it (an api_key is never sent to another host): "
            f"pass the address it redirects to as base_url if you trust it, {PASS_WINDOW}"
        )
        error = WindowDetectionError(msg, url=root)
    else:
        reason = getattr(exc, "reason", exc)
        what = (
            f"no answer within {timeout:g} s"
            if isinstance(reason, TimeoutError)
            else str(reason) or type(reason).__name__
        )
        msg = (
            f"cannot reach a model server at {root} to ask its context window ({method} "
            f"{path}: {what}); start the server ({start or _START}) and check the URL, "
            f"{PASS_WINDOW}"
        )
        error = WindowDetectionError(msg, url=root)
    error.__cause__ = exc
    return error


def _parse(text: str, root: str, method: str, path: str) -> object:
    """The reply's JSON (None when it is not JSON); refused when nested too deeply."""
    try:
        body: object = json.loads(text)
    except RecursionError:
        body = _TOO_DEEP
    except ValueError:
        return None
    if body is _TOO_DEEP or _depth(body, MAX_JSON_DEPTH) > MAX_JSON_DEPTH:
        msg = (
            f"the server at {root} answered {method} {path} with JSON nested more than "
            f"{MAX_JSON_DEPTH} deep ({_snippet(text)}); a model server's answer is not: check "
            f"that {root} is a model server, {PASS_WINDOW}"
        )
        raise WindowDetectionError(msg, url=root)
    return body


_TOO_DEEP = object()


def _depth(value: object, limit: int) -> int:
    # How deep ``value`` nests, counted no further than ``limit + 1``.
    if limit < 0 or not isinstance(value, dict | list):
        return 0
    children = value.values() if isinstance(value, dict) else value
    return 1 + max((_depth(child, limit - 1) for child in children), default=0)


def json_object(reply: ServerReply, root: str, who: str) -> dict[str, Any]:
    """The JSON object of a 200 reply.

    Raises:
        WindowDetectionError: another status, or a body that is not a JSON object; the message
            quotes what came back.
    """
    if reply.status == 200 and isinstance(reply.body, dict):
        return reply.body
    if reply.status == 200:
        msg = (
            f"{who} at {root} answered {reply.request} with something else than a JSON object "
            f"({_snippet(reply.text)}); check that {root} is {who}, {PASS_WINDOW}"
        )
    else:
        advice = (
            "the server wants a key: pass api_key= to detect_window, "
            if reply.status in (401, 403)
            else "see the server's log, "
        )
        msg = (
            f"{who} at {root} answered {reply.request} with HTTP {reply.status} "
            f"({error_text(reply)}); {advice}{PASS_WINDOW}"
        )
    raise WindowDetectionError(msg, url=root)


def not_served(
    root: str, name: str, who: str, listed: Sequence[Mapping[str, Any]] | None, request: str
) -> WindowDetectionError:
    """The error for a model the server does not serve, naming the models it does."""
    names = sorted({str(e["id"]) for e in listed or () if isinstance(e.get("id"), str)})
    if listed is None:
        served = f"it did not list its models on GET {request}"
    elif names:
        more = ", ..." if len(names) > 8 else ""
        served = f"it serves {', '.join(repr(n) for n in names[:8])}{more}"
    else:
        served = "it lists no model"
    msg = (
        f"{who} at {root} does not serve {name!r} ({served}); use the name the server lists "
        f"or serve that model, {PASS_WINDOW}"
    )
    return WindowDetectionError(msg, url=root)


def error_text(reply: ServerReply) -> str:
    """What a server said went wrong: its error message, else the start of its body."""
    body = reply.body
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):  # vLLM: {"error": {"message": ..., "type": ...}}
            error = error.get("message")
        for text in (error, body.get("message"), body.get("detail")):
            if isinstance(text, str) and text:
                return repr(text)
    return _snippet(reply.text)


def _snippet(text: str) -> str:
    flat = " ".join(text.split())
    return repr(flat[:80] + ("..." if len(flat) > 80 else "")) if flat else "an empty body"
