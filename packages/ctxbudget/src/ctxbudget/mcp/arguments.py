"""The arguments of a ``tools/call``, checked by name before the SDK reads them.

The SDK's own checks answer a missing argument with pydantic's text (``1 validation error for
rememberArguments ... Field required [type=missing ...]``), an argument it does not know not at
all (it is dropped), and ``arguments`` or ``name`` of the wrong kind with a bare ``Invalid request
parameters``. `check_call`, a middleware of the server, answers each of them first, saying which
tool, which argument, and what to pass:

- ``name`` missing or not a text, ``arguments`` not an object: a JSON-RPC error (-32602, invalid
  params: the SDK's path for a malformed request) whose message says so.
- a tool the server does not have: a tool error (``isError``) listing the tools it has.
- an argument the tool does not have, or one it needs that is missing: a tool error naming each,
  with what it is for; nothing was done.
- an argument of another JSON type than its schema says: the value still reaches the core's own
  check (every door refuses a value with the core's message); when the core refuses the call,
  the tool error starts with the argument, the type its schema asks for and the one it got.

Values the stdio relay rewrote (`ctxbudget.mcp.stdio`) are turned back into what the client sent
before any of this.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, get_args, get_type_hints

from mcp.server.context import CallNext, HandlerResult
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, CallToolResult, TextContent
from pydantic.fields import FieldInfo

from ctxbudget.core.numbers import shown
from ctxbudget.mcp.stdio import relayed, restore

__all__ = ["ToolArguments", "check_call", "json_type", "tool_arguments"]

_KINDS = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "array": "an array",
    "object": "an object",
    "null": "null",
}
_UNDONE = "(nothing was done)"


@dataclass(frozen=True, slots=True)
class ToolArguments:
    """What a tool takes: each argument's description and JSON types, and which it needs."""

    tool: str
    described: Mapping[str, str]
    types: Mapping[str, tuple[str, ...]]
    required: tuple[str, ...]


def tool_arguments(function: Callable[..., Any]) -> ToolArguments:
    """The arguments of a tool function whose parameters are ``Annotated[Any, Field(...)]``.

    The description and ``json_schema_extra["type"]`` of each parameter's ``Field`` are what
    clients are shown (`ctxbudget.mcp.server`); a parameter without a default is required.
    """
    hints = get_type_hints(function, include_extras=True)
    described: dict[str, str] = {}
    types: dict[str, tuple[str, ...]] = {}
    required: list[str] = []
    for name, parameter in inspect.signature(function).parameters.items():
        if parameter.default is inspect.Parameter.empty:
            required.append(name)
        for meta in get_args(hints.get(name))[1:]:
            if isinstance(meta, FieldInfo):
                described[name] = meta.description or ""
                schema = meta.json_schema_extra
                kind = schema.get("type") if isinstance(schema, dict) else None
                if isinstance(kind, str):
                    types[name] = (kind,)
                elif isinstance(kind, list):
                    types[name] = tuple(str(each) for each in kind)
    return ToolArguments(function.__name__, described, types, tuple(required))


def json_type(value: object) -> str:
    """The JSON type of a value as the SDK read it (``"integer"``, ``"string"``, ...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list | tuple) else "object"


async def check_call(
    tools: Mapping[str, ToolArguments], ctx: Any, call_next: CallNext
) -> HandlerResult:
    """A ``tools/call`` checked by tool and argument name first (see the module docstring)."""
    if ctx.method != "tools/call":
        return await call_next(ctx)
    params = ctx.params if isinstance(ctx.params, Mapping) else {}
    sent = params.get("arguments")
    if relayed(params):  # values the relay rewrote (a name, the arguments), as the client sent
        params = {
            **params,
            **{key: restore(params[key]) for key in ("name", "arguments") if key in params},
        }
    name, given = params.get("name"), params.get("arguments")
    given = {} if given is None else given
    malformed = _malformed(tools, params, given)
    if malformed:
        raise MCPError(INVALID_PARAMS, malformed)
    spec = tools.get(str(name))  # a str: `_malformed` said so
    if spec is None:
        return _refused(
            f"no tool {name!r}: this server's tools are {sorted(tools)}; check the name"
        )
    problem = _names(spec, given)
    if problem:
        return _refused(problem)
    if given is not sent and sent is not None:
        ctx = dataclasses.replace(ctx, params={**params, "arguments": given})
    result = await call_next(ctx)
    lead = _mistyped(spec, given)
    return _led(result, lead) if lead else result


def _malformed(tools: Mapping[str, ToolArguments], params: Mapping[Any, Any], given: object) -> str:
    """What makes a call's params unreadable: ``name`` not a text, ``arguments`` not an object."""
    name = params.get("name")
    if not isinstance(name, str):
        got = _got(name) if "name" in params else "none"
        return (
            f"tools/call needs params.name, the tool to call (one of {sorted(tools)}), got {got}; "
            'send {"name": <tool>, "arguments": {...}}'
        )
    if isinstance(given, Mapping):
        return ""
    known = f" (its arguments are {sorted(tools[name].described)})" if name in tools else ""
    return (
        f"tools/call {name}: arguments must be an object of argument names and values{known}, "
        f'got {_got(given)}; send them as {{"name": value, ...}}'
    )


def _names(spec: ToolArguments, given: Mapping[Any, Any]) -> str:
    """What is wrong with the argument names of a call ("": nothing)."""
    parts = []
    unknown = sorted(str(key) for key in given if key not in spec.described)
    if unknown:
        parts.append(
            f"{spec.tool} has no argument {', '.join(map(repr, unknown))}: its arguments are "
            f"{sorted(spec.described)}; check the spelling"
        )
    missing = [name for name in spec.required if name not in given]
    if missing:
        needed = [f"{name!r} ({spec.described.get(name, '')})" for name in missing]
        listed = needed[0] if len(needed) == 1 else f"{', '.join(needed[:-1])} and {needed[-1]}"
        plural = "s" if len(needed) > 1 else ""
        parts.append(
            f"{spec.tool} needs the argument{plural} {listed}, which this call does not have; "
            f"pass {'them' if plural else 'it'} and call again"
        )
    return "; ".join(parts) + f" {_UNDONE}" if parts else ""


def _mistyped(spec: ToolArguments, given: Mapping[Any, Any]) -> str:
    """The arguments whose JSON type is not their schema's, said in one sentence each."""
    said = []
    for name, value in given.items():
        wanted = spec.types.get(name)
        got = json_type(value)
        if not wanted or got in wanted or (got == "integer" and "number" in wanted):
            continue
        kinds = [_KINDS.get(kind, kind) for kind in wanted]
        kind = " or ".join(kinds) if len(kinds) < 3 else f"{', '.join(kinds[:-1])} or {kinds[-1]}"
        said.append(
            f"argument {name!r} ({spec.described.get(name, '')}) must be {kind}, got "
            f"{_got(value)}; pass {kind} instead"
        )
    return "; ".join(said)


def _got(value: object) -> str:
    return f"{_KINDS[json_type(value)]} ({shown(value)})"


def _refused(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


def _led(result: HandlerResult, lead: str) -> HandlerResult:
    """A refused call's tool error (the SDK's wire form) with ``lead`` before the core's words."""
    if not isinstance(result, dict) or result.get("isError") is not True:
        return result
    content = result.get("content")
    if not isinstance(content, list) or not content or not isinstance(content[0], dict):
        return result
    text = str(content[0].get("text", ""))
    prefix, colon, rest = text.partition(": ")  # the SDK's "Error executing tool <name>: "
    if not colon or not prefix.startswith("Error executing tool"):
        prefix, rest = "", text
    first = {**content[0], "text": f"{prefix}{colon}{lead}. {rest}"}
    return {**result, "content": [first, *content[1:]]}
