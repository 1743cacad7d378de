"""Long-term memory: `ContextMemory` turns stored records into budgeted context.

- `context`: `ContextMemory` and `MemoryConfig`, the public entry point.
- `record_items`: where a stored record becomes a `ContextItem`.
- `scoring`, `session_index`: how candidates are scored (similarity, recency, lexical).
- `inputs`, `chunking`, `tasks`: checking what callers write, splitting documents, task trees.

Needs the ``memory`` extra (Chroma and the embedder); loaded on first use.
"""

from __future__ import annotations

__all__ = ["ContextMemory", "MemoryConfig", "Scoring"]

_LAZY = {
    "ContextMemory": "ctxbudget.memory.context",
    "MemoryConfig": "ctxbudget.memory.context",
    "Scoring": "ctxbudget.memory.scoring",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
