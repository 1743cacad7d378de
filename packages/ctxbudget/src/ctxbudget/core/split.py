"""Splitting an assembly into the prefix ctxbudget wrote and the caller's own messages.

Adapters that hand the framework back its own message objects (the LangChain middleware and
`budget_messages`) send the caller's kept messages as they are and everything ctxbudget rendered
before them (system prompt, pinned facts, memories) as one system message: their texts add up
exactly, and one message costs less overhead than two (some providers take only one).
"""

from __future__ import annotations

from collections.abc import Container

from ctxbudget.core.report import AssembledContext

__all__ = ["split_prefix"]


def split_prefix(ctx: AssembledContext, own: Container[str]) -> tuple[str | None, list[str]]:
    """``(prefix, kept)``: the text rendered before the caller's messages, and their ids.

    Args:
        ctx: an assembly in the ``messages`` format.
        own: the ids of the caller's own messages (rendered one message each, last).

    Returns:
        The prefix's text (None when nothing precedes the caller's messages) and the ids of
        the caller's messages that were included, in order.
    """
    kept = [item.id for item in ctx.included if item.id in own]
    rendered = ctx.to_messages()
    head = rendered[: len(rendered) - len(kept)]
    prefix = "".join(str(message["content"]) for message in head) if head else None
    return prefix, kept
