"""``ctxbudget mcp``: a `ContextMemory` served to MCP clients (docs/mcp.md).

- `tools`: `MemoryTools`, what each tool does with the memory (remember, remember_fact, recall,
  context, sessions, forget_session, forget_fact) and the server's user scoping; no SDK.
- `server`: `build_server`, the SDK's `MCPServer` with those tools, their argument schemas
  (values passed to the core unconverted, unknown names refused), and refusals as tool errors.
- `transports`: `serve` over stdio or streamable HTTP on 127.0.0.1, and `Shutdown` (SIGTERM and
  SIGINT stop it whatever stdin does).
- `stdio`: the relay of the client's stdin to the SDK (so that a signal ends serving, and
  values the SDK's JSON parser refuses still reach the core's checks and get a reply).

Needs the ``mcp`` extra (the official MCP SDK) for `server` and `transports`; loaded on first use.
"""

from __future__ import annotations

from ctxbudget.extras import lazy_attributes

__all__ = ["MemoryTools", "Shutdown", "build_server", "serve"]

_LAZY = {
    "MemoryTools": "ctxbudget.mcp.tools",
    "Shutdown": "ctxbudget.mcp.transports",
    "build_server": "ctxbudget.mcp.server",
    "serve": "ctxbudget.mcp.transports",
}

__getattr__ = lazy_attributes(__name__, _LAZY)
