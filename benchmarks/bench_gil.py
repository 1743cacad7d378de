"""Which calls of a memory's components hold the interpreter lock, and for how long.

A ticker thread sleeps 1 ms at a time while the main thread calls embedded Chroma (an upsert
and a read of 2,000 records with vectors, a query), the default embedder and tiktoken; the
ticker's worst lag is how long every other thread (an event loop's too) waited meanwhile.
A call that releases the lock lets the ticker run about every millisecond.

Run: .venv/bin/python benchmarks/bench_gil.py
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Callable

import chromadb
import numpy as np
from _common import machine

from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.tokens.counter import TokenCounter

lags: list[float] = []


def ticker() -> None:
    while True:
        start = time.perf_counter()
        time.sleep(0.001)
        lags.append((time.perf_counter() - start) * 1000.0 - 1.0)


def measure(name: str, call: Callable[[], object], repeat: int) -> None:
    lags.clear()
    start = time.perf_counter()
    for _ in range(repeat):
        call()
    took = (time.perf_counter() - start) / repeat * 1000.0
    worst = max(lags) if lags else float("nan")
    print(f"| {name} | {took:.1f} | {worst:.1f} | {len(lags)} |")


def main() -> None:
    print(machine())
    threading.Thread(target=ticker, daemon=True).start()
    client = chromadb.PersistentClient(tempfile.mkdtemp(prefix="bench-gil-"))
    collection = client.create_collection("gil", embedding_function=None)
    vectors = np.random.default_rng(1).random((2000, 384), dtype=np.float32)
    ids = [str(i) for i in range(2000)]
    embedder = OnnxEmbedder()
    embedder.embed_documents(["warm up"])
    counter = TokenCounter.for_model("gpt-4o")
    texts = [f"some words here {i}" for i in range(5000)]
    print("| call | ms per call | ticker's worst lag ms | ticks |")
    print("|---|--:|--:|--:|")
    measure(
        "Chroma upsert, 2,000 records",
        lambda: collection.upsert(ids=ids, embeddings=vectors, documents=["hello"] * 2000),
        2,
    )
    measure(
        "Chroma get, 2,000 records with vectors",
        lambda: collection.get(include=["embeddings", "documents", "metadatas"]),
        5,
    )
    measure("Chroma query, 3 vectors, 50 each", lambda: collection.query(vectors[:3], 50), 5)
    measure("embed 32 texts (onnxruntime)", lambda: embedder.embed_documents(["a b c"] * 32), 3)
    measure(
        "count 5,000 new texts (tiktoken)",
        lambda: counter.count_many([t + str(time.time()) for t in texts]),
        2,
    )


if __name__ == "__main__":
    main()
