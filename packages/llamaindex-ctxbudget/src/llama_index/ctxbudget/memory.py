"""`CtxBudgetMemory`: a LlamaIndex memory whose `get` always fits its token limit.

Messages go to a `ctxbudget.ContextMemory` (Chroma and a local embedder), so they persist
and old turns come back by meaning. Each `get` hands the core assembler, as tiers: the system
messages put into memory (never cut), memory blocks and pinned facts, the newest exchanges, older
turns and documents that match the query, and summaries; what it returns fits ``token_limit``
counted with the model's own tokenizer.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import time
import uuid
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, TypeVar

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.bridge.pydantic import ConfigDict, Field, PrivateAttr
from llama_index.core.memory.memory import BaseMemoryBlock
from llama_index.core.memory.types import BaseMemory

from ctxbudget import AssembledContext, Budget, ContextItem, Shrink, Tier, TokenCounter
from ctxbudget.core.summaries import Summarizer
from ctxbudget.errors import ConfigurationError, InvalidBudgetError, InvalidItemError
from ctxbudget.memory.config import MemoryConfig
from ctxbudget.memory.context import ContextMemory
from ctxbudget.store.chroma_store import Record
from llama_index.ctxbudget._messages import (
    from_provider,
    from_record,
    role_of,
    text_of,
    text_of_blocks,
    to_stored,
)
from llama_index.ctxbudget.blocks import block_tier
from llama_index.ctxbudget.embeddings import CtxBudgetEmbedding

__all__ = ["CtxBudgetMemory"]

_T = TypeVar("_T")

SYSTEM_KEY = "li_system"
"""Metadata key of the pinned records that hold system messages (value: their order)."""


def _check_tiers(tiers: Mapping[str, int]) -> dict[str, int]:
    checked: dict[str, int] = {}
    for name, tier in tiers.items():
        if isinstance(tier, bool) or not isinstance(tier, int):
            msg = f"block_tiers[{name!r}] must be a Tier or an int, got {tier!r}"
            raise InvalidItemError(msg)
        if tier <= Tier.QUERY or tier == Tier.RECENT:
            msg = (
                f"block_tiers[{name!r}] = {tier}: a memory block cannot take the SYSTEM, QUERY or "
                "RECENT tier (those hold the system prompt, the query and the chat history); "
                "use Tier.PINNED (20) or a larger number"
            )
            raise InvalidItemError(msg)
        checked[name] = int(tier)
    return checked


def _input_text(value: str | ChatMessage | None) -> str | None:
    if isinstance(value, ChatMessage):
        return text_of(value)
    return value


def _run(coroutine: Coroutine[Any, Any, _T]) -> _T:
    """Run a coroutine from sync code, in a worker thread when an event loop is running."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


class CtxBudgetMemory(BaseMemory):
    """LlamaIndex memory over a ctxbudget `ContextMemory`: `get` always fits ``token_limit``.

    Build it with `from_defaults`. Every message `put` is stored (and embedded) in the session;
    `get` assembles, within ``token_limit`` tokens counted with ``model``'s tokenizer:

    * system messages put into memory, never cut (``Tier.SYSTEM``);
    * memory blocks: priority 0 never cut, priority ``p`` at ``Tier.PINNED + p`` (see
      `block_tier`), and pinned facts (`pin`) at ``Tier.PINNED``;
    * the newest exchange first, then as much recent history as fits, in whole exchanges with
      tool calls beside their results (never an orphan tool result);
    * older turns, the user's other sessions and documents that match the query
      (``Tier.RETRIEVED``) and stored summaries (`summarize`).

    Works wherever LlamaIndex takes a ``memory``: ``SimpleChatEngine``,
    ``CondensePlusContextChatEngine``, ``FunctionAgent`` and ``AgentWorkflow``.

    Attributes:
        token_limit: the most tokens the messages `get` returns may take (as billed: content,
            message overhead and reply priming).
        session_id: the conversation in the `ContextMemory`.
        model: the model whose tokenizer counts (a name `ctxbudget.lookup_model` knows).
        user_id: the user, for user-wide pinned facts and the user's other sessions.
        memory_blocks: LlamaIndex memory blocks read on every `get` (see `block_tier`).
        block_tiers: tiers by block name, overriding `block_tier`'s default.

    >>> memory = CtxBudgetMemory.from_defaults(token_limit=2048, path=tmp_path)  # doctest: +SKIP
    >>> memory.put(ChatMessage(role="user", content="I moved to Lisbon"))  # doctest: +SKIP
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    token_limit: int
    session_id: str
    model: str = "gpt-4o"
    user_id: str | None = None
    # Bare generic, as llama_index's Memory has it: pydantic would rebuild BaseMemoryBlock[Any].
    memory_blocks: list[BaseMemoryBlock] = Field(default_factory=list)  # type: ignore[type-arg]
    block_tiers: dict[str, int] = Field(default_factory=dict)

    _memory: ContextMemory = PrivateAttr()
    _owns_memory: bool = PrivateAttr(default=False)
    _counter: TokenCounter = PrivateAttr()
    _last: AssembledContext | None = PrivateAttr(default=None)

    def __init__(self, *, memory: ContextMemory, owns_memory: bool = False, **data: Any) -> None:
        """Wrap a `ContextMemory`; prefer `from_defaults`."""
        limit = data.get("token_limit")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
            msg = f"token_limit must be a positive int number of tokens, got {limit!r}"
            raise InvalidBudgetError(msg)
        data["block_tiers"] = _check_tiers(data.get("block_tiers") or {})
        super().__init__(**data)
        self._memory = memory
        self._owns_memory = owns_memory
        self._counter = memory.counter_for(self.model)

    @classmethod
    def class_name(cls) -> str:
        """The class name LlamaIndex serializes."""
        return "CtxBudgetMemory"

    @classmethod
    def from_defaults(  # type: ignore[override]  # keyword options, like llama_index Memory
        cls,
        *,
        token_limit: int | None = None,
        session_id: str | None = None,
        path: str | os.PathLike[str] | None = None,
        memory: ContextMemory | None = None,
        model: str = "gpt-4o",
        user_id: str | None = None,
        system_prompt: str | None = None,
        chat_history: Sequence[ChatMessage] | None = None,
        memory_blocks: Sequence[BaseMemoryBlock[Any]] = (),
        block_tiers: Mapping[str, int] | None = None,
        embedder: object = None,
        config: MemoryConfig | None = None,
        summarizer: Summarizer | None = None,
    ) -> CtxBudgetMemory:
        """A memory for one session, on a new `ContextMemory` in ``path`` or on ``memory``.

        Args:
            token_limit: the most tokens `get` may return; default: what ``model`` allows
                (``Budget.for_model(model).available``: its window minus a reply reserve).
            session_id: the conversation (default: a new random id).
            path: folder of the embedded Chroma store (default ``./.ctxbudget``).
            memory: an existing `ContextMemory` instead of ``path`` (not closed by `close`).
            model: the model whose tokenizer counts.
            user_id: the user (user-wide pinned facts, the user's other sessions).
            system_prompt: put as a system message: kept on every `get`, never cut.
            chat_history: replaces the session's stored messages (like `set`).
            memory_blocks: LlamaIndex memory blocks read on every `get`.
            block_tiers: tiers by block name (see `block_tier`).
            embedder: the embedder of a new `ContextMemory` (default: a `CtxBudgetEmbedding`,
                the local all-MiniLM-L6-v2 with a cache of recent vectors).
            config: candidate gathering of a new `ContextMemory` (`MemoryConfig`).
            summarizer: the summarizer of a new `ContextMemory` (e.g. `LLMSummarizer`).

        Raises:
            ValueError: both ``path`` and ``memory``, or ``embedder``/``config``/``summarizer``
                with ``memory`` (set those on the `ContextMemory`).
            InvalidBudgetError: ``token_limit`` is not a positive int.
            UnknownModelError: ``model`` is not registered in ctxbudget.
        """
        owns = memory is None
        if memory is not None:
            given = [
                name
                for name, value in (
                    ("path", path),
                    ("embedder", embedder),
                    ("config", config),
                    ("summarizer", summarizer),
                )
                if value is not None
            ]
            if given:
                msg = (
                    f"pass either memory= or {', '.join(given)}, not both: a given ContextMemory "
                    "already has its store, embedder, config and summarizer"
                )
                raise ConfigurationError(msg)
        else:
            if embedder is None:
                embedder = CtxBudgetEmbedding()  # the local model, with its vector cache
            memory = ContextMemory(
                path, embedder=embedder, model=model, config=config, summarizer=summarizer
            )
        if token_limit is None:
            token_limit = Budget.for_model(model).available
        built = cls(
            memory=memory,
            owns_memory=owns,
            token_limit=token_limit,
            session_id=session_id or uuid.uuid4().hex,
            model=model,
            user_id=user_id,
            memory_blocks=list(memory_blocks),
            block_tiers=dict(block_tiers or {}),
        )
        if chat_history is not None:
            built.set(list(chat_history))
        if system_prompt:
            built.put(ChatMessage(role=MessageRole.SYSTEM, content=system_prompt))
        return built

    # -- what LlamaIndex and users read -------------------------------------------------------
    @property
    def context_memory(self) -> ContextMemory:
        """The `ContextMemory` the messages are stored in."""
        return self._memory

    @property
    def counter(self) -> TokenCounter:
        """The token counter of ``model``."""
        return self._counter

    @property
    def tokenizer_fn(self) -> Callable[[str], list[int]]:
        """``model``'s tokenizer (chat engines count their prefix messages with it)."""
        return self._counter.encode

    @property
    def last_context(self) -> AssembledContext | None:
        """The assembly behind the last `get`: what was kept, cut and why (``.explain()``).

        Its last item is the query, also when `get` left the query message for the caller to
        send (see `get`).
        """
        return self._last

    # -- reading -----------------------------------------------------------------------------
    def get(  # noqa: A002 - the name LlamaIndex uses
        self, input: str | ChatMessage | None = None, **kwargs: Any
    ) -> list[ChatMessage]:
        """The messages to send, within ``token_limit``.

        Args:
            input: the message being answered. When it is the last message stored (a user
                message, as chat engines and agents put it before asking), it is returned last;
                otherwise it is only used to find relevant memories and its room is kept free
                for the caller, which sends it itself (``CondensePlusContextChatEngine``). With
                no input, the last stored user message is the query.
            **kwargs: ``initial_token_count``, tokens of messages the caller sends before these
                (one message's overhead is reserved with them); the rest goes to the memory
                blocks' ``aget``.

        Raises:
            InvalidBudgetError: ``initial_token_count`` leaves no room in ``token_limit``.
            BudgetExceededError: the system messages, priority-0 blocks and the query alone do
                not fit.
        """
        initial = kwargs.pop("initial_token_count", 0)
        extra = _run(self._ablock_items(input, kwargs)) if self.memory_blocks else []
        return self._get(input, initial, extra)

    async def aget(  # noqa: A002 - the name LlamaIndex uses
        self, input: str | ChatMessage | None = None, **kwargs: Any
    ) -> list[ChatMessage]:
        """Async `get`: memory blocks are awaited, store reads run in a worker thread."""
        initial = kwargs.pop("initial_token_count", 0)
        extra = await self._ablock_items(input, kwargs) if self.memory_blocks else []
        return await asyncio.to_thread(self._get, input, initial, extra)

    def _budget(self, initial_token_count: object) -> int:
        if (
            isinstance(initial_token_count, bool)
            or not isinstance(initial_token_count, int)
            or initial_token_count < 0
        ):
            msg = f"initial_token_count must be a non-negative int, got {initial_token_count!r}"
            raise InvalidBudgetError(msg)
        overhead = 0
        if initial_token_count:
            # The caller's prefix is at least one more message: its overhead is billed too.
            overhead = self._counter.per_message + self._counter.count("system")
        available = self.token_limit - initial_token_count - overhead
        if available <= 0:
            msg = (
                f"initial_token_count {initial_token_count:,} (+ {overhead} tokens of message "
                f"overhead) leaves nothing of token_limit {self.token_limit:,}; raise token_limit "
                "or shorten the messages sent before the memory's"
            )
            raise InvalidBudgetError(msg)
        return available

    def _get(
        self, input: str | ChatMessage | None, initial: object, extra: list[ContextItem]
    ) -> list[ChatMessage]:
        budget = self._budget(initial)
        last_records = self._memory.history(self.session_id, limit=1)
        last = last_records[-1] if last_records else None
        query = _input_text(input)
        if query is None or not query.strip():
            query = last.text if last is not None else ""
        has_query = bool(query.strip())
        pending = (
            has_query
            and last is not None
            and last.role == "user"
            and last.text.strip() == query.strip()
        )
        context = self._memory.assemble(
            self.session_id,
            # Nothing to answer yet: a stand-in query, never shown, and no searching by it.
            query if has_query else "(no message yet)",
            budget=budget,
            model=self.model,
            user_id=self.user_id,
            documents=has_query,
            other_sessions=None if has_query else False,
            extra=[*self._system_items(), *extra],
        )
        self._last = context
        messages = context.to_messages()
        if not pending:
            messages = messages[:-1]  # the query renders last; the caller sends it (or none)
        return [from_provider(message) for message in messages]

    async def _ablock_items(
        self, input: str | ChatMessage | None, block_kwargs: dict[str, Any]
    ) -> list[ContextItem]:
        records = await asyncio.to_thread(
            self._memory.history,
            self.session_id,
            limit=self._memory.config.recent_messages,
        )
        messages = [from_record(record) for record in records]
        text = _input_text(input)
        if text:
            messages.append(ChatMessage(role=MessageRole.USER, content=text))
        items: list[ContextItem] = []
        for block in self.memory_blocks:
            content = await block.aget(messages, session_id=self.session_id, **block_kwargs)
            items.extend(self._block_items(block, content))
        return items

    def _block_items(self, block: BaseMemoryBlock[Any], content: object) -> list[ContextItem]:
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
        never = block.priority <= 0 and block.name not in self.block_tiers
        tier = block_tier(block, self.block_tiers)
        items: list[ContextItem] = []
        for index, (role, text) in enumerate(parts):
            if not text.strip():
                continue
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

    def _system_records(self) -> list[Record]:
        found = self._memory.store.find(
            namespace=self._memory.namespace,
            kinds=["pinned"],
            session_id=self.session_id,
            where={SYSTEM_KEY: {"$gte": 0}},
        )
        return sorted(found, key=lambda r: (int(r.metadata.get(SYSTEM_KEY, 0)), r.id))

    def _system_items(self) -> list[ContextItem]:
        # Same id as the pinned record ContextMemory also offers: that copy is dropped.
        return [
            ContextItem(r.id, r.text, tier=Tier.SYSTEM, source="system")
            for r in self._system_records()
        ]

    def get_all(self) -> list[ChatMessage]:
        """Every stored message as it was put: system messages first, then the conversation."""
        systems = [
            ChatMessage(role=MessageRole.SYSTEM, content=record.text)
            for record in self._system_records()
        ]
        return systems + [from_record(r) for r in self._memory.history(self.session_id)]

    # -- writing -----------------------------------------------------------------------------
    def put(self, message: ChatMessage) -> None:
        """Store one message (a system message becomes a never-cut system instruction)."""
        self.put_messages([message])

    def put_messages(self, messages: list[ChatMessage]) -> None:
        """Store messages in order, in one batch; all are checked before any is written.

        Raises:
            InvalidItemError: a malformed tool call; nothing was written.
        """
        systems, stored = self._convert(messages)
        self._write(systems, stored)

    def set(self, messages: list[ChatMessage]) -> None:
        """Replace the session's messages (pinned facts stay)."""
        systems, stored = self._convert(messages)
        self._clear()
        self._write(systems, stored)

    def reset(self) -> None:
        """Forget the session's messages, system messages and summaries (pinned facts stay)."""
        self.clear()

    def clear(self, *, pins: bool = False) -> None:
        """`reset`, by the name both adapters use; ``pins=True`` also forgets pinned facts."""
        self._clear(pins=pins)

    def _convert(self, messages: Sequence[ChatMessage]) -> tuple[list[str], list[dict[str, Any]]]:
        systems: list[str] = []
        stored: list[dict[str, Any]] = []
        now = time.time()
        for index, message in enumerate(messages):
            if role_of(message) == "system":
                text = text_of(message)
                if text.strip():
                    systems.append(text)
                continue
            entry = to_stored(message, index)
            if entry is not None:
                entry["timestamp"] = now
                stored.append(entry)
        return systems, stored

    def _write(self, systems: list[str], stored: list[dict[str, Any]]) -> None:
        if systems:
            known = self._system_records()
            texts = {r.text for r in known}
            order = max((int(r.metadata.get(SYSTEM_KEY, 0)) for r in known), default=-1) + 1
            for text in systems:
                if text in texts:
                    continue
                self._memory.pin(
                    self.session_id,
                    text,
                    id=f"{self.session_id}:system:{order}",
                    metadata={SYSTEM_KEY: order},
                )
                texts.add(text)
                order += 1
        if stored:
            self._memory.add_messages(self.session_id, stored, user_id=self.user_id, progress=False)

    def _clear(self, *, pins: bool = False) -> None:
        # The system messages put into memory are stored as pins of their own: conversation.
        systems = [r.id for r in self._system_records()]
        if systems:
            self._memory.store.delete(
                systems, namespace=self._memory.namespace, session_id=self.session_id
            )
        self._memory.clear(self.session_id, pins=pins)

    # -- long-term memory --------------------------------------------------------------------
    def pin(self, text: str, *, user_wide: bool = False) -> str:
        """Pin a fact, offered on every `get` at ``Tier.PINNED``; returns its id.

        Args:
            text: the fact.
            user_wide: attach it to ``user_id`` (every session of the user), not the session.
        """
        if user_wide:
            if self.user_id is None:
                msg = "pin(user_wide=True) needs a user_id; pass user_id= to from_defaults"
                raise ConfigurationError(msg)
            return self._memory.pin(user_id=self.user_id, text=text)
        return self._memory.pin(self.session_id, text)

    def unpin(self, id: str) -> bool:  # noqa: A002 - the name ContextMemory uses
        """Remove a pinned fact of the session, or else of the user; True when it existed."""
        if self._memory.unpin(id, session_id=self.session_id):
            return True
        return self.user_id is not None and self._memory.unpin(id, user_id=self.user_id)

    def summarize(self, summarizer: Summarizer | None = None, **kwargs: Any) -> list[str]:
        """Fold old stretches of the session into stored summaries (`ContextMemory.summarize`).

        Pass an `LLMSummarizer` to summarize with a LlamaIndex LLM; returns the new summary ids.
        """
        return self._memory.summarize(self.session_id, summarizer, **kwargs)

    def close(self) -> None:
        """Close the `ContextMemory` if `from_defaults` opened it (idempotent)."""
        if self._owns_memory:
            self._memory.close()

    def __enter__(self) -> CtxBudgetMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
