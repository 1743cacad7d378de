"""A progress line on stderr while the embedding model loads (it can take many seconds).

Shown when stderr is a terminal, or with ``--progress``; never with ``--no-progress``, and never
on stdout (``--json`` output stays one document).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import TextIO, TypeVar

from ctxbudget.embed.base import Embedder

__all__ = ["ProgressEmbedder", "progress_wanted"]

_T = TypeVar("_T")


def progress_wanted(choice: bool | None, stream: TextIO) -> bool:
    """``--progress`` (True), ``--no-progress`` (False), or neither: only on a terminal."""
    if choice is not None:
        return choice
    isatty = getattr(stream, "isatty", None)
    return bool(isatty is not None and isatty())


class ProgressEmbedder:
    """An `Embedder` that says on ``stream`` when its model loads, then embeds as ``inner``.

    The model loads on the first embedding. Embedders that load on reading ``dimension``
    (`OnnxEmbedder`, `LocalEmbedder`) are timed on the load alone; others on their first call.
    """

    def __init__(self, inner: Embedder, stream: TextIO) -> None:
        self._inner = inner
        self._stream = stream
        self._lock = threading.Lock()
        self._ready = False

    @property
    def name(self) -> str:
        """The inner embedder's name (the one stored with records)."""
        return self._inner.name

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """``inner.embed_documents``, after the load line on the first call."""
        if not self._ready:
            return self._first(lambda: self._inner.embed_documents(texts))
        return self._inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        """``inner.embed_query``, after the load line on the first call."""
        if not self._ready:
            return self._first(lambda: self._inner.embed_query(text))
        return self._inner.embed_query(text)

    def load(self) -> None:
        """Load the model now, with its line (before a progress bar starts, say).

        Does nothing once loaded, or for an embedder that loads only on its first call.
        """
        if not self._ready and hasattr(type(self._inner), "dimension"):
            self._first(lambda: None)

    def _first(self, call: Callable[[], _T]) -> _T:
        with self._lock:
            if self._ready:
                return call()
            self._say(f"ctxbudget: loading the embedding model {self.name} ...")
            started = time.perf_counter()
            try:
                if hasattr(type(self._inner), "dimension"):
                    getattr(self._inner, "dimension")  # noqa: B009 - reading it loads the model
                    result = None
                else:
                    result = (call(),)  # the load happens in the first call
            except BaseException:
                self._say(" failed\n")  # the error line follows on a line of its own
                raise
            self._say(f" done in {time.perf_counter() - started:.1f} s\n")
            self._ready = True
        return call() if result is None else result[0]

    def _say(self, text: str) -> None:
        self._stream.write(text)
        self._stream.flush()

    def __repr__(self) -> str:
        return f"ProgressEmbedder({self._inner!r})"
