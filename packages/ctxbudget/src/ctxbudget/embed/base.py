"""The `Embedder` seam: what the store needs from an embedder, and adapting other frameworks'.

Every embedder the store uses goes through `as_embedder`, which accepts a ctxbudget `Embedder`,
a LangChain ``Embeddings``, a LlamaIndex embedding or a plain ``f(list[str]) -> list[list[float]]``,
and checks what they return (one finite vector per text, all of one dimension).
`default_embedder` is the one used when none is given: `OnnxEmbedder` (no torch).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from ctxbudget.core.unicode import lone_surrogate
from ctxbudget.errors import ConfigurationTypeError, InvalidItemError, StoreInputError

__all__ = [
    "Embedder",
    "as_embedder",
    "checked_texts",
    "default_embedder",
    "validate_embeddings",
]

_DEFAULT: list[Embedder] = []
_DEFAULT_LOCK = threading.Lock()


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors; what the store calls to index and to search.

    ``name`` identifies the model: the store keeps it with the records it writes and refuses
    vectors of another dimension than the ones already stored.
    """

    @property
    def name(self) -> str:
        """The model's identifier, e.g. ``"sentence-transformers/all-MiniLM-L6-v2"``."""
        ...

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order."""
        ...

    def embed_query(self, text: str) -> list[float]:
        """The vector of a search query."""
        ...


def checked_texts(texts: Sequence[str]) -> list[str]:
    """``texts`` as a list, each checked: a str, and valid Unicode (no lone surrogate).

    Raises:
        ConfigurationTypeError: a text is not a str.
        InvalidItemError: a text holds a lone surrogate (a tokenizer's own error names
            neither the text nor the cause).
    """
    batch: list[object] = list(texts)
    for index, text in enumerate(batch):
        if not isinstance(text, str):
            msg = f"text {index} is {type(text).__name__}, not str; embed strings only"
            raise ConfigurationTypeError(msg)
        problem = lone_surrogate(text)
        if problem is not None:
            msg = f"text {index} {problem}"
            raise InvalidItemError(msg)
    return [str(text) for text in batch]


def validate_embeddings(vectors: object, *, count: int, source: str) -> list[list[float]]:
    """Check an embedder's output and return it as plain lists of floats.

    Args:
        vectors: what the embedder returned (lists, tuples or a numpy array).
        count: how many texts were embedded.
        source: the embedder's name, for the error message.

    Returns:
        ``count`` vectors of one dimension, as lists of Python floats.

    Raises:
        StoreInputError: not one vector per text, an empty or ragged vector, or a value that is
            not a finite number.

    >>> validate_embeddings([[1, 0]], count=1, source="demo")
    [[1.0, 0.0]]
    """
    if isinstance(vectors, str | bytes) or not hasattr(vectors, "__iter__"):
        msg = (
            f"embedder {source!r} returned {type(vectors).__name__}, not a list of vectors; "
            "it must return one list of floats per text"
        )
        raise StoreInputError(msg)
    rows = list(vectors)
    if len(rows) != count:
        msg = (
            f"embedder {source!r} returned {len(rows)} vectors for {count} texts; "
            "it must return exactly one vector per text, in order"
        )
        raise StoreInputError(msg)
    out: list[list[float]] = []
    dimension: int | None = None
    for index, row in enumerate(rows):
        try:
            vector = [float(x) for x in row]
        except (TypeError, ValueError) as exc:
            msg = (
                f"embedder {source!r} returned a non-numeric vector at position {index}: {exc}; "
                "each vector must be a sequence of floats"
            )
            raise StoreInputError(msg) from exc
        if not vector:
            msg = f"embedder {source!r} returned an empty vector at position {index}"
            raise StoreInputError(msg)
        if dimension is None:
            dimension = len(vector)
        elif len(vector) != dimension:
            msg = (
                f"embedder {source!r} returned vectors of different dimensions "
                f"({dimension} at position 0, {len(vector)} at position {index}); "
                "all vectors must have one dimension"
            )
            raise StoreInputError(msg)
        if not all(math.isfinite(x) for x in vector):
            msg = (
                f"embedder {source!r} returned NaN or infinity in the vector at position {index}; "
                "check the model and the input text"
            )
            raise StoreInputError(msg)
        out.append(vector)
    return out


class _AdaptedEmbedder:
    """An `Embedder` over two callables, checking what they return."""

    def __init__(
        self,
        name: str,
        documents: Callable[[list[str]], object],
        query: Callable[[str], object] | None,
    ) -> None:
        self._name = name
        self._documents = documents
        self._query = query

    @property
    def name(self) -> str:
        return self._name

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        batch = list(texts)
        if not batch:
            return []
        return validate_embeddings(self._documents(batch), count=len(batch), source=self._name)

    def embed_query(self, text: str) -> list[float]:
        if self._query is None:
            return self.embed_documents([text])[0]
        return validate_embeddings([self._query(text)], count=1, source=self._name)[0]

    def __repr__(self) -> str:
        return f"<embedder {self._name!r}>"


def _model_label(obj: object) -> str:
    for attribute in ("model", "model_name"):
        value = getattr(obj, attribute, None)
        if isinstance(value, str) and value:
            return f"{type(obj).__name__}:{value}"
    return type(obj).__name__


def as_embedder(obj: object, *, name: str | None = None) -> Embedder:
    """Adapt anything that embeds text to the `Embedder` protocol.

    Accepted, in this order: an `Embedder` (returned as is), a LangChain ``Embeddings``
    (anything with ``embed_documents`` and ``embed_query``), a LlamaIndex embedding
    (``get_text_embedding_batch`` and ``get_query_embedding``), a callable
    ``f(list[str]) -> list[list[float]]`` (used for queries too). Adapted embedders check every
    result (one finite vector per text, one dimension).

    Args:
        obj: the embedder to adapt.
        name: the model identifier to store; by default taken from the object.

    Raises:
        TypeError: ``obj`` is none of the above.

    >>> as_embedder(lambda texts: [[1.0, 0.0] for _ in texts], name="demo").embed_query("hi")
    [1.0, 0.0]
    """
    if isinstance(obj, Embedder) and isinstance(getattr(obj, "name", None), str):
        if name is None or name == obj.name:
            return obj
        return _AdaptedEmbedder(name, obj.embed_documents, obj.embed_query)
    embed_documents = getattr(obj, "embed_documents", None)
    embed_query = getattr(obj, "embed_query", None)
    if callable(embed_documents) and callable(embed_query):
        return _AdaptedEmbedder(
            name or f"langchain:{_model_label(obj)}", embed_documents, embed_query
        )
    batch = getattr(obj, "get_text_embedding_batch", None)
    query = getattr(obj, "get_query_embedding", None)
    if callable(batch) and callable(query):
        return _AdaptedEmbedder(name or f"llama-index:{_model_label(obj)}", batch, query)
    if callable(obj):
        label = getattr(obj, "__qualname__", None) or type(obj).__qualname__
        return _AdaptedEmbedder(name or f"callable:{label}", obj, None)
    msg = (
        f"cannot embed with a {type(obj).__name__}: pass a ctxbudget Embedder, a LangChain "
        "Embeddings, a LlamaIndex embedding or a function f(list[str]) -> list[list[float]]"
    )
    raise ConfigurationTypeError(msg)


def default_embedder() -> Embedder:
    """The embedder used when none is given: one shared `OnnxEmbedder` per process.

    all-MiniLM-L6-v2 on onnxruntime (int8, one thread per query), from the ``memory`` extra.
    The model loads on its first use, not here.
    """
    with _DEFAULT_LOCK:
        if not _DEFAULT:
            from ctxbudget.embed.onnx import OnnxEmbedder

            _DEFAULT.append(OnnxEmbedder())
        return _DEFAULT[0]
