"""LlamaIndex adapters for ctxbudget, importable as ``llama_index.ctxbudget``.

The adapters (memory, retriever, node postprocessor) land with their own issue; the package
exists now so that the monorepo layout is final.
"""

from __future__ import annotations

__all__: list[str] = []
