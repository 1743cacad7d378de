"""Splitting an assembly into the prefix ctxbudget wrote and the caller's own messages.

Adapters that hand the framework back its own message objects (the LangChain middleware and
`budget_messages`) send the caller's kept messages as they are and everything ctxbudget rendered
before them (system prompt, pinned facts, memories) as one system message: one message costs
less overhead than two (some providers take only one). Their assembler renders and counts that
form (`one_system_layouts`), so the report's ``tokens_used`` is the count of what is sent.

When the caller has a system message of its own, they send it as it was given (a history item
of role ``system``, first and never pruned) and what ctxbudget rendered goes inside it, after its
text or as a text part of its own (``one_system_layouts(counter, joined=True)``): one message,
counted as sent.
"""

from __future__ import annotations

from collections.abc import Container

from ctxbudget.core.render import Layout
from ctxbudget.core.report import AssembledContext
from ctxbudget.errors import ConfigurationError
from ctxbudget.tokens.counter import TokenCounter

__all__ = ["one_system_layouts", "split_prefix"]


def one_system_layouts(counter: TokenCounter, *, joined: bool = False) -> dict[str, Layout]:
    """The ``layouts`` of a `ContextAssembler` whose prefix is sent as one system message.

    ``joined``: that message is sent inside the caller's own system message, the first history
    item (role ``system``, never pruned; a str content ends with a line break): see `Layout`.

    >>> from ctxbudget import ContextAssembler
    >>> counter = TokenCounter.for_model("gpt-4o")
    >>> assembler = ContextAssembler(counter, layouts=one_system_layouts(counter))
    >>> assembler.layout("messages").one_system
    True
    """
    return {"messages": Layout("messages", counter, one_system=True, joined=joined)}


def split_prefix(ctx: AssembledContext, own: Container[str]) -> tuple[str | None, list[str]]:
    """``(prefix, kept)``: the text rendered before the caller's messages, and their ids.

    Args:
        ctx: an assembly in the ``messages`` format, by an assembler with
            `one_system_layouts` (everything before the caller's messages in one message).
        own: the ids of the caller's own messages (rendered one message each, last).

    Returns:
        The prefix's text (None when nothing precedes the caller's messages) and the ids of
        the caller's messages that were included, in order. With a joined layout the prefix
        goes inside the first of those (the caller's system message).

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
    if head:
        return str(head[0]["content"]), kept
    # Joined: the prefix went inside the caller's system message; it is the prefix group.
    prefix = "".join(part.text for part in ctx._parts if part.group == "prefix")  # noqa: SLF001
    return (prefix or None), kept
