"""How ``ctxbudget mcp`` serves: over stdio, or streamable HTTP on 127.0.0.1, and how it stops.

stdio (the default) is what desktop clients start: the protocol on stdin and stdout. While it
serves, the SDK points file descriptor 1 at stderr, so nothing but protocol reaches stdout (a
library's stray print included); logs and progress go to stderr. The SDK's stdout is a pipe
copied to the client's whole line by whole line (`ctxbudget.mcp.stdout`), so that the stdin
relay can answer, between two of the SDK's replies, a line the SDK would drop without one
(`ctxbudget.mcp.malformed`: truncated JSON, a batch, ``"jsonrpc": "1.0"``, ``params`` as an
array, an id the SDK cannot read).

Streamable HTTP listens on 127.0.0.1 only (`HOST`): the server has no authentication, so
anyone who reaches it could read and delete every session. The socket is bound before serving
starts, so a port in use is a `ConfigurationError` naming it, and port 0 takes any free port
(`serve` announces the address it got). The SDK checks each request's ``Host`` and ``Origin``
against the loopback names (DNS rebinding protection, `ctxbudget.mcp.posted.SECURITY`); a
request those checks refuse gets the SDK's refusal, unread. Then each POST's body is read
(`ctxbudget.mcp.posted`): one the SDK cannot read gets the JSON-RPC error the stdio transport
sends for that line, not pydantic's validation text.

Stopping: when the client closes stdin (stdio), or on SIGTERM or SIGINT (Ctrl+C) whatever
stdin does. `Shutdown` turns either signal into a stop request: during start-up it ends the
command at once; while serving, it ends serving as a client leaving does (stdio: the relay of
`ctxbudget.mcp.stdio` ends the SDK's input; HTTP: uvicorn's own stop), so replies in flight are
sent; then both signals are ignored while the caller closes the memory, which stores every
message the tools acknowledged. The exit status is 0 after SIGTERM and 130 after SIGINT.
"""

from __future__ import annotations

import signal
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from types import FrameType
from typing import TYPE_CHECKING, Any, Literal

import anyio

from ctxbudget.errors import ConfigurationError
from ctxbudget.mcp.malformed import answered_by
from ctxbudget.mcp.posted import SECURITY, checked_bodies
from ctxbudget.mcp.stdio import relayed_stdin
from ctxbudget.mcp.stdout import relayed_stdout

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

__all__ = ["DEFAULT_PORT", "HOST", "PATH", "Shutdown", "Transport", "listen", "serve"]

#: The only address the HTTP transport listens on.
HOST = "127.0.0.1"

#: The HTTP transport's port when none is given (the SDK's own default).
DEFAULT_PORT = 8000

#: Where the HTTP transport answers: ``http://127.0.0.1:<port>/mcp``.
PATH = "/mcp"

Transport = Literal["stdio", "http"]


def serve(
    server: MCPServer[Any],
    *,
    transport: Transport = "stdio",
    port: int = DEFAULT_PORT,
    announce: Callable[[str], None] | None = None,
    shutdown: Shutdown | None = None,
) -> None:
    """Serve ``server`` until the client goes (stdio) or the process is told to stop.

    Args:
        server: the server (`ctxbudget.mcp.server.build_server`).
        transport: ``"stdio"`` or ``"http"`` (streamable HTTP on `HOST`).
        port: the HTTP port; 0 takes any free one.
        announce: called with the HTTP address once it accepts connections.
        shutdown: the `Shutdown` whose stop request ends serving (SIGTERM, SIGINT).

    Raises:
        ConfigurationError: an unknown transport, or a port that cannot be listened on.
    """
    if transport not in ("stdio", "http"):
        msg = f"transport must be 'stdio' or 'http', got {transport!r}"
        raise ConfigurationError(msg)
    if shutdown is not None and shutdown.requested is not None:
        return  # told to stop before serving started
    if transport == "stdio":
        with (
            relayed_stdout() as replies,
            relayed_stdin(None if replies is None else answered_by(replies)) as stop,
            _stops(shutdown, stop),
        ):
            anyio.run(server.run_stdio_async)
        return
    import uvicorn

    sock = listen(port)
    try:
        # Replies as JSON bodies, not event streams: on SIGTERM uvicorn's stop lets a running
        # request end and send its reply, while sse_starlette cancels every open event
        # stream at once (until 2026-12-01 the replies of calls running at a SIGTERM were
        # lost). Clients take either (the protocol's choice); the tools send no notifications.
        app = server.streamable_http_app(
            streamable_http_path=PATH, host=HOST, transport_security=SECURITY, json_response=True
        )
        config = uvicorn.Config(
            checked_bodies(app, PATH, SECURITY),
            host=HOST,
            log_level="warning",
            log_config=None,
            access_log=False,
        )
        served = uvicorn.Server(config)
        if announce is not None:
            announce(f"http://{HOST}:{sock.getsockname()[1]}{PATH}")
        with _stops(shutdown, partial(setattr, served, "should_exit", True)):
            anyio.run(partial(served.serve, sockets=[sock]))
    finally:
        sock.close()


@contextmanager
def _stops(shutdown: Shutdown | None, stop: Callable[[], None]) -> Iterator[None]:
    """``stop`` called on ``shutdown``'s stop request while inside (at once if already made)."""
    if shutdown is None:
        yield
        return
    shutdown.on_stop = stop
    try:
        if shutdown.requested is not None:
            stop()
        yield
    finally:
        shutdown.on_stop = None


def listen(port: int) -> socket.socket:
    """A socket listening on `HOST` at ``port`` (0: any free port).

    Raises:
        ConfigurationError: ``port`` is not 0-65535, or cannot be listened on (in use, or a
            privileged port).
    """
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        msg = f"--port must be a whole number from 0 to 65535 (0: any free port), got {port!r}"
        raise ConfigurationError(msg)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((HOST, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        msg = (
            f"--port {port}: cannot listen on {HOST}:{port} ({exc.strerror or exc}); "
            "choose another --port, or --port 0 for any free one"
        )
        raise ConfigurationError(msg) from exc
    return sock


class Shutdown:
    """SIGTERM and SIGINT stop the server, whatever stdin does; ignored once serving has ended.

    Enter it before opening the memory and leave it after closing it. During start-up, a
    signal ends the command at once (``SystemExit(0)`` for SIGTERM, ``KeyboardInterrupt`` for
    SIGINT: nothing was acknowledged yet). Inside `serving`, it is a stop request
    (`requested`): `serve` ends serving as a client leaving does (`on_stop`), and the caller
    then closes the memory, storing what was acknowledged; meanwhile both signals are ignored.
    On exit the previous handlers are back. Outside the main thread (where Python cannot set
    handlers) it does nothing.
    """

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self) -> None:
        self.requested: int | None = None
        """The signal that asked to stop (None: none yet)."""
        self.on_stop: Callable[[], None] | None = None
        """What ends serving (set by `serve` while it serves)."""
        self._phase = "starting"
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> Shutdown:
        if threading.current_thread() is threading.main_thread():
            for signum in self.SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous.clear()

    @contextmanager
    def serving(self) -> Iterator[None]:
        """The stretch in which a signal stops serving; after it, signals are ignored."""
        self._phase = "serving"
        try:
            yield
        finally:
            self._phase = "closing"

    def exit_status(self) -> int:
        """0, or 130 when SIGINT stopped the server (Ctrl+C: the shell's convention)."""
        return 130 if self.requested == signal.SIGINT else 0

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.requested is not None or self._phase == "closing":
            return  # once: a second signal must not cut the stop short
        self.requested = signum
        if self._phase == "starting":
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            raise SystemExit(0)
        if self.on_stop is not None:
            self.on_stop()
