"""The package's public names, its PEP 420 layout and that it imports next to llama_index.core."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import llama_index.ctxbudget

SRC = Path(__file__).resolve().parents[2] / "packages" / "llamaindex-ctxbudget" / "src"


def test_public_names_are_pinned() -> None:
    assert sorted(llama_index.ctxbudget.__all__) == sorted(
        [
            "DEFAULT_ENTITY_PROMPT",
            "DEFAULT_SUMMARY_PROMPT",
            "ContextAssembledEvent",
            "CtxBudgetEmbedding",
            "CtxBudgetMemory",
            "CtxBudgetNodePostprocessor",
            "CtxBudgetRetriever",
            "LLMEntityExtractor",
            "LLMSummarizer",
            "block_tier",
            "set_tier",
        ]
    )
    for name in llama_index.ctxbudget.__all__:
        assert getattr(llama_index.ctxbudget, name) is not None


def test_llama_index_is_a_namespace_package_here() -> None:
    assert not (SRC / "llama_index" / "__init__.py").exists()
    assert (SRC / "llama_index" / "ctxbudget" / "__init__.py").exists()
    assert (SRC / "llama_index" / "ctxbudget" / "py.typed").exists()


def test_imports_beside_llama_index_core() -> None:
    code = (
        "import llama_index.ctxbudget, llama_index.core; "
        "print(llama_index.ctxbudget.CtxBudgetMemory.class_name(), llama_index.core.__version__)"
    )
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, check=True
    )
    assert done.stdout.split()[0] == "CtxBudgetMemory"
