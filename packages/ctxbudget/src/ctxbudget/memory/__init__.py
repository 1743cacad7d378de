"""Long-term memory: `ContextMemory` turns stored records into budgeted context.

- `context`: `ContextMemory`, the public entry point; `config`: `MemoryConfig`.
- `candidates`: `Candidates`, what `ContextMemory.candidates` offers for one query.
- `record_items`: where a stored record becomes a `ContextItem`.
- `scoring`, `session_index`: how candidates are scored (similarity, recency, lexical).
- `inputs`, `chunking`, `tasks`: checking what callers write, splitting documents, task trees.

Needs the ``memory`` extra (Chroma and the embedder); loaded on first use.
"""

from __future__ import annotations

from ctxbudget.extras import lazy_attributes

__all__ = ["ContextMemory", "MemoryConfig", "Scoring"]

_LAZY = {
    "ContextMemory": "ctxbudget.memory.context",
    "MemoryConfig": "ctxbudget.memory.config",
    "Scoring": "ctxbudget.memory.scoring",
}

__getattr__ = lazy_attributes(__name__, _LAZY)
