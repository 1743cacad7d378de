"""LlamaIndex `Memory` (0.14) drops memory blocks in the wrong order and overflows its limit;
`CtxBudgetMemory`, on the same inputs, keeps the higher-priority content and fits.

What the installed source does (llama_index/core/memory/memory.py):

* ``BaseMemoryBlock.priority``: "0 = never truncate, 1 = highest priority, etc.".
* ``Memory._truncate_memory_blocks`` walks ``sorted(self.memory_blocks, key=lambda x:
  x.priority)`` ("Lower priority first") after skipping 0: priority 1, the highest, is cut first.
* It only ever cuts blocks: ``aget`` never cuts chat history (only ``put`` flushes it, above
  ``chat_history_token_ratio`` of the limit) nor priority-0 blocks, and it counts neither the
  memory template nor the per-message overhead, so what ``get`` returns can exceed the limit.
* It counts with ``get_tokenizer()``: tiktoken's ``gpt-3.5-turbo`` encoding, whatever the LLM.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator

import pytest
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.memory import FactExtractionMemoryBlock, Memory, StaticMemoryBlock
from llama_index.core.memory.memory import BaseMemoryBlock
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from ctxbudget import TokenCounter
from ctxbudget.memory.context import ContextMemory
from llama_index.ctxbudget import CtxBudgetMemory

from .helpers import prompt_tokens

LIMIT = 120
CORE = "You are talking to Ada, a chemist."
FACTS = ["Ada is allergic to peanuts.", "Ada lives in Lisbon.", "Ada's daughter is called Mia."]
TRIVIA = (
    "The office plant is a fern that was bought in 2019 at a market. It is watered on Mondays. "
    "The coffee machine on the second floor is broken again. The parking lot closes at nine. "
    "Someone keeps leaving umbrellas in the meeting room."
)
MESSAGES = [
    ("user", "Can you suggest a dinner recipe for tonight?"),
    ("assistant", "How about a vegetable curry with rice and a fresh salad on the side?"),
    ("user", "Sounds good, what should I add for protein in it?"),
]


def blocks() -> list[BaseMemoryBlock]:  # type: ignore[type-arg]
    """The same three blocks for both memories: never cut, highest priority, lower priority."""
    return [
        StaticMemoryBlock(name="core", static_content=CORE, priority=0),
        FactExtractionMemoryBlock(name="facts", facts=list(FACTS), priority=1),
        StaticMemoryBlock(name="trivia", static_content=TRIVIA, priority=2),
    ]


def messages() -> list[ChatMessage]:
    return [ChatMessage(role=MessageRole(role), content=text) for role, text in MESSAGES]


@pytest.fixture
async def engine() -> AsyncIterator[AsyncEngine]:
    """An in-memory SQLite for llama_index Memory's chat store, disposed after the test."""
    engine = create_async_engine("sqlite+aiosqlite:///:memory:")
    yield engine
    await engine.dispose()


def test_the_installed_source_sorts_blocks_lowest_number_first() -> None:
    source = inspect.getsource(Memory._truncate_memory_blocks)
    assert "key=lambda x: x.priority" in source  # ascending: priority 1 comes first
    assert "-x.priority" not in source
    field = BaseMemoryBlock.model_fields["priority"]
    assert "1 = highest priority" in (field.description or "")


async def test_llama_index_memory_cuts_the_highest_priority_block_and_overflows(
    engine: AsyncEngine, counter: TokenCounter
) -> None:
    memory = Memory.from_defaults(
        session_id="s", token_limit=LIMIT, memory_blocks=blocks(), async_engine=engine
    )
    await memory.aput_messages(messages())

    out = await memory.aget()

    system = out[0].content or ""
    assert CORE in system
    assert not any(fact in system for fact in FACTS)  # priority 1, "highest", is gone
    assert TRIVIA in system  # priority 2 is kept
    assert prompt_tokens(counter, out) > LIMIT  # and the result does not fit its limit


async def test_llama_index_memory_never_cuts_history_or_priority_zero(
    engine: AsyncEngine, counter: TokenCounter
) -> None:
    big_core = StaticMemoryBlock(name="core", static_content=CORE + " " + "Be precise. " * 60)
    memory = Memory.from_defaults(
        session_id="s", token_limit=LIMIT, memory_blocks=[big_core], async_engine=engine
    )
    await memory.aput_messages(messages())
    out = await memory.aget()
    assert [m.content for m in out[1:]] == [text for _, text in MESSAGES]  # all history kept
    assert prompt_tokens(counter, out) > 2 * LIMIT


async def test_llama_index_memory_counts_with_the_gpt_3_5_tokenizer(
    engine: AsyncEngine, counter: TokenCounter
) -> None:
    memory = Memory.from_defaults(session_id="s", token_limit=LIMIT, async_engine=engine)
    tokenize = memory.tokenizer_fn
    assert tokenize.func.__self__.name == "cl100k_base"  # type: ignore[attr-defined]
    text = "Olá! Combinámos jantar às oito no restaurante português perto da estação."
    assert len(tokenize(text)) != counter.count(text)  # gpt-4o counts o200k_base


async def test_ctxbudget_memory_keeps_the_higher_priority_block_on_the_same_inputs(
    engine: AsyncEngine, context_memory: ContextMemory, counter: TokenCounter
) -> None:
    llama = Memory.from_defaults(
        session_id="s", token_limit=LIMIT, memory_blocks=blocks(), async_engine=engine
    )
    await llama.aput_messages(messages())
    ours = CtxBudgetMemory.from_defaults(
        memory=context_memory, session_id="s", token_limit=LIMIT, memory_blocks=blocks()
    )
    await ours.aput_messages(messages())

    theirs = "\n".join(m.content or "" for m in await llama.aget())
    out = await ours.aget()
    kept = "\n".join(m.content or "" for m in out)

    assert prompt_tokens(counter, out) <= LIMIT
    assert CORE in kept
    assert all(fact in kept for fact in FACTS)  # priority 1 whole
    assert TRIVIA not in kept  # priority 2 only gets what is left
    assert out[-1].content == MESSAGES[-1][1]  # the message being answered
    # The same inputs, the opposite choice.
    assert not any(fact in theirs for fact in FACTS) and TRIVIA in theirs
