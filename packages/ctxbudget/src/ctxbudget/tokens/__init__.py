"""Counting tokens with the model's own tokenizer.

- `counter`: `TokenCounter`, the one way every layer counts (text, messages, images, tool calls):
  its constructors (which tokenizer), attributes, encode and decode.
- `approximate`: the descriptor that makes ``approximate`` a constructor on the class and a bool
  on a counter.
- `cache`: the count cache every counter of a tokenizer shares; ``count`` and ``count_many``.
- `messages`: how chat messages are counted (per-message overhead, content parts, tool calls).
- `backends`: the tokenizers (tiktoken, Hugging Face ``tokenizer.json`` loading, approximate).
- `encodings`: tiktoken encodings loaded offline.
- `images`: image content parts and their token cost.
- `models`: the model registry (window, encoding, per-message overhead).
- `served`: the window a local server (Ollama, vLLM, LM Studio) serves a model with;
  `server_api` reads their answers (`server_http` asks).
"""

from __future__ import annotations

from ctxbudget.tokens.counter import TokenCounter
from ctxbudget.tokens.models import ModelInfo, lookup_model, register_model
from ctxbudget.tokens.served import DetectedWindow, detect_window

__all__ = [
    "DetectedWindow",
    "ModelInfo",
    "TokenCounter",
    "detect_window",
    "lookup_model",
    "register_model",
]
