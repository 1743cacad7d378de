"""One filtered Chroma query per question phrasing, or one per source: what `search_many` saves.

`ContextMemory.assemble` searches three sources (the session, the user's other sessions, the
documents) with up to three phrasings of the question (the query and the user's last turns).
This script fills a store with ``--messages`` messages (in sessions of 500, 4 users) and
``--chunks`` document chunks, then times, for each source's filter, ``--vectors`` separate
`ChromaStore.search` calls against one `ChromaStore.search_many` call with the same vectors, and
checks that both return the same hits. The vectors are random unit vectors (the embedding model
is not what is measured), so the store fills in seconds.

    .venv/bin/python benchmarks/bench_search_many.py --messages 10000 --chunks 10000
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from _common import machine

from ctxbudget.store.chroma_store import ChromaStore, Record
from ctxbudget.testing import chroma_server

DIM = 384


class RandomEmbedder:
    """Deterministic random unit vectors per text: cheap, and the same text gives the same one."""

    name = "random-384"

    def _one(self, text: str) -> list[float]:
        rng = np.random.default_rng(abs(hash(text)) % (2**32))
        vector = rng.standard_normal(DIM)
        return [float(x) for x in vector / np.linalg.norm(vector)]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._one(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._one(text)


def fill(store: ChromaStore, messages: int, chunks: int) -> None:
    batch: list[Record] = []
    for i in range(messages):
        session = f"s{i // 500}"
        user = f"u{(i // 500) % 4}"
        batch.append(
            Record(
                id=f"m{i}",
                kind="message",
                text=f"message {i}",
                session_id=session,
                user_id=user,
                role="user",
            )
        )
        if len(batch) == 1000:
            store.add(batch)
            batch = []
    for i in range(chunks):
        batch.append(Record(id=f"d{i}", kind="document", text=f"chunk {i}", source="kb"))
        if len(batch) == 1000:
            store.add(batch)
            batch = []
    if batch:
        store.add(batch)


def measure(store: ChromaStore, vectors: int, rounds: int) -> list[tuple[str, float, float]]:
    embedder = RandomEmbedder()
    sources = {
        "session": {"session_id": "s3", "kinds": ["message"], "k": 40},
        "other sessions": {
            "user_id": "u3",
            "exclude_session_id": "s3",
            "kinds": ["message", "summary"],
            "k": 8,
        },
        "documents": {"kinds": ["document"], "k": 8},
    }
    rows = []
    for name, filters in sources.items():
        separate: list[float] = []
        together: list[float] = []
        for r in range(rounds):
            queries = [embedder.embed_query(f"question {r} phrasing {v}") for v in range(vectors)]
            start = time.perf_counter()
            one = [store.search(q, namespace="default", **filters) for q in queries]  # type: ignore[arg-type]
            separate.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            many = store.search_many(queries, namespace="default", **filters)  # type: ignore[arg-type]
            together.append((time.perf_counter() - start) * 1000)
            same = [[h.record.id for h in hits] for hits in one] == [
                [h.record.id for h in hits] for hits in many
            ]
            if not same:
                raise SystemExit(f"{name}: search_many returned other hits than search")
        rows.append((name, statistics.median(separate), statistics.median(together)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--vectors", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--backends", default="embedded,server")
    args = parser.parse_args()
    print(machine())
    print(
        f"{args.messages:,} messages + {args.chunks:,} chunks, {args.vectors} vectors per source, "
        f"median of {args.rounds} rounds"
    )
    print("| backend | source | separate searches p50 | one search_many p50 | speed-up |")
    print("|---|---|---:|---:|---:|")
    for backend in args.backends.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            if backend == "server":
                with chroma_server(Path(tmp) / "server") as server:
                    store = ChromaStore(url=server.url, embedder=RandomEmbedder())
                    fill(store, args.messages, args.chunks)
                    rows = measure(store, args.vectors, args.rounds)
                    store.close()
            else:
                store = ChromaStore(Path(tmp) / "chroma", embedder=RandomEmbedder())
                fill(store, args.messages, args.chunks)
                rows = measure(store, args.vectors, args.rounds)
                store.close()
        for name, separate, together in rows:
            print(
                f"| {backend} | {name} | {separate:.1f} ms | {together:.1f} ms | "
                f"{separate / together:.1f}x |"
            )


if __name__ == "__main__":
    main()
