"""`EMBEDDED_WRITE_BATCH`: an embedded store's writes in Chroma calls of bounded size (issue 40).

Embedded Chroma holds the interpreter lock for a whole call, so the bound caps how long one
write stalls the process's other threads. Off by default (measured: it does not pay here,
docs/benchmarks.md); on, a write stores exactly what one call stores, in more calls.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from chromadb.api.models.Collection import Collection

from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.store import writes
from ctxbudget.store.chroma_store import ChromaStore, Record


def message(i: int) -> Record:
    return Record(
        id=f"m{i}",
        kind="message",
        text=f"message number {i} about the train to Porto",
        session_id="s1",
        user_id="u1",
        role="user" if i % 2 == 0 else "assistant",
    )


@pytest.mark.parametrize("bound", [None, 1, 3])
def test_bounded_writes_store_the_same_records(
    tmp_path: Path, embedder: OnnxEmbedder, monkeypatch: pytest.MonkeyPatch, bound: int | None
) -> None:
    monkeypatch.setattr(writes, "EMBEDDED_WRITE_BATCH", bound)
    sizes: list[int] = []
    upsert = Collection.upsert

    def counted(self: Collection, *args: Any, **kwargs: Any) -> None:
        vectors = kwargs.get("embeddings")
        if vectors is not None and len(vectors[0]) > 1:  # records, not the store's own entries
            sizes.append(len(kwargs["ids"]))
        upsert(self, *args, **kwargs)

    monkeypatch.setattr(Collection, "upsert", counted)
    with ChromaStore(tmp_path / "chroma", embedder=embedder) as store:
        stored = store.add([message(i) for i in range(7)])
        again = store.add([message(i) for i in range(9)])  # two new, seven the same
        read = store.session_messages(namespace="default", session_id="s1")
    assert [r.seq for r in stored] == list(range(7))
    assert [r.seq for r in again] == list(range(9))
    assert [(r.id, r.seq, r.text) for r in read] == [
        (f"m{i}", i, message(i).text) for i in range(9)
    ]
    assert sum(sizes) == 9
    assert max(sizes) <= (bound or 7)
    assert len(sizes) == (2 if bound is None else -(-7 // bound) + -(-2 // bound))
