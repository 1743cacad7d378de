"""The report of a door that keeps none: the packing of `pack_documents`, seen from inside.

The LangChain retriever and compressor return documents and keep no `AssembledContext`; the
drivers read the one `pack_documents` made for the call (LangChain's callbacks carry no
report), by wrapping it in the door's own module for the call.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any
from unittest.mock import patch

from ctxbudget import AssembledContext

__all__ = ["packings"]


@contextmanager
def packings(module: ModuleType) -> Iterator[list[AssembledContext | None]]:
    """Every `pack_documents` result of ``module`` during the block, in order."""
    made: list[AssembledContext | None] = []
    original = module.pack_documents

    def spy(*args: Any, **kwargs: Any) -> AssembledContext | None:
        context: AssembledContext | None = original(*args, **kwargs)
        made.append(context)
        return context

    with patch.object(module, "pack_documents", spy):
        yield made
