"""What a reranker is (`MemoryConfig.reranker`): the kinds `as_reranker` takes.

A plain callable ``(query, texts) -> scores`` (sync or async), an object shaped like a
sentence-transformers ``CrossEncoder`` (it has ``.predict(pairs)``; the module is never
imported), or what an adapter registered a converter for (`register_converter`:
``langchain_ctxbudget.rerank`` for LangChain document compressors, ``llama_index.ctxbudget.rerank``
for LlamaIndex node postprocessors). The core imports no framework: the adapters teach it
theirs. The stage that runs it is `ctxbudget.memory.reading.rerank`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence, Set
from decimal import Decimal
from numbers import Real
from typing import Any, Protocol, runtime_checkable

from ctxbudget.core.numbers import shown
from ctxbudget.errors import ConfigurationError, ConfigurationTypeError

__all__ = [
    "CrossEncoderReranker",
    "Reranker",
    "as_reranker",
    "check_wrapped",
    "framework_answer",
    "kept_scores",
    "register_converter",
    "reranker_scores",
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

    What it may return is `reranker_scores`'s rule: a list of numbers, or a numpy array or
    torch tensor of shape ``(n,)`` or ``(n, 1)``.

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
        scores: Sequence[float] = self.model.predict([(query, text) for text in texts])
        return scores  # as it came: an (n, 1) array too (`reranker_scores` flattens it)

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


_TODO = (
    "return one finite number per text, higher for more relevant: a list, or an array or "
    "tensor of shape (n,) or (n, 1)"
)


def reranker_scores(
    answer: object, size: int, *, reranker: str, returned: str = "returned", todo: str = _TODO
) -> list[float]:
    """``answer`` as ``size`` plain floats: the one rule for what a reranker returns.

    Every path takes a reranker's scores through it: sync and async rerankers
    (`ctxbudget.memory.reading.rerank`) and the adapters' scores of a framework's answer.
    Taken: a list or tuple of numbers (Python's, numpy's scalars, 0-d tensors, ``Decimal``),
    or anything with ``.shape`` and ``.tolist()`` (a numpy array, a torch tensor of any dtype,
    on any device) of shape ``(size,)`` or ``(size, 1)``; a score may be a one-element row
    (``[[0.2], [0.9]]``, a list of ``(1,)`` arrays).

    Args:
        answer: what the reranker returned.
        size: how many texts it was given.
        reranker: its name, as a message shows it.
        returned: the verb of the message (``"returned relevance scores"``).
        todo: what to do instead, ending the message.

    Raises:
        ConfigurationTypeError: ``answer`` is no sequence (None, a str, a dict, one number) or
            holds something other than numbers (a str, a bool, a row of two).
        ConfigurationError: another count than ``size``, a shape other than ``(size,)`` or
            ``(size, 1)`` (a length that says ``size`` but yields another count too), a NaN,
            an infinity, or an answer whose reading raises (its items, ``.shape``,
            ``.tolist()`` or ``float()``; chained). Each names the reranker, the answer and
            ``todo``. Nothing else escapes: what a reranker returns never fails the caller.

    >>> reranker_scores([[0.5], [2]], 2, reranker="mine")
    [0.5, 2.0]
    """
    cause: Exception | None = None
    try:
        out, why, typed = _read(answer, size)
    except Exception as exc:  # noqa: BLE001 - an answer that cannot be read is refused by name
        # A lazy sequence, a computed .shape, a tensor on the meta device, a number whose
        # float() raises: until 2026-12-02 that escaped and failed the memory's whole call.
        out, why, typed, cause = [], f"reading it raised {shown(exc)}", False, exc
    if why:
        said = " ".join(shown(answer).split())  # an array's repr spans lines
        msg = (
            f"the reranker {reranker} {returned} {said}, not one finite number per text "
            f"({why}): {todo}"
        )
        raise (ConfigurationTypeError if typed else ConfigurationError)(msg) from cause
    return out


def _read(answer: object, size: int) -> tuple[list[float], str, bool]:
    """(``answer`` as floats, "", False) or ([], why not, whether its type is wrong)."""
    values, why, typed = _values(answer, size)
    out: list[float] = []
    for n, value in enumerate(values):
        number, what = _score(value)
        if number is None:
            return [], f"{what} at {n}", what not in ("NaN", "inf", "-inf")
        out.append(number)
    return out, why, typed


def _values(answer: object, size: int) -> tuple[list[Any], str, bool]:
    """(``answer``'s ``size`` scores, "", False) or ([], why not, whether its type is wrong)."""
    values, why, typed = _listed(answer, size)
    if not why and len(values) != size:  # a length that lies: len() said ``size``
        return [], f"{len(values)} scores for {size} texts", False
    return values, why, typed


def _listed(answer: object, size: int) -> tuple[list[Any], str, bool]:
    shape = getattr(answer, "shape", None)
    if shape is not None and callable(getattr(answer, "tolist", None)):  # numpy, torch...
        dims = tuple(shape)
        if not dims:
            return [], "one number for all", True
        if len(dims) > 2 or (len(dims) == 2 and dims[1] != 1):  # a matrix
            return [], f"an array of shape {dims}, where ({size},) or ({size}, 1) was due", False
        if dims[0] != size:
            return [], f"{dims[0]} scores for {size} texts", False
        return list(answer.tolist()), "", False  # type: ignore[attr-defined]
    if isinstance(answer, Sequence) and not isinstance(answer, str | bytes | bytearray):
        if len(answer) != size:
            return [], f"{len(answer)} scores for {size} texts", False
        return list(answer), "", False
    if isinstance(answer, Real | Decimal):
        return [], "one number for all", True
    return [], f"a {type(answer).__name__}, not a list or an array", True


def _score(value: object) -> tuple[float | None, str]:
    """(``value`` as a finite float, "") or (None, what it is instead)."""
    if isinstance(value, list | tuple) or callable(getattr(value, "tolist", None)):
        inner = value if isinstance(value, list | tuple) else value.tolist()  # type: ignore[attr-defined]
        if isinstance(inner, list | tuple):  # a row: (1,) flattens, else no score
            if len(inner) != 1:
                return None, f"a row of {len(inner)}"
            if isinstance(inner[0], list | tuple | Set | Mapping):
                return None, "a nested row"
            inner = inner[0]
        value = inner
    if isinstance(value, bool) or not isinstance(value, Real | Decimal):
        return None, f"a {type(value).__name__}"
    try:
        number = float(value)
    except (ValueError, OverflowError, TypeError):  # Decimal('sNaN'), 10**400
        return None, f"{shown(value)}, which no float holds"
    if math.isnan(number):
        return None, "NaN"
    if math.isinf(number):
        return None, "inf" if number > 0 else "-inf"
    return number, ""


def kept_scores(
    kept: Sequence[tuple[int, object]],
    size: int,
    *,
    reranker: str,
    returned: str,
    todo: str,
    unmatched: str = "",
) -> list[float]:
    """Each of ``size`` texts' score from a framework reranker's answer, matched to its texts.

    ``kept``: (the text's index, the score the framework gave it or None) for each item of
    the answer, in the answer's order. The scores when every kept item has one (through
    `reranker_scores`, naming ``reranker``), else each item's place in the answer (scores on
    some items only are not on one scale with places); a text not in the answer scores below
    every kept one. Both adapters' wrappers (a LangChain compressor, a LlamaIndex
    postprocessor) read their answers with it.

    ``unmatched``: what an item of the answer that matches none of the texts was (its text
    changed and what named its text lost; "" when every item matched one, or repeated one):
    the answer cannot be read, and the ranking is left as it was rather than quietly read
    without it.

    Raises:
        ConfigurationError: a score that is no finite number, or an ``unmatched`` item.
    """
    if unmatched:
        msg = (
            f"{reranker} returned {unmatched}: its score cannot be given to any text, so the "
            "answer is not used; keep each item's text, or what names its text, as given"
        )
        raise ConfigurationError(msg)
    given = [score for _, score in kept]
    if given and all(score is not None for score in given):
        numbers = reranker_scores(
            given, len(given), reranker=reranker, returned=returned, todo=todo
        )
    else:
        numbers = [float(len(kept) - place) for place in range(len(kept))]
    found = {index: number for (index, _), number in zip(kept, numbers, strict=True)}
    lowest = min(found.values(), default=1.0)
    floor = lowest - max(1.0, abs(lowest) * 1e-9)  # below it at any magnitude (1e17 - 1 is 1e17)
    if math.isinf(floor):  # the lowest float there is: nothing is below it
        floor = lowest
    return [found.get(n, floor) for n in range(size)]
