"""The budget and counter of one model call of `CtxBudgetMiddleware`, from its options.

`CallBudgets` is the middleware's part that turns its options (``model``, ``budget``,
``reserve``, ``safety``, ``base_url``, the strategy's floors and caps) and each request's chat
model into the call's `Budget` and `TokenCounter`; `langchain_ctxbudget.budget` does the work.
"""

from __future__ import annotations

from collections.abc import Sequence

from ctxbudget import Budget, TokenCounter
from ctxbudget.memory.policy.plan import Plan
from langchain_ctxbudget.budget import (
    call_budget,
    model_name,
    model_window,
    reply_room,
    window_budget,
)
from langchain_ctxbudget.convert import counter_for

__all__ = ["CallBudgets"]


class CallBudgets:
    """The budget and counter of each model call (a part of `CtxBudgetMiddleware`).

    Attributes:
        model: the model named by the middleware's options (None: each request's).
        _budget: the budget the options give, or None when each request's model says.
        _max_tokens: the window the options give (``budget=``).
        _declared: the window the chat model given as ``model=`` declares (`model_window`).
    """

    model: str | None
    _budget: Budget | None
    _given: Budget | None
    _max_tokens: int | None
    _declared: int | None
    _reserve: int | None
    _safety: int
    _base_url: str | None
    _plan: Plan

    def _make_budget(self, model: str | None, declared: int | None = None) -> Budget:
        return window_budget(
            model,
            window=self._max_tokens,
            declared=self._declared if self._declared is not None else declared,
            reserve=self._reserve,
            safety=self._safety,
            base_url=self._base_url,
            floors=self._plan.floors,
            caps=self._plan.caps,
        )

    def _call_budget(self, counter: TokenCounter, model: object, tools: Sequence[object]) -> Budget:
        budget = self._budget or self._make_budget(self._model_name(model), self._window(model))
        if self._reserve is None and self._max_tokens is None and self._given is None:
            budget = reply_room(budget, model)  # the reply the chat model is set to write
        return call_budget(budget, counter, tools)

    def _counter_of(self, model: object) -> TokenCounter:
        # With a window (given, or the chat model's), an unknown model counts approximately.
        known = (
            self._max_tokens is not None
            or self._declared is not None
            or self._window(model) is not None
        )
        return counter_for(self._model_name(model), "approximate" if known else "raise")

    def _window(self, model: object) -> int | None:
        return model_window(model, base_url=self._base_url)

    def _model_name(self, model: object) -> str:
        return self.model if self.model is not None else model_name(model)
