"""Splitting an assembly into the prefix ctxbudget wrote and the caller's own messages.

Adapters that hand the framework back its own message objects (the LangChain middleware and
`budget_messages`) send the caller's kept messages as they are and everything ctxbudget rendered
before them (system prompt, pinned facts, memories) as one system message: one message costs
less overhead than two (some providers take only one). Their assembler renders and counts that
form (`one_system_layouts`), so the report's ``tokens_used`` is the count of what is sent.
"""

from __future__ import annotations

from collections.abc import Container

from ctxbudget.core.render import Layout
from ctxbudget.core.report import AssembledContext
from ctxbudget.errors import ConfigurationError
from ctxbudget.tokens.counter import TokenCounter

__all__ = ["one_system_layouts", "split_prefix"]


def one_system_layouts(counter: TokenCounter) -> dict[str, Layout]:
    """The ``layouts`` of a `ContextAssembler` whose prefix is sent as one system message.

    >>> from ctxbudget import ContextAssembler
    >>> counter = TokenCounter.for_model("gpt-4o")
    >>> assembler = ContextAssembler(counter, layouts=one_system_layouts(counter))
    >>> assembler.layout("messages").one_system
    True
    """
    return {"messages": Layout("messages", counter, one_system=True)}


def split_prefix(ctx: AssembledContext, own: Container[str]) -> tuple[str | None, list[str]]:
    """``(prefix, kept)``: the text rendered before the caller's messages, and their ids.

    Args:
        ctx: an assembly in the ``messages`` format, by an assembler with
            `one_system_layouts` (everything before the caller's messages in one message).
        own: the ids of the caller's own messages (rendered one message each, last).

    Returns:
        The prefix's text (None when nothing precedes the caller's messages) and the ids of
        the caller's messages that were included, in order.

    Raises:
        ConfigurationError: ``ctx`` renders more than one message before the caller's: its
            report would count a message overhead that is not sent.
    """
    kept = [item.id for item in ctx.included if item.id in own]
    rendered = ctx.to_messages()
    head = rendered[: len(rendered) - len(kept)]
    if len(head) > 1:
        msg = (
            f"the assembly renders {len(head)} messages before the caller's, which are sent as "
            "one: assemble with ContextAssembler(counter, layouts=one_system_layouts(counter)) "
            "so that tokens_used counts what is sent"
        )
        raise ConfigurationError(msg)
    return (str(head[0]["content"]) if head else None), kept
