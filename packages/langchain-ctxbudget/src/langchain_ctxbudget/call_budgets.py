"""The budget and counter of one model call of `CtxBudgetMiddleware`, from its options.

`CallBudgets` is the middleware's part that turns its options (``model``, ``budget``,
``reserve``, ``safety``, ``base_url``, the strategy's floors and caps) and each request's chat
model into the call's `Budget` and `TokenCounter`; `langchain_ctxbudget.budget` does the work.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

from ctxbudget import Budget, TokenCounter
from ctxbudget.core.budget import with_reply_room
from ctxbudget.memory.policy.plan import Plan
from langchain_ctxbudget.budget import (
    call_budget,
    model_name,
    model_output,
    model_window,
    reply_room,
    window_budget,
)
from langchain_ctxbudget.convert import counter_for

__all__ = ["CallBudgets", "response_tools"]


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

    def _call_budget(
        self,
        counter: TokenCounter,
        model: object,
        tools: Sequence[object],
        settings: Mapping[str, Any] | None = None,
    ) -> Budget:
        """The call's budget; ``settings``: the request's ``model_settings``, bound last."""
        budget = self._budget or self._make_budget(self._model_name(model), self._window(model))
        if self._reserve is None and self._max_tokens is None and self._given is None:
            # The reply the chat model is set to write: the request's settings (a middleware's
            # ``max_tokens``) are bound over the model's own, as create_agent binds them.
            bound = model_output(SimpleNamespace(kwargs=dict(settings or {})))
            if bound is None:
                budget = reply_room(budget, model)
            else:
                fix = "lower that max_tokens, or give the middleware reserve= (and budget=)"
                budget = with_reply_room(
                    budget, bound, source="the request's model_settings", fix=fix
                )
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


def response_tools(response_format: Any) -> list[object]:
    """The tools ``create_agent`` binds for a request's ``response_format``, to be counted.

    A `ToolStrategy` adds one tool per schema (what ``create_agent`` binds, built the same
    way). An `AutoStrategy` (or a bare schema) becomes a `ToolStrategy` or a provider's own
    structured output depending on the model, and a `ProviderStrategy` sends the same JSON
    schema as a response format: both are counted as the tool they would be (the schema is
    what the provider bills; the tool form's few extra tokens are never less than that).
    """
    if response_format is None:
        return []
    from langchain.agents.structured_output import (  # the agents extra, as the middleware
        OutputToolBinding,
        ProviderStrategy,
        ToolStrategy,
    )

    if isinstance(response_format, ProviderStrategy):
        specs = [response_format.schema_spec]
    elif isinstance(response_format, ToolStrategy):
        specs = list(response_format.schema_specs)
    else:  # AutoStrategy, or a schema given as it is
        schema = getattr(response_format, "schema", response_format)
        specs = list(ToolStrategy(schema=schema).schema_specs)
    return [OutputToolBinding.from_schema_spec(spec).tool for spec in specs]
