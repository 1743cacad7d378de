"""Items a caller offers beside the conversation it holds: `side_items` checks them.

The adapters' ``extra=`` (files, facts, notes) are packed and rendered with the system
prompt, never as messages of the conversation.
"""

from __future__ import annotations

from collections.abc import Iterable

from ctxbudget.core.ids import check_caller_id
from ctxbudget.core.items import ContextItem, Tier, tier_name
from ctxbudget.errors import InvalidItemError

__all__ = ["side_items"]

_SIDE_TIERS_REFUSED = {
    int(Tier.SYSTEM): "system",
    int(Tier.QUERY): "query",
    int(Tier.RECENT): "history",
}


def side_items(items: Iterable[object], *, where: str) -> list[ContextItem]:
    """Items a caller offers beside the conversation it holds (files, facts, notes), checked.

    The adapters take them as ``extra=``: they are packed and rendered with the system prompt
    (in the prefix or the context message), never as messages of the conversation, so they
    may not be system prompts, queries or history (``Tier.RECENT``).

    Raises:
        InvalidItemError: something other than a `ContextItem`, one of those tiers, or an
            id of ctxbudget's own items (``ctxbudget:...``); the message names ``where`` and
            the item's index.
    """
    out: list[ContextItem] = []
    for index, item in enumerate(items):
        if not isinstance(item, ContextItem):
            msg = (
                f"{where}[{index}] must be a ctxbudget.ContextItem (e.g. from "
                f"ctxbudget.file_item), got {type(item).__name__}"
            )
            raise InvalidItemError(msg)
        refused = _SIDE_TIERS_REFUSED.get(int(item.tier))
        if refused is not None:
            msg = (
                f"{where}[{index}] ({item.id!r}) has tier {tier_name(int(item.tier))}: a {refused} "
                "item belongs in the messages themselves; give it another tier (FILES, PINNED, "
                "RETRIEVED, ...)"
            )
            raise InvalidItemError(msg)
        check_caller_id(item.id, f"{where}[{index}]")  # "ctxbudget:pinned:0" is ctxbudget's own
        out.append(item)
    return out
