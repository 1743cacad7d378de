"""The Chroma store: records in, records out, scoped by namespace and session, user or collection.

- `chroma_store`: `ChromaStore`.
- `records`: `Record` and the codec between records and Chroma rows.
- `client`: importing Chroma, clients that cannot hang, classifying failed writes.
- `retry`: `RetryPolicy`; `lock`: one writer per embedded folder.
"""

from __future__ import annotations

from ctxbudget.extras import lazy_attributes

__all__ = ["ChromaStore", "Hit", "Record", "RetryPolicy"]

_LAZY = {
    "ChromaStore": "ctxbudget.store.chroma_store",
    "Hit": "ctxbudget.store.records",
    "Record": "ctxbudget.store.records",
    "RetryPolicy": "ctxbudget.store.retry",
}

__getattr__ = lazy_attributes(__name__, _LAZY)
