"""What a reranker is (`MemoryConfig.reranker`): the kinds `as_reranker` takes.

A plain callable ``(query, texts) -> scores`` (sync or async), an object shaped like a
sentence-transformers ``CrossEncoder`` (it has ``.predict(pairs)``; the module is never
imported), or what an adapter registered a converter for (`register_converter`:
``langchain_ctxbudget.rerank`` for LangChain document compressors, ``llama_index.ctxbudget.rerank``
for LlamaIndex node postprocessors). The core imports no framework: the adapters teach it
theirs. The stage that runs it is `ctxbudget.memory.reading.rerank`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from ctxbudget.core.numbers import shown
from ctxbudget.errors import ConfigurationError, ConfigurationTypeError

__all__ = [
    "CrossEncoderReranker",
    "Reranker",
    "as_reranker",
    "check_wrapped",
    "framework_answer",
    "register_converter",
]

Converter = Callable[[object], "Reranker | None"]
_CONVERTERS: list[Converter] = []
_FRAMEWORKS = (
    ("compress_documents", "langchain_ctxbudget.rerank.compressor_reranker"),
    ("postprocess_nodes", "llama_index.ctxbudget.rerank.postprocessor_reranker"),
)


@runtime_checkable
class Reranker(Protocol):
    """Scores texts for a query: higher is more relevant, one finite number per text.

    >>> def overlap(query: str, texts: Sequence[str]) -> list[float]:
    ...     return [float(len(set(query.split()) & set(t.split()))) for t in texts]
    >>> as_reranker(overlap) is overlap
    True
    """

    def __call__(self, query: str, texts: Sequence[str], /) -> Sequence[float]:
        """One score per text (an async reranker returns an awaitable of them)."""
        ...


class CrossEncoderReranker:
    """A sentence-transformers ``CrossEncoder`` (any object with ``.predict(pairs)``).

    It scores the ``(query, text)`` pairs in one ``predict`` call; the module is not imported.
    """

    def __init__(self, model: Any) -> None:
        self.model = model

    def __call__(self, query: str, texts: Sequence[str], /) -> Sequence[float]:
        """``model.predict([(query, text), ...])``: one score per text."""
        scores = self.model.predict([(query, text) for text in texts])
        return list(scores)

    def __repr__(self) -> str:
        return f"CrossEncoderReranker({type(self.model).__name__})"


def register_converter(converter: Converter) -> None:
    """Teach `as_reranker` a kind of object: ``converter`` returns a `Reranker` or None.

    The adapters register theirs when imported (LangChain compressors, LlamaIndex node
    postprocessors); a converter registered twice is kept once.
    """
    if converter not in _CONVERTERS:
        _CONVERTERS.append(converter)


def as_reranker(obj: object) -> Reranker:
    """``obj`` as a `Reranker` (see the module docstring), or a `ConfigurationError`.

    Raises:
        ConfigurationError: ``obj`` is none of the kinds a reranker can be.
        ConfigurationTypeError: ``obj`` is a class, not one of its instances (``CrossEncoder``
            for ``CrossEncoder("...")``): taken, every call would have failed or returned it.
    """
    if isinstance(obj, CrossEncoderReranker):
        return obj
    if isinstance(obj, type):
        name = obj.__name__
        msg = (
            f"MemoryConfig.reranker got the class {name}, not a reranker: pass an instance "
            f"({name}(...)), or a function (query, texts) -> scores"
        )
        raise ConfigurationTypeError(msg)
    for converter in _CONVERTERS:
        found = converter(obj)
        if found is not None:
            return found
    if callable(getattr(obj, "predict", None)):
        return CrossEncoderReranker(obj)
    for method, wrapper in _FRAMEWORKS:
        if callable(getattr(obj, method, None)):
            msg = (
                f"MemoryConfig.reranker got a {type(obj).__name__} (it has .{method}): wrap it "
                f"with {wrapper}(...), which imports the framework the core does not"
            )
            raise ConfigurationError(msg)
    if callable(obj):
        return obj  # a (query, texts) -> scores callable
    msg = (
        "MemoryConfig.reranker must be a callable (query, texts) -> scores, a "
        "sentence-transformers CrossEncoder (an object with .predict), or a framework reranker "
        f"wrapped by its adapter; got {shown(obj)} ({type(obj).__name__})"
    )
    raise ConfigurationError(msg)


def check_wrapped(obj: object, *, wrapper: str, kind: str, method: str) -> None:
    """Refuse what an adapter's ``wrapper`` cannot wrap: a class, or an object without ``method``.

    Raises:
        ConfigurationTypeError: ``obj`` is not an instance with ``.method`` (a class, or
            another framework's reranker): names what came and what to pass.
    """
    if isinstance(obj, type) or not callable(getattr(obj, method, None)):
        msg = (
            f"{wrapper} takes a {kind} (an instance with .{method}), got {shown(obj)} "
            f"({type(obj).__name__})"
        )
        raise ConfigurationTypeError(msg)


def framework_answer(answer: object, item: type, *, where: str, hint: str = "") -> list[Any]:
    """A framework reranker's ``answer`` as a list of ``item``, or an error saying what came.

    ``where`` names the method that answered (``CohereRerank.compress_documents``); ``hint``
    says where a score goes. Raised on the reranker's thread, it is what the one warning of a
    failed reranker says.

    Raises:
        ConfigurationTypeError: the configured reranker answered something else (a
            `TypeError` too).
    """
    name = item.__name__
    if answer is None or isinstance(answer, str | bytes | item) or not hasattr(answer, "__iter__"):
        msg = f"{where} must return a sequence of {name}, got {shown(answer)}"
        raise ConfigurationTypeError(msg)
    out = list(answer)
    for n, one in enumerate(out):
        if not isinstance(one, item):
            msg = f"{where} must return {name} items{hint}, got a {type(one).__name__} at {n}: "
            raise ConfigurationTypeError(msg + shown(one))
    return out
