"""The Chroma store: records in, records out, scoped by namespace and session, user or collection.

- `chroma_store`: `ChromaStore`.
- `records`: `Record` and the codec between records and Chroma rows.
- `client`: importing Chroma, clients that cannot hang, classifying failed writes.
- `retry`: `RetryPolicy`; `lock`: one writer per embedded folder.
"""

from __future__ import annotations

__all__ = ["ChromaStore", "Hit", "Record", "RetryPolicy"]

_LAZY = {
    "ChromaStore": "ctxbudget.store.chroma_store",
    "Hit": "ctxbudget.store.records",
    "Record": "ctxbudget.store.records",
    "RetryPolicy": "ctxbudget.store.retry",
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
