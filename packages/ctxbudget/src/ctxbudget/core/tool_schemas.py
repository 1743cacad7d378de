"""Tool schemas as the context counts them: each one's JSON with sorted keys.

Providers do not publish how they render the tool schemas a call carries, so every layer counts
a schema as the same text: `ContextMemory.assemble(tools=)` offers it as a ``Tier.TOOLS`` item
(`ctxbudget.memory.reading.record_items.tool_items`) and the LangChain middleware adds its tokens to
the call's reserve.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["tool_schema_json"]


def tool_schema_json(schema: Mapping[str, Any]) -> str:
    """The text a tool schema is counted as: JSON with sorted keys, non-ASCII kept.

    Values JSON cannot write are written as their ``str``.

    Raises:
        TypeError: a key JSON cannot write (not a str, int, float, bool or None).
        ValueError: a circular reference.

    >>> tool_schema_json({"name": "search", "description": "Find é"})
    '{"description": "Find é", "name": "search"}'
    """
    return json.dumps(schema, sort_keys=True, ensure_ascii=False, default=str)
