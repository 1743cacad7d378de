"""Long-term memory: `ContextMemory` turns stored records into budgeted context.

- `context`: `ContextMemory`, the public entry point; `config`: `MemoryConfig`.
- `writes`: how a message, pinned fact or document is checked and stored.
- `session_state`: what one call reads of a session (recent turns, pins and tasks, summaries).
- `candidates`: `Candidates`, what `ContextMemory.candidates` offers for one query (and
  `ContextMemory.search`); `retrieval`: the search behind it and the share of recent history.
- `record_items`: where a stored record becomes a `ContextItem`.
- `scoring`, `session_index`: how candidates are scored (similarity, recency, lexical).
- `speakers`: who said a message (`speaker_of`), in its ``name`` or a ``Name: `` prefix.
- `strategy`, `presets`, `plan`: `Strategy` and the named presets (``"chat"``, ``"rag"``...),
  and how one call merges and applies them.
- `inputs`, `chunking`: checking what callers write, splitting documents.
- `tasks`, `summarize`, `forget`: the task stack, stored summaries, clearing and deleting.
- `entities`: entity memory (`MemoryConfig.entities`): the `EntityExtractor` seam and the
  built-in `RuleExtractor`, a session's `Entity` s, relations and `Pattern` s.
- `inclusion_log`, `inclusion`, `analytics`, `access`: the log of every assembly
  (`ContextRecord`), budget analytics over it (`BudgetStats`) and access salience.

Needs the ``memory`` extra (Chroma and the embedder); loaded on first use.
"""

from __future__ import annotations

from ctxbudget.extras import lazy_attributes

__all__ = [
    "PRESETS",
    "BudgetStats",
    "ContextMemory",
    "ContextRecord",
    "Entity",
    "EntityExtractor",
    "InclusionLogConfig",
    "MemoryConfig",
    "Mention",
    "Pattern",
    "RuleExtractor",
    "Scoring",
    "Strategy",
    "budget_stats",
    "preset",
    "register_preset",
    "speaker_of",
]

_LAZY = {
    "Entity": "ctxbudget.memory.entities",
    "EntityExtractor": "ctxbudget.memory.entities",
    "Mention": "ctxbudget.memory.entities",
    "Pattern": "ctxbudget.memory.entities",
    "RuleExtractor": "ctxbudget.memory.entities",
    "ContextMemory": "ctxbudget.memory.context",
    "MemoryConfig": "ctxbudget.memory.config",
    "Scoring": "ctxbudget.memory.scoring",
    "speaker_of": "ctxbudget.memory.speakers",
    "Strategy": "ctxbudget.memory.strategy",
    "PRESETS": "ctxbudget.memory.presets",
    "preset": "ctxbudget.memory.presets",
    "register_preset": "ctxbudget.memory.presets",
    "BudgetStats": "ctxbudget.memory.analytics",
    "budget_stats": "ctxbudget.memory.analytics",
    "ContextRecord": "ctxbudget.memory.inclusion",
    "InclusionLogConfig": "ctxbudget.memory.inclusion_log",
}

__getattr__ = lazy_attributes(__name__, _LAZY)
