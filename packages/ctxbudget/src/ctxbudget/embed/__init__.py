"""Embedders: text to vectors, offline.

- `local`: the `Embedder` protocol, `LocalEmbedder` (sentence-transformers, the ``torch`` extra).
- `onnx`: `OnnxEmbedder`, the same all-MiniLM-L6-v2 on onnxruntime (int8, no torch).
"""

from __future__ import annotations

__all__ = ["Embedder", "LocalEmbedder", "OnnxEmbedder", "as_embedder"]

_LAZY = {
    "Embedder": "ctxbudget.embed.local",
    "LocalEmbedder": "ctxbudget.embed.local",
    "OnnxEmbedder": "ctxbudget.embed.onnx",
    "as_embedder": "ctxbudget.embed.local",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
