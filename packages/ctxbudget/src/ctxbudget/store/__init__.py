"""The Chroma store: records in, records out, scoped by namespace and session, user or collection.

- `chroma_store`: `ChromaStore`, the one public class; the modules below do its work.
- `connection`: which Chroma, the store's lock, and how every call is made (retried on a server,
  one at a time on an embedded Chroma).
- `layout`: a collection per user (partitions) and the store's ``meta`` (`Collections`: the one
  place that names and opens collections); `migration`: opening an older layout.
- `sessions`: session entries (home partition, counter, the generation copies in memory are
  keyed by) and which partitions a read touches; `stamps`: the entries and stamps as stored;
  `session_methods`: `ChromaStore`'s stamp, owner and view methods (one of its bases); `keys`:
  the selective keys reads filter on, so a read costs what its session holds.
- `sequences`: ``seq`` numbers per session, unique across processes; `vectors`: the embedder
  and the dimension a store holds.
- `writes`, `search`, `reads`, `deletes`: adding, searching, reading and deleting records
  (`deletes` also holds `ChromaStore`'s deleting methods, as one of its bases).
- beside the records: `context_log` (each session's log of assemblies) and `doc_entities` (which
  document chunks name which entity); `journal`: messages acknowledged, not yet stored, and
  `journal_lines`: its line format, read back strictly (what it did not write is quarantined);
  `first_write`: storing them when another writer stored an id first (the first write wins).
- `records`: `Record` and the codec between records and Chroma rows; `validate`, `filters`.
- `client`: importing Chroma, clients that cannot hang, classifying failed writes.
- `replies`: a server's replies checked before they are believed (shape, JSON, time).
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
