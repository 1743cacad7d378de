"""Long-term memory: `ContextMemory` turns stored records into budgeted context.

- `context`: `ContextMemory`, the public entry point; `config`: `MemoryConfig`.
- `writes`: how a message, pinned fact or document is checked and stored.
- `session_state`: what one call reads of a session (recent turns, pins and tasks, summaries).
- `candidates`: `Candidates`, what `ContextMemory.candidates` offers for one query (and
  `ContextMemory.search`); `retrieval`: the search behind it and the share of recent history.
- `record_items`: where a stored record becomes a `ContextItem`.
- `scoring`, `session_index`: how candidates are scored (similarity, recency, lexical).
- `inputs`, `chunking`: checking what callers write, splitting documents.
- `tasks`, `summarize`, `forget`: the task stack, stored summaries, clearing and deleting.

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
