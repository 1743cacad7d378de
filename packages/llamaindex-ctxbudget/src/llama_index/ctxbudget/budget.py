"""The budget of one `CtxBudgetMemory.get`: ``token_limit`` less what the caller sends beside.

Chat engines send messages of their own before the memory's and say how many tokens those
take (``initial_token_count``); ``CondensePlusContextChatEngine`` also sends the user's message
after them itself. The memory's messages get the rest (`call_budget`), so what ``get`` returns
is exactly what its report counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctxbudget import Budget, TokenCounter
from ctxbudget.core.numbers import count
from ctxbudget.errors import BudgetExceededError, InvalidBudgetError

__all__ = ["TOKEN_LIMIT", "call_budget", "token_limit_for", "token_limit_of"]

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


def token_limit_for(value: object, model: str, base_url: str | None) -> int:
    """``token_limit`` checked (`token_limit_of`), or what ``model`` has available when None."""
    if value is None:
        return Budget.for_model(model, base_url=base_url).available
    return token_limit_of(value, TOKEN_LIMIT)


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
