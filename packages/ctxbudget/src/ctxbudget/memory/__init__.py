"""Long-term memory: `ContextMemory` turns stored records into budgeted context.

`context` holds `ContextMemory`, the public entry point; its sub-packages follow a message's
path, from ``add_message`` to the prompt:

- `writing`: a message, fact or document checked (`inputs` here, shared with reading),
  acknowledged and journaled (`writing.behind`, `writing.opening`), embedded and stored
  (`writing.writer`); `writing.api` holds `ContextMemory`'s write methods.
- `reading`: what one call reads of a session (`reading.session_state`), the session kept in
  memory for search (`reading.session_index`), retrieval and lexical scoring
  (`reading.retrieval`, `reading.lexical`), the candidates offered (`reading.candidates`,
  `reading.search`), stored records as context items (`reading.record_items`) and speakers.
- `policy`: how a budget is spent: `MemoryConfig`, `Scoring` (the formulas), `Strategy`, the
  named presets, the per-call plan and the retrieved floor. Data and formulas only.
- `log`: the inclusion log of every assembly (`log.entries`: `ContextRecord`; `log.api`),
  budget analytics over it (`log.analytics`) and access salience (`log.access`).
- `upkeep`: summaries, the task stack, forgetting (`upkeep.api` holds the methods).
- `values`: keyed JSON values beside the messages (LangGraph's store model: `StoredValue`,
  `ValuePut`, `ValueQuery`; `values.api` holds the methods).
- `entities`: entity memory (`MemoryConfig.entities`): the `EntityExtractor` seam and the
  built-in `RuleExtractor`, a session's `Entity` s, relations and `Pattern` s.

`awaitable` holds the async twins of `ContextMemory`'s calls (``aassemble``, ``aadd_message``...).
Every copy of stored state kept in memory is listed, with its key, in docs/architecture.md
("Caches"). Needs the ``memory`` extra (Chroma and the embedder); loaded on first use.
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
    "StoredValue",
    "ValuePut",
    "ValueQuery",
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
    "MemoryConfig": "ctxbudget.memory.policy.config",
    "Scoring": "ctxbudget.memory.policy.scoring",
    "speaker_of": "ctxbudget.memory.reading.speakers",
    "Strategy": "ctxbudget.memory.policy.strategy",
    "PRESETS": "ctxbudget.memory.policy.presets",
    "preset": "ctxbudget.memory.policy.presets",
    "register_preset": "ctxbudget.memory.policy.presets",
    "BudgetStats": "ctxbudget.memory.log.analytics",
    "budget_stats": "ctxbudget.memory.log.analytics",
    "ContextRecord": "ctxbudget.memory.log.entries",
    "InclusionLogConfig": "ctxbudget.memory.log.api",
    "StoredValue": "ctxbudget.memory.values.model",
    "ValuePut": "ctxbudget.memory.values.model",
    "ValueQuery": "ctxbudget.memory.values.model",
}

__getattr__ = lazy_attributes(__name__, _LAZY)
