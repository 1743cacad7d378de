"""Memory blocks in a ctxbudget budget: which tier each LlamaIndex memory block's content takes.

`CtxBudgetMemory` reads its blocks on every ``get`` (`session_blocks`, `read_blocks`; from sync
code with `run_sync`) and offers what they return as items at the block's tier (`block_tier`, or
the tiers given by name, `check_block_tiers`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any, TypeVar

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.memory.memory import BaseMemoryBlock

from ctxbudget import ContextItem, Shrink, Tier
from ctxbudget.core.numbers import count, shown
from ctxbudget.core.unicode import lone_surrogate
from ctxbudget.errors import ConfigurationError, ConfigurationTypeError, InvalidItemError
from ctxbudget.memory.context import ContextMemory
from llama_index.ctxbudget.convert import from_record, role_of, text_of, text_of_blocks

__all__ = [
    "block_items",
    "block_tier",
    "check_blocks",
    "check_block_tiers",
    "read_blocks",
    "run_sync",
    "session_blocks",
]

_T = TypeVar("_T")


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


def check_block_tiers(tiers: Mapping[str, int]) -> dict[str, int]:
    """Tiers by block name, checked: ints, none of SYSTEM, QUERY or RECENT.

    Raises:
        InvalidItemError: a tier that is not an int, or one a memory block cannot take.
    """
    checked: dict[str, int] = {}
    for name, given in tiers.items():
        # The core's number boundary: numpy ints taken; True, "30" or 30.0 refused.
        tier = count(given, f"block_tiers[{name!r}]", least=None, error=InvalidItemError)
        if tier <= Tier.QUERY or tier == Tier.RECENT:
            msg = (
                f"block_tiers[{name!r}] = {tier}: a memory block cannot take the SYSTEM, QUERY or "
                "RECENT tier (those hold the system prompt, the query and the chat history); "
                "use Tier.PINNED (20) or a larger number"
            )
            raise InvalidItemError(msg)
        checked[name] = int(tier)
    return checked


def check_blocks(blocks: object) -> list[BaseMemoryBlock[Any]]:
    """Memory blocks as LlamaIndex's ``Memory`` takes them: blocks with unique, valid names.

    A block's name is its items' id (``block:<name>``): two blocks of one name would be one
    item, and a name that is not valid Unicode could not be logged or recorded.

    Raises:
        ConfigurationTypeError: not a list of LlamaIndex memory blocks.
        ConfigurationError: two blocks share a name, or a name is empty or not valid Unicode.
    """
    given = list(blocks) if isinstance(blocks, list | tuple) else None
    if given is None or not all(isinstance(b, BaseMemoryBlock) for b in given):
        msg = f"memory_blocks must be a list of LlamaIndex memory blocks, got {shown(blocks)}"
        raise ConfigurationTypeError(msg)
    seen: set[str] = set()
    for block in given:
        name = block.name
        problem = "is empty" if not name.strip() else lone_surrogate(name)
        if problem is None and name in seen:
            problem = "is the name of another block too (names must be unique, as in Memory)"
        if problem is not None:
            msg = f"memory block name {shown(name)} {problem}; give each block its own name"
            raise ConfigurationError(msg)
        seen.add(name)
    return given


def run_sync(coroutine: Coroutine[Any, Any, _T]) -> _T:
    """Run a coroutine from sync code, in a worker thread when an event loop is running."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


async def session_blocks(
    memory: ContextMemory,
    session_id: str,
    blocks: Sequence[BaseMemoryBlock[Any]],
    *,
    text: str | None,
    tiers: Mapping[str, int],
    block_kwargs: Mapping[str, Any],
) -> list[ContextItem]:
    """What ``blocks`` return for the session's recent messages and the input ``text``."""
    records = await memory.ahistory(session_id, limit=memory.config.recent_messages)
    messages = [from_record(record) for record in records]
    if text:
        messages.append(ChatMessage(role=MessageRole.USER, content=text))
    return await read_blocks(
        blocks, messages, session_id=session_id, tiers=tiers, block_kwargs=block_kwargs
    )


async def read_blocks(
    blocks: Sequence[BaseMemoryBlock[Any]],
    messages: list[ChatMessage],
    *,
    session_id: str,
    tiers: Mapping[str, int],
    block_kwargs: Mapping[str, Any],
) -> list[ContextItem]:
    """What each block returns for ``messages`` (``aget``), as items (`block_items`)."""
    items: list[ContextItem] = []
    for block in blocks:
        content = await block.aget(messages, session_id=session_id, **block_kwargs)
        items.extend(block_items(block, content, tiers))
    return items


def block_items(
    block: BaseMemoryBlock[Any], content: object, tiers: Mapping[str, int]
) -> list[ContextItem]:
    """A block's content as items at its tier (priority 0 without a given tier: never cut).

    A str is one item, a list of chat messages one item per message (with its role), a list of
    content blocks one item of their text.

    Raises:
        InvalidItemError: content of another type.
    """
    if not content:
        return []
    if isinstance(content, str):
        parts: list[tuple[str | None, str]] = [(None, content)]
    elif isinstance(content, list) and all(isinstance(c, ChatMessage) for c in content):
        parts = [(role_of(m), text_of(m)) for m in content]
    elif isinstance(content, list):
        parts = [(None, text_of_blocks(content))]
    else:
        msg = (
            f"memory block {block.name!r} returned a {type(content).__name__}; blocks must "
            "return a str, a list of content blocks or a list of chat messages"
        )
        raise InvalidItemError(msg)
    never = block.priority <= 0 and block.name not in tiers
    tier = block_tier(block, tiers)
    items: list[ContextItem] = []
    for index, (role, text) in enumerate(parts):
        if not text.strip():
            continue
        problem = lone_surrogate(text)
        if problem is not None:
            msg = f"memory block {block.name!r} returned text that {problem}"
            raise InvalidItemError(msg)
        items.append(
            ContextItem(
                # Not in ctxbudget's id space: ContextMemory.assemble takes ``extra`` as
                # caller items and refuses internal ids. LlamaIndex messages have no ids
                # (their records get generated ones), so none can take this one.
                f"block:{block.name}" if len(parts) == 1 else f"block:{block.name}:{index}",
                text,
                tier=tier,
                role=role,
                shrink=Shrink.NEVER if never else Shrink.TRUNCATE,
                source=f"block:{block.name}",
            )
        )
    return items
