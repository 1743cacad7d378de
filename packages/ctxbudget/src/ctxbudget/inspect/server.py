"""The inspector's HTTP server: 127.0.0.1 only, GET and HEAD only, same-origin only.

`serve` starts a `ThreadingHTTPServer` (standard library) in a background thread and returns
an `InspectServer` handle (``.url``, ``.close()``); ``ctxbudget inspect`` runs the same server
in the foreground. Each request is checked before anything is read:

* the ``Host`` header must be ``127.0.0.1:PORT`` or ``localhost:PORT`` (a page of another site
  that resolves its own name to 127.0.0.1, DNS rebinding, is refused: 403), and only one;
* an ``Origin`` header, when sent, must be this server's own origin (403);
* only GET and HEAD (405 with ``Allow: GET, HEAD`` otherwise): nothing can change anything.

Every answer carries a Content-Security-Policy that allows no script, no frame and nothing
fetched but inline styles and ``data:`` images, with ``nosniff`` and no referrer.

Routes (each also as JSON with ``?format=json``): ``/`` the sessions, a page at a time
(``?start=N``: from the N-th, 404 past the last; ``?q=words``: search, as many sessions at a
time),
``/session/ID`` its timeline, ``/session/ID/assembly/RECORD`` one logged assembly,
``/session/ID/message/ID`` one message.
"""

from __future__ import annotations

import json
import logging
import math
import signal
import threading
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from ctxbudget.errors import CtxBudgetError, MemoryClosedError, StoreInputError
from ctxbudget.inspect import data, pages, timeline

if TYPE_CHECKING:
    from ctxbudget.memory.context import ContextMemory

__all__ = ["CSP", "HOST", "IDLE_TIMEOUT", "InspectServer", "serve"]

logger = logging.getLogger(__name__)

HOST = "127.0.0.1"
"""The only address the inspector listens on."""

CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
"""The Content-Security-Policy of every answer: no script at all."""

_START_DIGITS = 18  # a start past any store's sessions (and below Python's limit on digits)

_Page = tuple[Callable[..., dict[str, Any] | None], Callable[[Any], str]]
_ROUTES: dict[str, _Page] = {
    "assembly": (data.assembly_page, pages.assembly_html),
    "message": (data.message_page, pages.message_html),
}


class InspectServer:
    """A running inspector (`serve`): its ``url``, and ``close`` to stop it.

    Args:
        memory: the memory whose store is shown (it is not closed with the server).
        port: the port on 127.0.0.1 (0: any free port).
    """

    def __init__(self, memory: ContextMemory, *, port: int = 0) -> None:
        self.memory = memory
        self._httpd = _Server((HOST, port), _Handler)
        self._httpd.memory = memory
        self.port: int = int(self._httpd.server_address[1])
        self._httpd.port = self.port
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The sessions page, e.g. ``http://127.0.0.1:8765/``."""
        return f"http://{HOST}:{self.port}/"

    def start(self) -> InspectServer:
        """Serve in a background (daemon) thread; returns self."""
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="ctxbudget-inspect", daemon=True
        )
        self._thread.start()
        return self

    def run(self) -> bool:
        """Serve in this thread until Ctrl+C or SIGTERM (then closed); True after Ctrl+C.

        For the command line: call it from the main thread (signals are delivered there).
        """
        terminated: list[int] = []

        def stop(signum: int, _frame: object) -> None:
            terminated.append(signum)
            raise KeyboardInterrupt

        previous = signal.signal(signal.SIGTERM, stop)
        try:
            self._httpd.serve_forever()
        except KeyboardInterrupt:
            return not terminated
        finally:
            signal.signal(signal.SIGTERM, previous)
            self.close()
        return False  # pragma: no cover - serve_forever returns only once shut down

    def close(self) -> None:
        """Stop serving and release the port (the memory stays open); again: nothing to do."""
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join()
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> InspectServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve(memory: ContextMemory, *, port: int = 0) -> InspectServer:
    """Serve the inspector of ``memory`` on 127.0.0.1 in a background thread.

    The way to inspect an embedded folder an application holds (one process per folder,
    `ctxbudget.store.lock`): the application serves the page itself, on its own memory.
    Browsing reads only; the application's own calls go on meanwhile.

    >>> with serve(memory, port=0) as page:  # doctest: +SKIP
    ...     print(page.url)
    http://127.0.0.1:41235/
    """
    return InspectServer(memory, port=port).start()


IDLE_TIMEOUT = 30.0
"""Seconds a connection may stay silent (in a request, or between two) before it is closed."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    memory: ContextMemory
    port: int


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "ctxbudget-inspect"
    sys_version = ""
    # A connection that sends nothing for this long is closed: a half-sent request (or an idle
    # keep-alive) held its thread for ever (300 idle connections: 316 threads).
    timeout = IDLE_TIMEOUT

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self._answer(body=True)

    def do_HEAD(self) -> None:  # noqa: N802 - http.server's name
        self._answer(body=False)

    def __getattr__(self, name: str) -> Any:
        # Any other method (POST, PUT, DELETE, OPTIONS, ...): 405, not http.server's 501.
        if name.startswith("do_"):
            return self._not_allowed
        raise AttributeError(name)

    def _not_allowed(self) -> None:
        self._send(HTTPStatus.METHOD_NOT_ALLOWED, "text/html", b"", body=True, refused=True)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's
        logger.debug("%s " + format, self.address_string(), *args)

    def _answer(self, *, body: bool) -> None:
        parts = urlsplit(self.path)
        query = parse_qs(parts.query)
        as_json = query.get("format", [""])[-1] == "json"
        problem = self._refusal()
        if problem is not None:
            self._error(HTTPStatus.FORBIDDEN, problem, body=body, as_json=as_json)
            return
        try:
            found = self._route([pages.path_part(p) for p in parts.path.split("/")[1:]], query)
        except StoreInputError as exc:  # an id the store cannot hold: nothing has it
            found = None
            logger.debug("inspect: %s", exc)
        except MemoryClosedError:
            self._error(
                HTTPStatus.SERVICE_UNAVAILABLE, "the memory is closed", body=body, as_json=as_json
            )
            return
        except CtxBudgetError as exc:
            logger.warning("inspect %s failed: %s", parts.path, exc)
            self._error(HTTPStatus.INTERNAL_SERVER_ERROR, str(exc), body=body, as_json=as_json)
            return
        if found is None:
            self._error(HTTPStatus.NOT_FOUND, "nothing stored here", body=body, as_json=as_json)
            return
        document, draw = found
        if as_json:
            text, kind = _json(document), "application/json"
        else:
            text, kind = draw(document), "text/html"
        self._send(HTTPStatus.OK, kind, _utf8(text), body=body)

    def _route(
        self, path: list[str], query: dict[str, list[str]]
    ) -> tuple[dict[str, Any], Callable[[Any], str]] | None:
        memory = self.server.memory
        if path == [""]:
            words = query.get("q", [""])[-1].strip()
            start = query.get("start", ["0"])[-1]
            if not _number(start):
                return None  # no page there (and no number too long to convert)
            if words:
                found = data.search_page(memory, words, int(start))
                past_end = found["sessions"]["from"] >= found["sessions"]["of"]
                draw: Callable[[Any], str] = pages.search_html
            else:
                found = data.sessions_page(memory, int(start))
                past_end, draw = found["start"] >= found["total"], pages.sessions_html
            return None if past_end and int(start) > 0 else (found, draw)
        if len(path) == 2 and path[0] == "session" and path[1]:
            given = [query[name][-1] if name in query else None for name in ("start", "messages")]
            if any(not _number(n) for n in given if n is not None):
                return None  # no page there (and no number too long to convert)
            first, listed = (None if n is None else int(n) for n in given)
            doc = timeline.timeline_page(memory, path[1], first, listed)
            return None if doc is None else (doc, pages.timeline_html)
        if len(path) == 4 and path[0] == "session" and path[2] in _ROUTES and path[1] and path[3]:
            read, draw = _ROUTES[path[2]]
            doc = read(memory, path[1], path[3])
            return None if doc is None else (doc, draw)
        return None

    def _refusal(self) -> str | None:
        """Why this request is refused (None: it is not): a foreign Host or Origin."""
        port = self.server.port
        hosts = {f"{HOST}:{port}", f"localhost:{port}"}
        named = self.headers.get_all("Host") or []
        if len(named) > 1:  # which one the client meant is unsaid (HTTP/1.1 refuses it too)
            return f"the request names {len(named)} Hosts ({', '.join(named)!r}); send one"
        host = named[0] if named else None
        if host is None or host.lower() not in hosts:
            return f"Host {host!r} is not this server ({HOST}:{port})"
        origins = self.headers.get_all("Origin") or []
        if any(o.lower() not in {f"http://{h}" for h in hosts} for o in origins):
            return f"Origin {', '.join(origins)!r} is not this server (http://{HOST}:{port})"
        return None

    def _error(
        self, status: HTTPStatus, message: str, *, body: bool, as_json: bool = False
    ) -> None:
        if as_json:
            text = _json({"error": int(status), "message": message})
            self._send(status, "application/json", _utf8(text), body=body)
        else:
            page = _utf8(pages.error_html(int(status), message))
            self._send(status, "text/html", page, body=body)

    def _send(
        self, status: HTTPStatus, kind: str, payload: bytes, *, body: bool, refused: bool = False
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", f"{kind}; charset=utf-8")
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("X-Frame-Options", "DENY")
        self.send_header("Cache-Control", "no-store")
        if refused:
            self.send_header("Allow", "GET, HEAD")
        self.end_headers()
        if body:
            self.wfile.write(payload)


def _number(text: str) -> bool:
    """Whether a page's ``start`` is a count: ASCII digits, not too long to convert."""
    return text.isascii() and text.isdigit() and len(text) <= _START_DIGITS


def _json(document: object) -> str:
    """``document`` as strict JSON: a number JSON cannot write (a damaged log's NaN) is null."""
    return json.dumps(_finite(document), ensure_ascii=False, allow_nan=False)


def _finite(value: object) -> object:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def _utf8(text: str) -> bytes:
    """``text`` as UTF-8; a lone surrogate (from a damaged log) written as its escape."""
    return text.encode("utf-8", "backslashreplace")
