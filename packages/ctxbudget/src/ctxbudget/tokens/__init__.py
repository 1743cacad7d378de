"""Counting tokens with the model's own tokenizer.

- `counter`: `TokenCounter`, the one way every layer counts (text, messages, images, tool calls).
- `encodings`: tiktoken encodings loaded offline, other tokenizers, image token costs.
- `models`: the model registry (window, encoding, per-message overhead).
"""

from __future__ import annotations

from ctxbudget.tokens.counter import TokenCounter
from ctxbudget.tokens.models import ModelInfo, lookup_model, register_model

__all__ = ["ModelInfo", "TokenCounter", "lookup_model", "register_model"]
