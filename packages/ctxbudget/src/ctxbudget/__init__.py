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
from ctxbudget.core.items import ContextItem, Shrink, Tier
from ctxbudget.core.packing import SolverReport
from ctxbudget.core.report import AssembledContext, PrunedItem, PruneReason, TierUsage
from ctxbudget.core.summaries import ExtractiveSummarizer, Summarizer
from ctxbudget.errors import (
    BudgetExceededError,
    ConfigurationError,
    ConfigurationTypeError,
    CtxBudgetError,
    InvalidBudgetError,
    InvalidItemError,
    MissingDependencyError,
    StoreError,
    StoreInputError,
    TokenizerUnavailableError,
    UnknownModelError,
)
from ctxbudget.extras import lazy_attributes
from ctxbudget.store.retry import RetryPolicy
from ctxbudget.tokens.counter import TokenCounter
from ctxbudget.tokens.models import ModelInfo, lookup_model, register_model

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
    "Embedder",
    "ExtractiveSummarizer",
    "InvalidBudgetError",
    "InvalidItemError",
    "LocalEmbedder",
    "MemoryConfig",
    "MissingDependencyError",
    "ModelInfo",
    "OnnxEmbedder",
    "PruneReason",
    "PrunedItem",
    "Record",
    "RetryPolicy",
    "Scoring",
    "Shrink",
    "SolverReport",
    "StoreError",
    "StoreInputError",
    "Summarizer",
    "Tier",
    "TierUsage",
    "TokenCounter",
    "TokenizerUnavailableError",
    "UnknownModelError",
    "lookup_model",
    "register_model",
]

__version__ = "0.1.0"

# The memory layer pulls in Chroma and the embedding stack: loaded on first use, so that the
# core (`ContextAssembler` and friends) imports in milliseconds.
_LAZY = {
    "ContextMemory": "ctxbudget.memory.context",
    "MemoryConfig": "ctxbudget.memory.config",
    "Scoring": "ctxbudget.memory.scoring",
    "ChromaStore": "ctxbudget.store.chroma_store",
    "Record": "ctxbudget.store.records",
    "Embedder": "ctxbudget.embed.local",
    "LocalEmbedder": "ctxbudget.embed.local",
    "OnnxEmbedder": "ctxbudget.embed.onnx",
}

__getattr__ = lazy_attributes(__name__, _LAZY)
