"""The system message a call sends: the caller's own, unchanged, with what ctxbudget adds.

The caller's system message is counted as it is sent (an item of role ``system``, first and
never pruned: its blocks, name and all). What ctxbudget adds (the text of system messages later
in the conversation, pinned facts, memories, extra items) goes inside it
(`ctxbudget.core.split`, joined layout): after its text, past a blank line, when its content is
a str; as a text block of its own after its blocks otherwise (their fields, such as Anthropic's
``cache_control``, kept). When nothing is added the very message given is sent.

Providers take a system message only first (Anthropic refuses non-consecutive ones), so a
`SystemMessage` in the middle of the conversation is not sent in its place: its text goes
into the one system message, in order, never cut (as the system prompt; LlamaIndex's
`CtxBudgetMemory` does the same with the system messages put into it).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from langchain_core.messages import BaseMessage, SystemMessage

from ctxbudget import AssembledContext, ContextItem, Tier
from ctxbudget.core.ids import internal_id
from ctxbudget.core.items import Shrink
from ctxbudget.core.split import split_prefix
from langchain_ctxbudget.convert import item_of

__all__ = ["SEPARATOR", "SYSTEM_KEY", "SystemPlan", "exact_system", "lifted_item", "system_plan"]

SEPARATOR = "\n\n"
"""What separates a str system message from the text ctxbudget adds after it."""

SYSTEM_KEY = internal_id("system")
"""The key of the caller's system message among an assembly's items."""


@dataclass(frozen=True, slots=True)
class SystemPlan:
    """How the caller's system message is counted and sent.

    Attributes:
        message: the caller's system message (None: none, or a blank one).
        item: its item (first history item), counted as sent with what may be added.
        plain: for a str content counted with `SEPARATOR`: the item without it (sent when
            nothing is added).
        id: the id a new system message takes (that of a blank one given).
    """

    message: SystemMessage | None
    item: ContextItem | None
    plain: ContextItem | None
    id: str | None

    def items(self) -> list[ContextItem]:
        """The system message's item, if any."""
        return [] if self.item is None else [self.item]

    def sent(self, prefix: str | None) -> SystemMessage | None:
        """The system message sent, with ``prefix`` (what ctxbudget rendered) inside it."""
        if prefix is None:
            return self.message
        if self.message is None:
            return SystemMessage(content=prefix, id=self.id)
        content = self.message.content
        if isinstance(content, str):
            return self.message.model_copy(update={"content": content + SEPARATOR + prefix})
        block = {"type": "text", "text": prefix}
        return self.message.model_copy(update={"content": [*content, block]})


def system_plan(
    system: SystemMessage | None, *, adds: bool, keep_blank: bool = False
) -> SystemPlan:
    """The plan of ``system`` (``adds``: ctxbudget may add text to it on this call).

    A blank system message is not sent unless ``keep_blank`` (as none: what is added then
    makes a new one, with its id).
    """
    if system is None or (not keep_blank and not system.text.strip()):
        return SystemPlan(None, None, None, None if system is None else system.id)
    item = item_of(system, id=SYSTEM_KEY, index=0, shrink=Shrink.NEVER)
    if not adds or not isinstance(system.content, str):
        return SystemPlan(system, item, None, system.id)
    # Counted with the separator: the added text then adds up to what is sent.
    separated = system.model_copy(update={"content": system.content + SEPARATOR})
    return SystemPlan(
        system, item_of(separated, id=SYSTEM_KEY, index=0, shrink=Shrink.NEVER), item, system.id
    )


def lifted_item(message: BaseMessage, key: str) -> ContextItem | None:
    """The item of a system message in the middle of the conversation (None: blank).

    Its text goes into the one system message (tier ``SYSTEM``: never cut), under its key.
    """
    text = message.text
    if not text.strip():
        return None
    return ContextItem(key, text, tier=Tier.SYSTEM, source="system")


def exact_system(
    ctx: AssembledContext,
    plan: SystemPlan,
    items: Sequence[ContextItem],
    own: Collection[str],
    run: Callable[[list[ContextItem]], AssembledContext],
) -> AssembledContext:
    """``ctx``, or the assembly with the system message counted without the separator.

    That is when ``ctx`` adds nothing to a str system message counted with it (sent as given).
    Only reached when what was offered (memories, extra items) was all pruned.
    """
    if plan.plain is None or plan.item is None or split_prefix(ctx, own)[0] is not None:
        return ctx
    again = run([plan.plain if it is plan.item else it for it in items])
    # The token the separator freed may let an addition in: keep the first (a token over).
    return again if split_prefix(again, own)[0] is None else ctx
