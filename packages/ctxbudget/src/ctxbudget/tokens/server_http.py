"""Asking a model server for JSON over HTTP, and the errors that say what came back.

The transport of `ctxbudget.tokens.server_api`: one small request at a time with the standard
library (loopback hosts bypass HTTP proxies), any HTTP status a reply, no answer an error;
`json_object` and `not_served` turn a wrong reply into a `WindowDetectionError` that quotes it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxbudget.errors import WindowDetectionError

__all__ = [
    "PASS_WINDOW",
    "Ask",
    "ServerReply",
    "ask_json",
    "error_text",
    "json_object",
    "not_served",
]

_MAX_BYTES = 16 * 1024 * 1024
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

    ``start`` says how to start the server, in the error when it does not answer.

    Raises (when called):
        WindowDetectionError: the server cannot be reached or does not answer in ``timeout``.
    """
    # Imported on first use: urllib.request pulls in http.client, email and ssl.
    import http.client
    import urllib.error
    import urllib.parse
    import urllib.request

    # A server on this machine is asked directly: an HTTP(S)_PROXY meant for the internet
    # would otherwise receive the request (or refuse it) unless NO_PROXY lists the host.
    host = (urllib.parse.urlsplit(root).hostname or "").lower()
    local = host in {"localhost", "::1"} or host.startswith("127.")
    opener = urllib.request.build_opener(*([urllib.request.ProxyHandler({})] if local else []))

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
        try:
            try:
                with opener.open(request, timeout=timeout) as response:
                    status, raw = int(response.status), response.read(_MAX_BYTES)
            except urllib.error.HTTPError as exc:
                with exc:
                    status, raw = exc.code, exc.read(_MAX_BYTES)
        except (OSError, http.client.HTTPException) as exc:
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
            raise WindowDetectionError(msg, url=root) from exc
        text = raw.decode("utf-8", "replace")
        try:
            body: object = json.loads(text)
        except ValueError:
            body = None
        return ServerReply(f"{method} {path}", status, body, text)

    return ask


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
