"""How ``ctxbudget mcp`` serves: over stdio, or streamable HTTP on 127.0.0.1, and how it stops.

stdio (the default) is what desktop clients start: the protocol on stdin and stdout. While it
serves, the SDK points file descriptor 1 at stderr, so nothing but protocol reaches stdout (a
library's stray print included); logs and progress go to stderr.

Streamable HTTP listens on 127.0.0.1 only (`HOST`): the server has no authentication, so
anyone who reaches it could read and delete every session. The socket is bound before serving
starts, so a port in use is a `ConfigurationError` naming it, and port 0 takes any free port
(`serve` announces the address it got). The SDK checks each request's ``Host`` and ``Origin``
against the loopback names (DNS rebinding protection).

Stopping: on stdio, when the client closes stdin (or sends SIGTERM); on HTTP, on Ctrl+C or
SIGTERM. `Shutdown` makes SIGTERM end serving as Ctrl+C does, then ignores it while the caller
closes the memory, which stores every message the tools acknowledged.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from functools import partial
from types import FrameType
from typing import TYPE_CHECKING, Any, Literal

import anyio

from ctxbudget.errors import ConfigurationError

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
) -> None:
    """Serve ``server`` until the client goes (stdio) or the process is told to stop (HTTP).

    Args:
        server: the server (`ctxbudget.mcp.server.build_server`).
        transport: ``"stdio"`` or ``"http"`` (streamable HTTP on `HOST`).
        port: the HTTP port; 0 takes any free one.
        announce: called with the HTTP address once it accepts connections.

    Raises:
        ConfigurationError: an unknown transport, or a port that cannot be listened on.
    """
    if transport == "stdio":
        anyio.run(_quiet_on_stop, server.run_stdio_async)
        return
    if transport != "http":
        msg = f"transport must be 'stdio' or 'http', got {transport!r}"
        raise ConfigurationError(msg)
    import uvicorn

    sock = listen(port)
    try:
        app = server.streamable_http_app(streamable_http_path=PATH, host=HOST)
        config = uvicorn.Config(
            app, host=HOST, log_level="warning", log_config=None, access_log=False
        )
        if announce is not None:
            announce(f"http://{HOST}:{sock.getsockname()[1]}{PATH}")
        anyio.run(partial(uvicorn.Server(config).serve, sockets=[sock]))
    finally:
        sock.close()


async def _quiet_on_stop(run: Callable[[], Awaitable[None]]) -> None:
    """``run()``, with the loop quiet about the ``SystemExit(0)`` of a SIGTERM (`Shutdown`).

    The exit may land in any task; asyncio would log it as an unhandled error of the tasks it
    ends (with a traceback on stderr), though stopping on SIGTERM is a normal end.
    """
    loop = asyncio.get_running_loop()

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if not _is_exit(context.get("exception")):
            loop.default_exception_handler(context)

    loop.set_exception_handler(handle)
    await run()


def _is_exit(error: object) -> bool:
    if isinstance(error, BaseExceptionGroup):
        return all(_is_exit(inner) for inner in error.exceptions)
    return isinstance(error, SystemExit) and error.code in (0, None)


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
    """SIGTERM ends serving as Ctrl+C does, and is ignored once serving has ended.

    Enter it before opening the memory and leave it after closing it: inside `serving`, SIGTERM
    raises ``SystemExit(0)`` (a client stopping its server is a normal end); after, while the
    memory closes and stores what was acknowledged, SIGTERM is ignored; on exit the previous
    handler is back. Outside the main thread (where Python cannot set handlers) it does nothing.
    """

    def __init__(self) -> None:
        self._serving = False
        self._previous: Any = None
        self._installed = False

    def __enter__(self) -> Shutdown:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._handle)
            self._installed = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self._installed:
            signal.signal(signal.SIGTERM, self._previous)
            self._installed = False

    @contextmanager
    def serving(self) -> Iterator[None]:
        """The stretch in which SIGTERM stops the server."""
        self._serving = True
        try:
            yield
        finally:
            self._serving = False

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self._serving:
            self._serving = False  # once: a second SIGTERM must not cut the stop short
            raise SystemExit(0)
