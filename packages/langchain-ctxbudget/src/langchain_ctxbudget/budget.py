"""The budget of one model call: the model's window, less the reply, safety and tool schemas.

The middleware's options (``model``, ``budget``, ``reserve``, ``safety``) become a core
`ctxbudget.Budget`; on each call the tool schemas the request carries are added to its reserve
(`call_budget`). When no model is named, the chat model of the request says which it is
(`model_name`). The tier floors and caps come from the middleware's strategy over its memory's
(`ctxbudget.memory.policy.plan`): with neither, a budget given in tokens keeps the memory's
``retrieved_floor`` for memories, as `ContextMemory.assemble` does. A local server is asked
the window it serves the model with (`model_window`, `ctxbudget.detect_window`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from ctxbudget import (
    Budget,
    BudgetExceededError,
    InvalidBudgetError,
    TokenCounter,
    UnknownModelError,
    detect_window,
    lookup_model,
)
from ctxbudget.core.budget import Share, with_reply_room
from ctxbudget.tokens.names import parse_model_name
from ctxbudget.tokens.served import ollama_url
from langchain_ctxbudget.convert import chat_model_name, tool_tokens

__all__ = [
    "budget_tokens",
    "call_budget",
    "model_name",
    "model_output",
    "model_window",
    "reply_room",
    "window_budget",
]


def budget_tokens(value: object, where: str) -> int:
    """A budget given in tokens, through the core's ``budget=`` boundary (`Budget.coerce`).

    What `ContextMemory.assemble` does with its ``budget``: any integral type (numpy's too),
    positive, at most ``10**100``; a bool, text, a float (NaN, the infinities) refused with the
    core's own message, prefixed with ``where`` (the door, e.g. ``"CtxBudgetMiddleware"``).

    Raises:
        InvalidBudgetError: ``value`` is not a positive number of tokens.

    >>> budget_tokens(4096, "CtxBudgetMiddleware")
    4096
    """
    return Budget.coerce(value, where=where).window  # type: ignore[arg-type]  # checked there


def window_budget(
    model: str | None,
    *,
    window: int | None,
    reserve: int | None,
    safety: int,
    floors: Mapping[int, Share],
    caps: Mapping[int, Share] | None = None,
    base_url: str | None = None,
    declared: int | None = None,
) -> Budget:
    """The budget of ``window`` tokens, or else of ``model``'s window (`Budget.for_model`).

    ``window`` is the caller's (its reserve defaults to 0); ``declared`` the window the chat
    model declares (`model_window`), which takes the registry's default reserve as any window of
    ``model`` does. ``floors`` and ``caps`` are the tier shares
    (`ctxbudget.memory.policy.plan.Plan`); ``base_url`` is the local server to ask ``model``'s
    window from.

    Raises:
        UnknownModelError: neither a window nor a model, or a model ctxbudget does not know.
    """
    if window is None:
        if model is None:  # pragma: no cover - guarded by the callers
            msg = "no model to take the window from"
            raise UnknownModelError(msg)
        return Budget.for_model(
            model,
            window=declared,
            base_url=base_url if declared is None else None,
            reserve=reserve,
            safety=safety,
            floors=floors,
            caps=caps,
        )
    return Budget(
        window=window, reserve=reserve or 0, safety=safety, floors=floors, caps=caps or {}
    )


def reply_room(budget: Budget, chat_model: object) -> Budget:
    """``budget`` with room for as many tokens as ``chat_model`` is set to generate, at least.

    A provider checks the prompt against the window less the reply's ``max_tokens`` (Anthropic
    refuses a prompt that leaves less; a local server cuts the prompt's start): the reserve is at
    least the chat model's own setting (`model_output`), through the core's
    `ctxbudget.core.budget.with_reply_room`. Used when the caller gave neither a reserve nor a
    window.

    Raises:
        InvalidBudgetError: the chat model's setting leaves no room in the window.
    """
    return with_reply_room(
        budget,
        model_output(chat_model),
        source="the chat model",
        fix="lower its max_tokens, or give the middleware reserve= (and budget=) yourself",
    )


_OUTPUT_FIELDS = ("max_tokens", "max_completion_tokens", "max_output_tokens", "num_predict")


def model_output(chat_model: object) -> int | None:
    """How many tokens ``chat_model`` is set to generate, when it says (None: it does not).

    Its ``max_tokens`` (ChatAnthropic, ChatOpenAI's ``max_completion_tokens``),
    ``max_output_tokens`` (Google's) or ``num_predict`` (Ollama's), bound with ``.bind(...)``
    or set on the model; a positive int only.
    """
    bound = getattr(chat_model, "kwargs", None)
    for source in (bound if isinstance(bound, Mapping) else {}, None):
        for name in _OUTPUT_FIELDS:
            value = source.get(name) if source is not None else getattr(chat_model, name, None)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return None


def call_budget(budget: Budget, counter: TokenCounter, tools: Sequence[object]) -> Budget:
    """``budget`` with the tokens of the call's tool schemas added to its reserve.

    Raises:
        BudgetExceededError: the tool schemas alone take what the budget has available.
    """
    schemas = tool_tokens(counter, tools) if tools else 0
    if not schemas:
        return budget
    try:
        return dataclasses.replace(budget, reserve=budget.reserve + schemas)
    except InvalidBudgetError as exc:
        msg = (
            f"the {len(tools)} tool schemas need {schemas:,} tokens but only "
            f"{budget.available:,} are available (window {budget.window:,} - reserve "
            f"{budget.reserve:,} - safety {budget.safety:,}); use fewer or shorter tools "
            "or a larger window"
        )
        raise BudgetExceededError(msg, required=schemas, available=budget.available) from exc


def model_window(chat_model: object, *, base_url: str | None = None) -> int | None:
    """The window a chat model is served with: its ``num_ctx``, its server's, else its profile's.

    ``num_ctx`` is what an Ollama server actually serves (the model card's window is larger).
    Without it, the local server at ``base_url`` is asked (`ctxbudget.detect_window`: Ollama,
    vLLM, LM Studio), and a ``ChatOllama`` always asks its own (its ``base_url``, else
    ``OLLAMA_HOST``, else 127.0.0.1:11434). LangChain model profiles (``chat_model.profile``)
    give ``max_input_tokens``.

    Raises:
        WindowDetectionError: the server does not answer or does not serve the model.
    """
    served = getattr(chat_model, "num_ctx", None)
    if isinstance(served, int) and not isinstance(served, bool) and served > 0:
        return served
    name = chat_model_name(chat_model)
    ollama = type(chat_model).__name__ == "ChatOllama"
    if name is not None and (ollama or base_url is not None):
        url = base_url or ollama_url(getattr(chat_model, "base_url", None))
        return detect_window(f"ollama:{name}" if ollama else name, base_url=url).window
    if name is not None and parse_model_name(name).served:
        return None  # a profile gives the model card's window, not the server's
    profile = getattr(chat_model, "profile", None)
    limit = profile.get("max_input_tokens") if isinstance(profile, Mapping) else None
    if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0:
        return limit
    return None


def model_name(chat_model: object) -> str:
    """The name of a LangChain chat model (its ``model_name``, ``model`` or ``model_id``).

    A name the ctxbudget registry knows is given as registered; otherwise the model's own name
    (its window must then come from ``budget=`` or the model, `model_window`).

    Raises:
        UnknownModelError: the chat model names no model.
    """
    found = chat_model_name(chat_model)
    if found is not None and type(chat_model).__name__ == "ChatOllama":
        return f"ollama:{found}"  # its window is its num_ctx, never the model card's
    if found is not None and parse_model_name(found).served:
        # "ollama/llama3.1:8b" through ChatLiteLLM or any client: the server's window, never
        # the registry's (Budget.for_model refuses it without a window or base_url).
        return found
    if found is not None:
        try:
            return lookup_model(found).name
        except UnknownModelError:
            return found
    msg = (
        f"CtxBudgetMiddleware cannot tell which model {type(chat_model).__name__} is (it has no "
        "model_name, model or model_id); pass model='<name>' (e.g. 'gpt-4o' or "
        "'anthropic:claude-sonnet-4-5') and, for a model ctxbudget does not know, budget=<window>"
    )
    raise UnknownModelError(msg)
