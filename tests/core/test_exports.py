from __future__ import annotations

import ctxbudget


def test_public_names_are_pinned() -> None:
    assert sorted(ctxbudget.__all__) == sorted(
        [
            "AssembledContext",
            "Budget",
            "BudgetExceededError",
            "ChromaStore",
            "ConfigurationError",
            "ConfigurationTypeError",
            "OnnxEmbedder",
            "PRESETS",
            "ContextAssembler",
            "ContextItem",
            "ContextMemory",
            "CtxBudgetError",
            "DetectedWindow",
            "Embedder",
            "LocalEmbedder",
            "MemoryConfig",
            "Record",
            "RetryPolicy",
            "Scoring",
            "SessionOwnerError",
            "ExtractiveSummarizer",
            "InvalidBudgetError",
            "InvalidItemError",
            "InvalidValueError",
            "StoredValue",
            "ValuePut",
            "ValueQuery",
            "ItemRef",
            "MemoryClosedError",
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
            "TrimReport",
            "UnknownModelError",
            "WindowDetectionError",
            "detect_window",
            "lookup_model",
            "register_model",
            "FileItems",
            "file_item",
            "file_items",
            "folder_items",
            "folder_tree_item",
            "Strategy",
            "preset",
            "register_preset",
        ]
    )
    for name in ctxbudget.__all__:
        assert getattr(ctxbudget, name) is not None


def test_errors_share_one_root_and_the_builtins_callers_catch() -> None:
    assert issubclass(ctxbudget.BudgetExceededError, ctxbudget.CtxBudgetError)
    assert issubclass(ctxbudget.BudgetExceededError, ValueError)
    assert issubclass(ctxbudget.InvalidBudgetError, ValueError)
    assert issubclass(ctxbudget.UnknownModelError, KeyError)
    assert issubclass(ctxbudget.MissingDependencyError, ImportError)
    assert issubclass(ctxbudget.MemoryClosedError, ctxbudget.StoreError)
    assert issubclass(ctxbudget.SessionOwnerError, ctxbudget.CtxBudgetError)
    assert issubclass(ctxbudget.SessionOwnerError, PermissionError)
    assert issubclass(ctxbudget.WindowDetectionError, ctxbudget.InvalidBudgetError)
    assert issubclass(ctxbudget.WindowDetectionError, ConnectionError)
    assert issubclass(ctxbudget.ConfigurationError, ctxbudget.CtxBudgetError)
    assert issubclass(ctxbudget.ConfigurationError, ValueError)
    assert issubclass(ctxbudget.ConfigurationTypeError, ctxbudget.ConfigurationError)
    assert issubclass(ctxbudget.ConfigurationTypeError, TypeError)
