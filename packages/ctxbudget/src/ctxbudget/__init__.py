"""ctxbudget: the context layer that decides what goes into the prompt, and proves it fits.

>>> from ctxbudget import ContextAssembler, ContextItem, Tier
>>> ctx = ContextAssembler(model="gpt-4o").assemble(
...     [ContextItem("q", "Where should we eat tonight?", tier=Tier.QUERY)], budget=64)
>>> ctx.tokens_used <= ctx.tokens_available
True
"""

from __future__ import annotations

from ctxbudget.core.assemble import ContextAssembler
from ctxbudget.core.budget import Budget
from ctxbudget.core.ids import ItemRef
from ctxbudget.core.items import ContextItem, Shrink, Tier
from ctxbudget.core.packing import SolverReport
from ctxbudget.core.report import AssembledContext, PrunedItem, PruneReason, TierUsage
from ctxbudget.core.summaries import ExtractiveSummarizer, Summarizer
from ctxbudget.core.trimming import TrimReport
from ctxbudget.errors import (
    BudgetExceededError,
    ConfigurationError,
    ConfigurationTypeError,
    CtxBudgetError,
    InvalidBudgetError,
    InvalidItemError,
    InvalidValueError,
    MemoryClosedError,
    MissingDependencyError,
    SessionOwnerError,
    StoreError,
    StoreInputError,
    TokenizerUnavailableError,
    UnknownModelError,
    WindowDetectionError,
)
from ctxbudget.extras import lazy_attributes
from ctxbudget.sources import (
    FileItems,
    file_item,
    file_items,
    folder_items,
    folder_tree_item,
)
from ctxbudget.store.retry import RetryPolicy
from ctxbudget.tokens.counter import TokenCounter
from ctxbudget.tokens.models import ModelInfo, lookup_model, register_model
from ctxbudget.tokens.served import DetectedWindow, detect_window

__all__ = [
    "AssembledContext",
    "Budget",
    "BudgetExceededError",
    "ConfigurationError",
    "ConfigurationTypeError",
    "ChromaStore",
    "ContextAssembler",
    "ContextItem",
    "ContextMemory",
    "CtxBudgetError",
    "DetectedWindow",
    "Embedder",
    "ExtractiveSummarizer",
    "FileItems",
    "InvalidBudgetError",
    "InvalidItemError",
    "InvalidValueError",
    "ItemRef",
    "LocalEmbedder",
    "MemoryConfig",
    "MemoryClosedError",
    "MissingDependencyError",
    "ModelInfo",
    "OnnxEmbedder",
    "PRESETS",
    "PruneReason",
    "PrunedItem",
    "Record",
    "RetryPolicy",
    "Scoring",
    "SessionOwnerError",
    "Shrink",
    "SolverReport",
    "StoreError",
    "StoreInputError",
    "StoredValue",
    "Strategy",
    "Summarizer",
    "Tier",
    "TierUsage",
    "TokenCounter",
    "TokenizerUnavailableError",
    "TrimReport",
    "UnknownModelError",
    "ValuePut",
    "ValueQuery",
    "WindowDetectionError",
    "detect_window",
    "file_item",
    "file_items",
    "folder_items",
    "folder_tree_item",
    "lookup_model",
    "preset",
    "register_model",
    "register_preset",
]

__version__ = "0.1.0"

# The memory layer pulls in Chroma and the embedding stack: loaded on first use, so that the
# core (`ContextAssembler` and friends) imports in milliseconds.
_LAZY = {
    "ContextMemory": "ctxbudget.memory.context",
    "MemoryConfig": "ctxbudget.memory.policy.config",
    "Scoring": "ctxbudget.memory.policy.scoring",
    "Strategy": "ctxbudget.memory.policy.strategy",
    "PRESETS": "ctxbudget.memory.policy.presets",
    "preset": "ctxbudget.memory.policy.presets",
    "register_preset": "ctxbudget.memory.policy.presets",
    "StoredValue": "ctxbudget.memory.values.model",
    "ValuePut": "ctxbudget.memory.values.model",
    "ValueQuery": "ctxbudget.memory.values.model",
    "ChromaStore": "ctxbudget.store.chroma_store",
    "Record": "ctxbudget.store.records",
    "Embedder": "ctxbudget.embed.local",
    "LocalEmbedder": "ctxbudget.embed.local",
    "OnnxEmbedder": "ctxbudget.embed.onnx",
}

__getattr__ = lazy_attributes(__name__, _LAZY)
