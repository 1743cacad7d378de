"""Memory blocks in a ctxbudget budget: which tier each LlamaIndex memory block's content takes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llama_index.core.memory.memory import BaseMemoryBlock

from ctxbudget import Tier

__all__ = ["block_tier"]


def block_tier(block: BaseMemoryBlock[Any], tiers: Mapping[str, int] | None = None) -> int:
    """The ctxbudget tier of a LlamaIndex memory block.

    ``tiers[block.name]`` when given; else priority 0 ("never truncate") is ``Tier.PINNED`` and
    priority ``p >= 1`` ("1 = highest") is ``Tier.PINNED + p`` (at most ``Tier.PINNED + 9``), so
    a higher-priority block is always packed first, and every block before chat history older
    than the newest exchange.

    >>> from llama_index.core.memory import StaticMemoryBlock
    >>> block_tier(StaticMemoryBlock(name="facts", static_content="x", priority=2))
    22
    """
    if tiers and block.name in tiers:
        return int(tiers[block.name])
    if block.priority <= 0:
        return int(Tier.PINNED)
    return int(Tier.PINNED) + min(int(block.priority), 9)
