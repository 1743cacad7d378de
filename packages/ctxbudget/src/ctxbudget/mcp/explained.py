"""A request the SDK refuses as ``Invalid request parameters`` gets a message that says why.

The SDK checks each request's ``params`` against the MCP schema, and answers a request it
refuses with JSON-RPC error -32602, message ``Invalid request parameters`` and empty ``data``,
whatever was wrong: ``_meta: 5`` in a ``tools/call``, ``cursor: 5`` in a ``tools/list``, an
``initialize`` without ``protocolVersion``, a ``resources/read`` without ``uri``. It says the same
to a client that sends ``tools/call`` before ``initialize`` (a common mistake of a new client),
which is not about params at all. `explained`, a middleware of the server, keeps the code and
says which param, what it must be and what it got, or that ``initialize`` comes first.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mcp.server.context import CallNext, HandlerResult
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS
from pydantic import ValidationError

from ctxbudget.core.numbers import shown
from ctxbudget.mcp.stdio import restore
from ctxbudget.store.records import first_surrogate

__all__ = ["explained", "said"]

_SDK_SAID = "Invalid request parameters"  # the SDK's text, for every refusal of params

_KINDS = {
    "string_type": "a string",
    "int_type": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "bool_type": "true or false",
    "list_type": "an array",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "none_required": "null",
}
_UNION_TAGS = {"str", "int", "float", "bool", "none", "list", "dict"}  # pydantic's branch names


async def explained(ctx: Any, call_next: CallNext) -> HandlerResult:
    """``call_next``, with the SDK's bare refusal of params said in words (module docstring)."""
    try:
        return await call_next(ctx)
    except ValidationError as exc:
        raise MCPError(INVALID_PARAMS, said(str(ctx.method), exc, ctx.params)) from exc
    except MCPError as exc:
        if exc.code != INVALID_PARAMS or exc.message != _SDK_SAID or exc.data:
            raise
        msg = (
            f"{ctx.method} before initialize: this connection is not initialized yet; send the "
            '"initialize" request first (then the "notifications/initialized" notification), '
            "as MCP asks, and send this request again"
        )
        raise MCPError(INVALID_PARAMS, msg) from exc


def said(method: str, error: ValidationError, params: object = None) -> str:
    """What is wrong with a request's params, one clause per param.

    >>> from pydantic import BaseModel
    >>> class P(BaseModel):
    ...     cursor: str
    >>> try:
    ...     P.model_validate({"cursor": 5})
    ... except ValidationError as exc:
    ...     said("tools/list", exc)[:65]
    'Invalid params: tools/list: params.cursor must be a string, got 5'
    """
    wanted: dict[str, list[str]] = {}
    got: dict[str, str] = {}
    missing: list[str] = []
    for each in error.errors(include_url=False):
        loc = [str(part) for part in each.get("loc", ()) if part != "params"]
        while len(loc) > 1 and loc[-1] in _UNION_TAGS:
            loc.pop()
        path = ".".join(loc) or "params"
        if each.get("type") == "missing":
            if path not in missing:
                missing.append(path)
            continue
        kind = _KINDS.get(str(each.get("type")), _should(str(each.get("msg", ""))))
        kinds = wanted.setdefault(path, [])
        if kind not in kinds:
            kinds.append(kind)
        got.setdefault(path, _json(each.get("input")))
    clauses = [f"params.{path} is missing" for path in missing]
    clauses += [
        f"params.{path} must be {' or '.join(kinds)}, got {got[path]}"
        for path, kinds in wanted.items()
    ]
    if not clauses:
        clauses = ["its params are not what MCP defines for it"]
    if not isinstance(params, Mapping | None):
        clauses = [f"params must be an object, got {_json(params)}"]
    them = "them" if len(clauses) > 1 else "it"
    return (
        f"Invalid params: {method}: {'; '.join(clauses)}; fix {them} as the MCP specification "
        f"defines {method} and send the request again"
    )


def _should(message: str) -> str:
    """Pydantic's ``Input should be X`` as ``X`` (the rest of its words as they are)."""
    return message.removeprefix("Input should be ").removeprefix("input should be ") or "valid"


def _json(value: object) -> str:
    value = restore(value)  # a value the stdio relay rewrote, as the client sent it
    try:
        text = json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        return shown(value)
    said = text if len(text) <= 80 else shown(value)
    if isinstance(value, str) and first_surrogate(value):
        return f"a string holding a lone surrogate ({said})"
    return said
