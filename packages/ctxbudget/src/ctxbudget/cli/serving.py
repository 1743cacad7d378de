"""The commands that serve until stopped: ``ctxbudget inspect`` and ``ctxbudget mcp``.

Both check their flags before the store is opened, print where they listen on stderr, and stop
on Ctrl+C (exit status 130) or SIGTERM (0), whatever stdin does.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ctxbudget.cli.options import (
    DEFAULT_PATH,
    UsageError,
    check_folder,
    check_model,
    open_memory,
)
from ctxbudget.cli.status import INTERRUPTED, OK
from ctxbudget.core.numbers import shown
from ctxbudget.errors import StoreError
from ctxbudget.extras import require
from ctxbudget.store.records import require_name

__all__ = ["inspect", "mcp_server"]


# -- inspect ----------------------------------------------------------------------------------
def inspect(args: argparse.Namespace) -> int:
    """``ctxbudget inspect``: serve the read-only inspector page until Ctrl+C or SIGTERM.

    The store is opened to look only (`ctxbudget.inspect.open_reader`: no log, no journal);
    an embedded folder another process holds is refused by its lock (docs/inspect.md says
    how to inspect it from the application instead).
    """
    from ctxbudget.inspect import InspectServer, open_reader
    from ctxbudget.store.connection import ENV_URL

    if not 0 <= args.port <= 65535:
        msg = f"--port must be between 0 and 65535, got {shown(args.port)}"
        raise UsageError(msg)
    folder = args.path or DEFAULT_PATH
    if not (args.chroma_url or os.environ.get(ENV_URL)) and not Path(folder).is_dir():
        msg = f"--path {folder}: no store there (the folder does not exist); check the path"
        raise UsageError(msg)
    check_model(args)
    if not (args.chroma_url or os.environ.get(ENV_URL)):  # a folder of other files: refused
        check_folder(args.path, read_only=True)
    try:
        memory = open_reader(
            args.path, chroma_url=args.chroma_url, namespace=args.namespace, model=args.model
        )
    except StoreError as exc:
        if "already open" not in str(exc):
            raise
        msg = (
            f"{exc}; or let that application serve this page on its own memory: "
            "ctxbudget.inspect.serve(memory, port=0) (docs/inspect.md)"
        )
        raise StoreError(msg) from exc
    args.resources.callback(memory.close)
    try:
        page = args.resources.enter_context(InspectServer(memory, port=args.port))
    except OSError as exc:
        msg = f"--port {args.port}: cannot listen on 127.0.0.1 ({exc.strerror or exc})"
        raise UsageError(msg) from exc
    print(
        f"ctxbudget: inspect page at {page.url} (namespace {memory.namespace!r}, store "
        f"{memory.store.location}); read-only; stop with Ctrl+C",
        file=sys.stderr,
        flush=True,
    )
    if page.run():  # until Ctrl+C (130, as every command) or SIGTERM (0)
        print("ctxbudget: interrupted", file=sys.stderr, flush=True)
        return INTERRUPTED
    return OK


# -- mcp --------------------------------------------------------------------------------------
def mcp_server(args: argparse.Namespace) -> int:
    """``ctxbudget mcp``: serve the store to MCP clients (stdio, or HTTP on 127.0.0.1).

    Checked before the store is opened: the ``mcp`` extra, ``--host`` (127.0.0.1 only: the
    server has no authentication), ``--port`` (HTTP only) and ``--user``. Serves until the
    client goes (stdio) or Ctrl+C or SIGTERM, whatever stdin does; then the memory is closed,
    storing every acknowledged message. Exit status 0, or 130 after Ctrl+C (SIGINT).
    """
    require("mcp.server.mcpserver", "mcp", "the MCP server (ctxbudget mcp)")
    from ctxbudget.mcp.server import build_server
    from ctxbudget.mcp.transports import DEFAULT_PORT, HOST, Shutdown, serve

    if args.host is not None and args.host != HOST:
        msg = (
            f"--host {args.host}: ctxbudget mcp listens on {HOST} only: it has no "
            "authentication, so anyone who reached it could read and delete every session; "
            "to serve other machines, put an authenticating proxy on this one in front of it"
        )
        raise UsageError(msg)
    if args.transport == "stdio" and args.port is not None:
        msg = "--port is for --transport http (stdio serves over stdin and stdout)"
        raise UsageError(msg)
    if args.port is not None and not 0 <= args.port <= 65535:
        msg = f"--port must be between 0 and 65535, got {shown(args.port)}"
        raise UsageError(msg)
    if args.user is not None and not args.user:
        msg = "--user needs a user id (or leave it out to let each call name its user)"
        raise UsageError(msg)
    if args.user is not None:
        require_name("--user", args.user)  # refused before the store's folder is made
    # SIGTERM/SIGINT stop serving; then wait until the memory is closed (entered first, left last).
    shutdown: Shutdown = args.resources.enter_context(Shutdown())
    memory = open_memory(args)
    server = build_server(memory, user=args.user)

    def announce(url: str) -> None:
        print(
            f"ctxbudget: MCP server at {url} (streamable HTTP; namespace {memory.namespace!r}, "
            f"store {memory.store.location}); stop with Ctrl+C",
            file=sys.stderr,
            flush=True,
        )

    if args.transport == "stdio" and sys.stdin is not None and sys.stdin.isatty():
        # A person started it, not a client: say what it waits for.
        print(
            "ctxbudget: serving MCP over stdin and stdout, for an MCP client to start (see "
            "docs/mcp.md, or --transport http); stop with Ctrl+D",
            file=sys.stderr,
            flush=True,
        )
    with shutdown.serving():
        port = DEFAULT_PORT if args.port is None else args.port
        serve(server, transport=args.transport, port=port, announce=announce, shutdown=shutdown)
    if shutdown.exit_status():
        print("ctxbudget: interrupted", file=sys.stderr, flush=True)
    return shutdown.exit_status()  # the memory is closed next (args.resources), signals ignored
