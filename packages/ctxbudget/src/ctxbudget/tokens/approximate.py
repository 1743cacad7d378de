"""``TokenCounter.approximate``: one name that builds the fallback counter and tells it apart.

On the class, ``TokenCounter.approximate(model=...)`` builds the counter for models with no local
tokenizer (it over-estimates on purpose); on a counter, ``counter.approximate`` is a bool, True
only for that fallback. `ApproximateAttribute` is the descriptor that gives the one name both
meanings, and `ApproximateConstructor` is what the class-side name is typed as.

Separate from `ctxbudget.tokens.counter`, which holds the counter itself: this is only how one of
its names resolves, and the counter module reads more simply without the typing machinery.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, overload

if TYPE_CHECKING:
    from ctxbudget.tokens.counter import TokenCounter

__all__ = ["ApproximateAttribute", "ApproximateConstructor"]


class ApproximateConstructor(Protocol):
    """The signature of ``TokenCounter.approximate(...)`` (keyword options only)."""

    def __call__(
        self,
        *,
        model: str | None = None,
        per_message: int = 3,
        per_name: int = 1,
        reply_priming: int = 3,
    ) -> TokenCounter:
        """Build the approximate counter (see `TokenCounter.approximate`)."""
        ...


class ApproximateAttribute:
    """``TokenCounter.approximate(...)`` builds the fallback; ``counter.approximate`` is a bool.

    The owner names the classmethod that builds the fallback (``constructor``) and the slot that
    holds each counter's flag (``slot``), as `functools.cached_property` is told its attribute:
    this module reads no name of the counter's it was not given.
    """

    def __init__(self, *, constructor: str, slot: str) -> None:
        self._constructor = constructor
        self._slot = slot

    def __set_name__(self, owner: type[TokenCounter], name: str) -> None:
        self._owner = owner

    @overload
    def __get__(self, obj: None, owner: type[TokenCounter]) -> ApproximateConstructor: ...

    @overload
    def __get__(self, obj: TokenCounter, owner: type[TokenCounter] | None = None) -> bool: ...

    def __get__(
        self, obj: TokenCounter | None, owner: type[TokenCounter] | None = None
    ) -> ApproximateConstructor | bool:
        if obj is None:
            built: ApproximateConstructor = getattr(owner or self._owner, self._constructor)
            return built
        flag: bool = getattr(obj, self._slot)
        return flag
