"""ctxbudget: the context layer that decides what goes into the prompt, and proves it fits.

>>> from ctxbudget import ContextAssembler, ContextItem, Tier
>>> ctx = ContextAssembler(model="gpt-4o").assemble(
...     [ContextItem("q", "Where should we eat tonight?", tier=Tier.QUERY)], budget=64)
>>> ctx.tokens_used <= ctx.tokens_available
True
"""

from __future__ import annotations

from ctxbudget.assemble import ContextAssembler
from ctxbudget.budget import Budget
from ctxbudget.errors import (
    BudgetExceededError,
    CtxBudgetError,
    InvalidBudgetError,
    InvalidItemError,
    MissingDependencyError,
    StoreError,
    StoreInputError,
    TokenizerUnavailableError,
    UnknownModelError,
)
from ctxbudget.items import ContextItem, Shrink, Tier
from ctxbudget.models import ModelInfo, lookup_model, register_model
from ctxbudget.packing import SolverReport
from ctxbudget.report import AssembledContext, PrunedItem, PruneReason, TierUsage
from ctxbudget.summaries import ExtractiveSummarizer, Summarizer
from ctxbudget.tokens import TokenCounter

__all__ = [
    "AssembledContext",
    "Budget",
    "BudgetExceededError",
    "ContextAssembler",
    "ContextItem",
    "CtxBudgetError",
    "ExtractiveSummarizer",
    "InvalidBudgetError",
    "InvalidItemError",
    "MissingDependencyError",
    "ModelInfo",
    "PruneReason",
    "PrunedItem",
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
