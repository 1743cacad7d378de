"""Entity memory: the people, places and things a session mentions, their relations, patterns.

Turned on by `MemoryConfig(entities=True)`; see docs/entities.md.

- `names`: `Mention`, the `EntityExtractor` seam, `entity_key`; `rules`: `RuleExtractor`, the
  built-in extractor (no model); `lexicon`: the words its rules know.
- `aliases`: which names are one entity (`resolve`); `graph`: relations and the walk.
- `index`: a session's entities, read from its messages (`EntityIndex`, `Entity`); `answers`:
  a custom extractor's answers, remembered and asked for as messages are stored.
- `stored`: declared relations and patterns, stored as records of their session or user.
- `documents`: the entities of document chunks, read when they are stored and found again when
  a query names them; `reindex`: indexing chunks stored before (`IndexedDocuments`).
- `cards`: entity memory as candidates (`entity_candidates`); `quotes`: the quotes and labels
  on cards; `api`: `ContextMemory`'s ``relate``, ``unrelate``, ``remember_pattern``,
  ``pattern_result``, ``patterns``, ``entities`` and ``index_document_entities``; `prompt`:
  what the adapters' ``LLMEntityExtractor`` asks a model.
"""

from __future__ import annotations

from ctxbudget.memory.entities.index import Entity
from ctxbudget.memory.entities.names import ENTITY_TYPES, EntityExtractor, Mention, entity_key
from ctxbudget.memory.entities.rules import RuleExtractor
from ctxbudget.memory.entities.stored import Pattern, Relation

__all__ = [
    "ENTITY_TYPES",
    "Entity",
    "EntityExtractor",
    "Mention",
    "Pattern",
    "Relation",
    "RuleExtractor",
    "entity_key",
]
