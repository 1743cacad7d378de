"""The deeply nested value the bad-input suites send (conformance, reliability, the MCP server).

A list in a list... ``DEPTH`` levels: valid JSON, but ``repr`` of it raises RecursionError and
Python's own ``json`` cannot read it back, so a door must refuse it without echoing it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DEPTH", "nested"]

DEPTH = 10_000


def nested(depth: int = DEPTH) -> list[Any]:
    """A list in a list... ``depth`` levels."""
    root: list[Any] = []
    level = root
    for _ in range(depth - 1):
        level.append([])
        level = level[0]
    return root
