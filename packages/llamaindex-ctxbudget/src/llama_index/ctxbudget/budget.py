"""The budget of one `CtxBudgetMemory.get`: ``token_limit`` less what the caller sends beside.

Chat engines send messages of their own before the memory's and say how many tokens those
take (``initial_token_count``); ``CondensePlusContextChatEngine`` also sends the user's message
after them itself. The memory's messages get the rest (`call_budget`), so what ``get`` returns
is exactly what its report counts.

Without ``token_limit``, the limit is what a model has available: with a LlamaIndex ``llm``, the
smaller of its ``metadata.context_window`` less its ``metadata.num_output`` (the reply's room,
the core's `ctxbudget.core.budget.with_reply_room`, as LangChain's ``reply_room``) and
`LLM_SHARE` of its window (``ChatMemoryBuffer``'s share: a chat engine's retrieved context and
an agent's tools need the rest); without one, the registry's or a local server's window less a
reply reserve (`Budget.for_model`). `model_of` names the model
whose tokenizer counts, the LLM's when ctxbudget knows it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.base.llms.types import LLMMetadata

from ctxbudget import Budget, TokenCounter, lookup_model
from ctxbudget.core.budget import with_reply_room
from ctxbudget.core.numbers import count
from ctxbudget.errors import (
    BudgetExceededError,
    ConfigurationError,
    ConfigurationTypeError,
    InvalidBudgetError,
    UnknownModelError,
)

__all__ = [
    "DEFAULT_MODEL",
    "LLM_OPTION",
    "LLM_SHARE",
    "TOKEN_LIMIT",
    "call_budget",
    "llm_budget",
    "llm_metadata",
    "model_of",
    "token_limit_for",
    "token_limit_of",
]

DEFAULT_MODEL = "gpt-4o"
"""The model whose tokenizer counts when neither ``model=`` nor a known ``llm`` names one."""

LLM_OPTION = "CtxBudgetMemory.from_defaults(llm=)"
"""Where a refused ``llm`` (or its metadata) came from, as its caller wrote it."""

LLM_SHARE = 0.75
"""The most of an ``llm``'s window the memory takes by default: ``ChatMemoryBuffer``'s
``DEFAULT_TOKEN_LIMIT_RATIO``. ``CondensePlusContextChatEngine`` fits its retrieved context into
what the history leaves (LlamaIndex raises ``Chunk size ... is not positive`` when nothing is
left); an agent's tool schemas go there too."""

TOKEN_LIMIT = "CtxBudgetMemory(token_limit=)"
"""Where a refused ``token_limit`` came from, as its caller wrote it."""


def token_limit_of(value: object, where: str) -> int:
    """A token limit through the core's ``budget=`` boundary (`Budget.coerce`), as assemble's.

    Any integral type (numpy's too), positive, at most ``10**100``; a bool, text or a float
    (NaN, the infinities) is refused with the core's own message, prefixed with ``where`` (the
    argument as its caller wrote it, e.g. ``"CtxBudgetMemory(token_limit=)"``). A `Budget`
    gives what it has available.

    Raises:
        InvalidBudgetError: ``value`` is not a positive number of tokens.

    >>> token_limit_of(4000, "CtxBudgetMemory(token_limit=)")
    4000
    """
    return Budget.coerce(value, where=where).available  # type: ignore[arg-type]  # checked there


def token_limit_for(value: object, model: str, base_url: str | None, llm: object = None) -> int:
    """``token_limit`` checked (`token_limit_of`), or what the model has available when None.

    What is available: ``llm``'s window less its reply (`llm_budget`), at most `LLM_SHARE` of
    the window; without ``llm``,
    ``model``'s (`Budget.for_model`, asking the server at ``base_url``). A ``token_limit``
    given is the caller's number: nothing is taken from it for the reply.

    Raises:
        ConfigurationError: both ``llm`` and ``base_url`` without ``token_limit``.
        InvalidBudgetError: ``token_limit`` or the LLM's metadata cannot size a limit.
    """
    if value is not None:
        return token_limit_of(value, TOKEN_LIMIT)
    if llm is None:
        return Budget.for_model(model, base_url=base_url).available
    if base_url is not None:
        msg = (
            "CtxBudgetMemory.from_defaults: pass either llm= (its metadata.context_window "
            "sizes token_limit) or base_url= (the server there is asked), not both; or give "
            "token_limit= yourself"
        )
        raise ConfigurationError(msg)
    budget = llm_budget(llm, model)
    return min(budget.available, int(budget.window * LLM_SHARE))


def llm_metadata(llm: object) -> LLMMetadata:
    """``llm.metadata``: what a LlamaIndex LLM says of itself (window, output, name).

    Raises:
        ConfigurationTypeError: ``llm`` is not a LlamaIndex LLM (no `LLMMetadata`).
        ConfigurationError: the LLM's ``metadata`` refuses its own values (pydantic).
    """
    kind = type(llm).__name__
    try:
        metadata = getattr(llm, "metadata", None)
    except ValueError as exc:  # pydantic's ValidationError: the LLM's own values are invalid
        msg = f"{LLM_OPTION}: reading {kind}.metadata failed: {exc}; fix it, or pass token_limit="
        raise ConfigurationError(msg) from exc
    if not isinstance(metadata, LLMMetadata):
        msg = (
            f"{LLM_OPTION} must be a LlamaIndex LLM (its .metadata an LLMMetadata), got {kind}; "
            "pass e.g. OpenAI(model='gpt-4o'), or token_limit= and model= instead"
        )
        raise ConfigurationTypeError(msg)
    return metadata


def llm_budget(llm: object, model: str) -> Budget:
    """The budget of ``llm``'s window with room for its reply (`with_reply_room`).

    The window is ``metadata.context_window``; the reserve its ``metadata.num_output`` when
    positive, else (``-1``: ``MockLLM()``, ``OpenAI`` without ``max_tokens``) the default
    reserve of ``model`` in that window (`Budget.for_model`). Safety is 0, as
    ``Budget.for_model``'s.

    Raises:
        ConfigurationTypeError: ``llm`` is not a LlamaIndex LLM.
        InvalidBudgetError: the window is not a positive int (NaN, a float, a bool...), the
            output is not an int, or it leaves no room for the prompt in the window.

    >>> from llama_index.core.llms import MockLLM
    >>> llm_budget(MockLLM(max_tokens=256), "gpt-4o").available  # 3,900 - 256
    3644
    """
    metadata = llm_metadata(llm)
    where = f"{type(llm).__name__}.metadata"
    window = count(
        metadata.context_window,
        f"{LLM_OPTION}: {where}.context_window",
        error=InvalidBudgetError,
        hint="set the LLM's context_window to the model's window, or pass token_limit=",
    )
    output = count(
        metadata.num_output,
        f"{LLM_OPTION}: {where}.num_output",
        least=None,
        error=InvalidBudgetError,
        hint="set the LLM's max_tokens (its num_output), or pass token_limit=",
    )
    declared = output > 0  # -1 (MockLLM, OpenAI without max_tokens): the LLM does not say
    budget = Budget.for_model(model, window=window, reserve=0 if declared else None)
    return with_reply_room(
        budget,
        output if declared else None,
        source=f"{LLM_OPTION}: the LLM ({where}.num_output)",
        fix="lower its max_tokens (num_output), or pass token_limit= yourself",
    )


def model_of(model: str | None, llm: object) -> str:
    """``model``, else ``llm``'s ``metadata.model_name`` when ctxbudget knows it (registered).

    An unknown name (``"unknown"``: ``MockLLM``) counts with `DEFAULT_MODEL`'s tokenizer.

    Raises:
        ConfigurationTypeError: ``llm`` is not a LlamaIndex LLM.
    """
    if llm is None:
        return DEFAULT_MODEL if model is None else model
    name = llm_metadata(llm).model_name  # checked even when model= is given
    if model is not None:
        return model
    try:
        return lookup_model(name).name
    except UnknownModelError:
        return DEFAULT_MODEL


def call_budget(
    token_limit: int,
    initial_token_count: object,
    counter: TokenCounter,
    *,
    sent_after: str | Sequence[Any] | None = None,
) -> int:
    """The tokens one ``get`` may use: ``token_limit`` less the caller's own messages.

    With a prefix, the overhead of one more message (a system message's, as counted by
    ``counter.count_message``) is taken too: the caller's prefix is at least one message.
    ``sent_after`` is the content of a user message the caller sends after the memory's (its
    text, or its content parts when it has images): its whole cost (content and overhead) is
    taken.

    Raises:
        InvalidBudgetError: ``initial_token_count`` is not a count of 0 or more (any integral
            type, numpy's too), or leaves no room.
        BudgetExceededError: the message sent after does not fit in what is left.

    >>> call_budget(100, 0, TokenCounter.for_model("gpt-4o"))
    100
    >>> call_budget(100, 0, TokenCounter.for_model("gpt-4o"), sent_after="hello world")
    94
    """
    # The core's count boundary, as token_limit's: numpy ints taken; True, "3" or 5.0 refused.
    initial_token_count = count(
        initial_token_count,
        "CtxBudgetMemory.get(initial_token_count=)",
        least=0,
        error=InvalidBudgetError,
        hint="the tokens of the messages the caller sends before the memory's, e.g. 120",
    )
    overhead = 0
    if initial_token_count:
        # The caller's prefix is at least one more message: its overhead is billed too.
        overhead = counter.count_message("system", None)
    available = token_limit - initial_token_count - overhead
    if available <= 0:
        msg = (
            f"initial_token_count {initial_token_count:,} (+ {overhead} tokens of message "
            f"overhead) leaves nothing of token_limit {token_limit:,}; raise token_limit "
            "or shorten the messages sent before the memory's"
        )
        raise InvalidBudgetError(msg)
    if sent_after is None:
        return available
    after = counter.count_message("user", sent_after)
    if after >= available:
        msg = (
            f"the input message, which the caller sends after the memory's messages, needs "
            f"{after:,} tokens but only {available:,} of token_limit {token_limit:,} are left "
            f"(initial_token_count {initial_token_count:,} + {overhead} of overhead); raise "
            "token_limit or shorten the message"
        )
        raise BudgetExceededError(msg, required=after, available=available)
    return available - after
