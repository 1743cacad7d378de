"""A store's vectors: embedding records and queries, and the embedder a collection was written with.

The store entry in ``<collection>.meta`` (`ctxbudget.store.layout`) records the embedder's name
and dimension with the first write. Vectors of another dimension are refused (they cannot be
searched together); another embedder name with the same dimension is allowed, with a warning.
Embedding is the slow part of a write, so it runs outside the store's lock.

Each stored record's vector is moved by a tiny offset of its own (`spread`, derived from its
key): Chroma's HNSW index links identical vectors to each other and then strands the rest. One
user's message "my locker code is 4512" among 500 "ok" of other sessions was not found by a
search for it, and with the offsets it is (tests/store/test_spread_vectors.py). The offset
moves a similarity by about 1e-6, under the int8 embedder's own error.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

import numpy as np

from ctxbudget.embed.base import Embedder, validate_embeddings
from ctxbudget.errors import StoreInputError
from ctxbudget.store.layout import Collections
from ctxbudget.store.records import Record, embedding_text, same_content

__all__ = ["Vectors", "spread"]

_EMBED_CHUNK = 256
_SPREAD = 1e-6  # the largest offset of one component (a unit vector's are about 0.05)


def spread(key: str, vector: list[float]) -> list[float]:
    """``vector`` moved by an offset of at most `_SPREAD` a component, the same for a key."""
    noise = hashlib.shake_128(key.encode("utf-8", "surrogatepass")).digest(len(vector))
    offset = (np.frombuffer(noise, dtype=np.uint8).astype(np.float64) - 127.5) / 127.5
    moved: list[float] = (np.asarray(vector, dtype=np.float64) + offset * _SPREAD).tolist()
    return moved


class Vectors:
    """One store's embedder, and the name and dimension its collection holds."""

    def __init__(self, embedder: Embedder, collections: Collections) -> None:
        self.embedder = embedder
        self._collections = collections
        self._info: tuple[str, int] | None = None
        self._warned_name = False

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One checked vector per text, embedded a chunk at a time."""
        vectors: list[list[float]] = []
        for start in range(0, len(texts), _EMBED_CHUNK):
            chunk = texts[start : start + _EMBED_CHUNK]
            out = self.embedder.embed_documents(chunk)
            vectors.extend(validate_embeddings(out, count=len(chunk), source=self.embedder.name))
        return vectors

    def embed_needed(
        self,
        batch: list[Record],
        keys: list[str],
        stored: dict[str, Record],
        vectors: dict[str, list[float]],
        *,
        replace: bool,
    ) -> None:
        """Add to ``vectors`` those of the records a write will store that it lacks.

        A record needs one unless it is stored already with the same content (or stored with
        other content and ``replace`` is off: the write refuses it).
        """
        todo = [
            (key, embedding_text(record))
            for record, key in zip(batch, keys, strict=True)
            if key not in vectors
            and (key not in stored or (replace and not same_content(record, stored[key])))
        ]
        if todo:
            out = self.embed([text for _, text in todo])
            vectors.update((key, spread(key, v)) for (key, _), v in zip(todo, out, strict=True))

    def query_vector(self, query: object) -> list[float]:
        """The vector of a search query: a text embedded, or a vector checked.

        Raises:
            StoreInputError: an empty text, or not a sequence of finite floats.
        """
        if isinstance(query, str):
            if not query.strip():
                msg = "query is empty; search with some text or a vector"
                raise StoreInputError(msg)
            out = [self.embedder.embed_query(query)]
            return validate_embeddings(out, count=1, source=self.embedder.name)[0]
        try:
            vector = [float(x) for x in query]  # type: ignore[attr-defined]
        except (TypeError, ValueError) as exc:
            msg = f"query must be a str or a sequence of floats, got {type(query).__name__}"
            raise StoreInputError(msg) from exc
        if not vector or not all(math.isfinite(x) for x in vector):
            msg = "the query vector must be non-empty and hold only finite numbers"
            raise StoreInputError(msg)
        return vector

    def info(self) -> tuple[str, int] | None:
        """The embedder name and dimension the collection holds (None: nothing written yet)."""
        if self._info is None:
            cols = self._collections
            rows = cols.rows(cols.meta, ids=["store"], documents=False)
            if rows:
                meta = rows[0][2]
                self._info = (str(meta.get("embedder")), int(meta["dim"]))
        return self._info

    def check_dimension(self, dimension: int) -> None:
        """Before a write of vectors of ``dimension``: record it, or refuse another.

        Raises:
            StoreInputError: the collection holds vectors of another dimension.
        """
        info = self.info()
        name = self.embedder.name
        cols = self._collections
        if info is None:
            entry = {"type": "store", "embedder": name, "dim": dimension}
            cols.upsert_meta({"store": entry}, action="record the embedder", wrote="")
            self._info = (name, dimension)
            return
        stored_name, stored_dimension = info
        if stored_dimension != dimension:
            msg = (
                f"collection {cols.name!r} holds {stored_dimension}-dimension vectors from "
                f"embedder {stored_name!r}, but {name!r} gives {dimension} dimensions; use the "
                "same embedder, or another collection for this one; nothing was written"
            )
            raise StoreInputError(msg)
        if stored_name != name and not self._warned_name:
            self._warned_name = True
            cols.conn.logger.warning(
                "collection %r was written with embedder %r, now used with %r: "
                "similarities across models are not comparable",
                cols.name,
                stored_name,
                name,
            )
