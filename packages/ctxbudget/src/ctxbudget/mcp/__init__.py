"""``ctxbudget mcp``: a `ContextMemory` served to MCP clients (docs/mcp.md).

- `tools`: `MemoryTools`, what each tool does with the memory (remember, remember_fact, recall,
  context, sessions, forget_session, forget_fact) and the server's user scoping; no SDK.
- `server`: `build_server`, the SDK's `MCPServer` with those tools, their argument schemas
  (values passed to the core unconverted), and refusals as tool errors.
- `arguments`: each call's argument names checked first (unknown and missing ones refused by
  name, with what to pass), and a value of the wrong JSON type named before the core's refusal.
- `transports`: `serve` over stdio or streamable HTTP on 127.0.0.1, and `Shutdown` (SIGTERM and
  SIGINT stop it whatever stdin does).
- `stdio`: the relay of the client's stdin to the SDK (so that a signal ends serving, and
  values the SDK's JSON parser refuses still reach the core's checks and get a reply).
- `malformed`: the JSON-RPC error for a line the SDK would drop without a reply (not JSON, a
  batch, ``"jsonrpc": "1.0"``, ``params`` as an array, an id it cannot read).
- `posted`: over streamable HTTP, each POST's body read first, so one the SDK cannot read gets
  the stdio transport's JSON-RPC error (not pydantic's text), and a request reusing the id of
  one in flight in its session is refused (409) rather than left unanswered.
- `explained`: the SDK's bare ``Invalid request parameters`` said in words (which param, what it
  must be), or that ``initialize`` comes first.
- `stdout`: the SDK's stdout copied to the client whole line by whole line, so that the relay's
  own replies go out between the SDK's.

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
