"""Embedders: text to vectors, offline.

- `base`: the `Embedder` protocol, `as_embedder`, `default_embedder` (an `OnnxEmbedder`).
- `onnx`: `OnnxEmbedder`, all-MiniLM-L6-v2 on onnxruntime (int8, no torch): the default.
- `onnx_files`: the files `OnnxEmbedder` loads, found and checked against their sha256 pins.
- `local`: `LocalEmbedder`, sentence-transformers on torch (the ``torch`` extra).
"""

from __future__ import annotations

from ctxbudget.extras import lazy_attributes

__all__ = ["Embedder", "LocalEmbedder", "OnnxEmbedder", "as_embedder", "default_embedder"]

_LAZY = {
    "Embedder": "ctxbudget.embed.base",
    "LocalEmbedder": "ctxbudget.embed.local",
    "OnnxEmbedder": "ctxbudget.embed.onnx",
    "as_embedder": "ctxbudget.embed.base",
    "default_embedder": "ctxbudget.embed.base",
}

__getattr__ = lazy_attributes(__name__, _LAZY)
