"""Optional dependencies: what each extra brings and the error that names it.

``pip install ctxbudget`` brings counting and assembly (tiktoken, numpy). The extras:

- ``memory``: Chroma and the default embedder (all-MiniLM-L6-v2 on onnxruntime, int8);
  needed by `ContextMemory`, `ChromaStore` and every memory-backed adapter class.
- ``torch``: sentence-transformers, for `LocalEmbedder` and other torch models.
- ``tokenizers``: counting for models whose tokenizer is a Hugging Face ``tokenizer.json``.
- ``eval``: the LoCoMo evaluation's progress bars and plots.
- ``mcp``: the MCP SDK, for ``ctxbudget mcp`` (with the ``memory`` extra it serves).
- ``otel``: the OpenTelemetry API, for the spans of `ctxbudget.telemetry` (without it, none).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from types import ModuleType

from ctxbudget.errors import MissingDependencyError

__all__ = ["EXTRAS", "lazy_attributes", "missing_extra", "require"]

# extra -> (the distributions it installs, in words; a module that proves it is installed)
EXTRAS: dict[str, tuple[str, str]] = {
    "memory": ("Chroma and the ONNX embedder", "chromadb"),
    "torch": ("sentence-transformers and torch", "sentence_transformers"),
    "tokenizers": ("the Hugging Face tokenizers library", "tokenizers"),
    "eval": ("tqdm and matplotlib", "matplotlib"),
    "mcp": ("the MCP SDK (mcp)", "mcp"),
    "otel": ("the OpenTelemetry API", "opentelemetry.trace"),
}


def missing_extra(
    extra: str, feature: str, cause: BaseException | None = None
) -> MissingDependencyError:
    """The error for `feature` used without `extra` installed: what, why, and the pip command."""
    what, _ = EXTRAS.get(extra, (extra, extra))
    detail = f" ({cause})" if cause is not None else ""
    msg = (
        f"{feature} needs {what}, which is not installed{detail}. "
        f"Install the extra: pip install 'ctxbudget[{extra}]'"
    )
    error = MissingDependencyError(msg, extra=extra)
    if cause is not None:
        error.__cause__ = cause
    return error


def require(module: str, extra: str, feature: str) -> ModuleType:
    """Import `module`, or raise `MissingDependencyError` naming `extra` and `feature`."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise missing_extra(extra, feature, error) from error


def lazy_attributes(package: str, names: Mapping[str, str]) -> Callable[[str], object]:
    """A module ``__getattr__`` importing each of `names` from its module on first use.

    How the packages keep their public names without importing the memory layer (Chroma, the
    embedder) until it is used: ``__getattr__ = lazy_attributes(__name__, {"Name": "module"})``.
    The value is cached in the package's namespace after the first access.
    """

    def get(name: str) -> object:
        module = names.get(name)
        if module is None:
            msg = f"module {package!r} has no attribute {name!r}"
            raise AttributeError(msg)
        value = getattr(importlib.import_module(module), name)
        setattr(importlib.import_module(package), name, value)
        return value

    return get
