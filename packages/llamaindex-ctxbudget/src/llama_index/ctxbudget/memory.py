"""`CtxBudgetMemory`: a LlamaIndex memory whose `get` always fits its token limit.

Messages go to a `ctxbudget.ContextMemory` (Chroma and a local embedder), so they persist
and old turns come back by meaning. Each `get` hands the core assembler, as tiers: the system
messages put into memory (never cut), memory blocks and pinned facts, the newest exchanges, older
turns and documents that match the query, and summaries; what it returns fits ``token_limit``
counted with the model's own tokenizer (`llama_index.ctxbudget.assembly`).

Each ``get`` dispatches a `ContextAssembledEvent` (LlamaIndex instrumentation) and logs its
``explain()`` at DEBUG on this module's logger (`llama_index.ctxbudget.events`); ``to_dict`` and
``from_dict`` round-trip its settings and store (`llama_index.ctxbudget.opening`). The writes
(``put``, ``set``, ``reset``: retries stored once, the system prompt kept by ``set``) come from
`llama_index.ctxbudget.writing`, pinned facts and summaries (``pin``, ``unpin``, ``summarize``)
from `llama_index.ctxbudget.long_term`. The user's message being answered is returned with the
caller's own blocks (images), counted as sent (`llama_index.ctxbudget.current`).
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.bridge.pydantic import ConfigDict, Field, PrivateAttr
from llama_index.core.instrumentation import get_dispatcher  # type: ignore[attr-defined]
from llama_index.core.llms import LLM
from llama_index.core.memory.memory import BaseMemoryBlock
from llama_index.core.memory.types import BaseMemory

from ctxbudget import AssembledContext, ContextItem, TokenCounter
from ctxbudget.core.summaries import Summarizer
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.ordering import CallOrder
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.memory.policy.presets import StrategyLike
from ctxbudget.memory.reading.tool_steps import tool_steps_together
from llama_index.ctxbudget.assembly import assemble_get
from llama_index.ctxbudget.async_calls import AsyncCalls
from llama_index.ctxbudget.blocks import run_sync, session_blocks
from llama_index.ctxbudget.budget import model_of, token_limit_for
from llama_index.ctxbudget.convert import from_provider, from_record, input_text
from llama_index.ctxbudget.current import CurrentMessage, content_parts, has_own_blocks
from llama_index.ctxbudget.events import LastContext, report_assembly
from llama_index.ctxbudget.long_term import LongTermMemory
from llama_index.ctxbudget.opening import (
    STORE_KEY,
    checked_settings,
    from_dict_parts,
    open_memory,
    released_on_error,
    store_dict,
)
from llama_index.ctxbudget.storing import SYSTEM_KEY as SYSTEM_KEY  # re-exported: its old home
from llama_index.ctxbudget.storing import LastPut, system_records
from llama_index.ctxbudget.writing import ConversationWrites

__all__ = ["CtxBudgetMemory"]

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)


class CtxBudgetMemory(AsyncCalls, ConversationWrites, BaseMemory, LongTermMemory):
    """LlamaIndex memory over a ctxbudget `ContextMemory`: `get` always fits ``token_limit``.

    Build it with `from_defaults`. Every message `put` is stored (and embedded) in the session;
    `get` assembles, within ``token_limit`` tokens counted with ``model``'s tokenizer:

    * system messages put into memory: sent first, exactly as put, never cut; what ctxbudget
      adds goes inside the first, after a blank line (`llama_index.ctxbudget.system`);
    * memory blocks: priority 0 never cut, priority ``p`` at ``Tier.PINNED + p`` (see
      `block_tier`), and pinned facts (`pin`) at ``Tier.PINNED``;
    * the newest exchange first, then as much recent history as fits, in whole exchanges with
      tool calls beside their results (never an orphan tool result);
    * older turns, the user's other sessions and documents that match the query
      (``Tier.RETRIEVED``) and stored summaries (`summarize`).

    Works wherever LlamaIndex takes a ``memory``: ``SimpleChatEngine``,
    ``CondensePlusContextChatEngine``, ``FunctionAgent`` and ``AgentWorkflow``. Each `get`
    dispatches a `ContextAssembledEvent` carrying its `AssembledContext`; `to_dict` and
    `from_dict` round-trip the settings and the store's folder (not live objects: see
    `from_dict`).

    Attributes:
        token_limit: the most tokens the messages `get` returns may take (as billed: content,
            message overhead and reply priming).
        session_id: the conversation in the `ContextMemory`.
        model: the model whose tokenizer counts (a name `ctxbudget.lookup_model` knows).
        user_id: the user, for user-wide pinned facts and the user's other sessions (without
            it, neither joins). A session another user started is refused by every method that
            reads or writes it (`SessionOwnerError`, docs/memory.md).
        memory_blocks: LlamaIndex memory blocks read on every `get` (see `block_tier`).
        block_tiers: tiers by block name, overriding `block_tier`'s default.
        strategy: a preset name (``"chat"``, ``"rag"``...) or a `ctxbudget.Strategy` as a dict,
            merged over the `ContextMemory`'s on every `get` (`ctxbudget.memory.policy.strategy`).

    >>> memory = CtxBudgetMemory.from_defaults(token_limit=2048, path=tmp_path)  # doctest: +SKIP
    >>> memory.put(ChatMessage(role="user", content="I moved to Lisbon"))  # doctest: +SKIP
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    token_limit: int
    session_id: str
    model: str = "gpt-4o"
    user_id: str | None = None
    # Bare generic, as llama_index's Memory has it: pydantic would rebuild BaseMemoryBlock[Any].
    # Live objects (an LLM, a vector store): to_dict writes their names only.
    memory_blocks: list[BaseMemoryBlock] = Field(  # type: ignore[type-arg]
        default_factory=list, exclude=True
    )
    block_tiers: dict[str, int] = Field(default_factory=dict)
    strategy: str | dict[str, Any] | None = None

    _memory: ContextMemory = PrivateAttr()
    _owns_memory: bool = PrivateAttr(default=False)
    _counter: TokenCounter = PrivateAttr()
    _last: LastContext = PrivateAttr(default_factory=LastContext)
    _asked: str | None = PrivateAttr(default=None)  # the stored question last returned
    _current: CurrentMessage | None = PrivateAttr(default=None)  # its own blocks (images)
    _last_put: LastPut | None = PrivateAttr(default=None)  # what it stored last (retries)
    _mine: str | None = PrivateAttr(default=None)  # its question's record, while unanswered
    _order: CallOrder = PrivateAttr(default_factory=CallOrder)  # async calls in call order

    def __init__(self, *, memory: ContextMemory, owns_memory: bool = False, **data: Any) -> None:
        """Wrap a `ContextMemory`; prefer `from_defaults`."""
        super().__init__(**checked_settings(data))  # the core's boundary for token_limit
        self._memory = memory
        self._owns_memory = owns_memory
        self._counter = memory.counter_for(self.model)

    @classmethod
    def class_name(cls) -> str:
        """The class name LlamaIndex serializes."""
        return "CtxBudgetMemory"

    def to_dict(self, **kwargs: Any) -> dict[str, Any]:
        """The settings, the memory blocks' names and the store (JSON-ready; see `from_dict`).

        Waits until the messages put so far are stored, so the store it names holds them.
        """
        self._memory.flush()
        data = super().to_dict(**kwargs)
        data["memory_blocks"] = [block.name for block in self.memory_blocks]
        data[STORE_KEY] = store_dict(self._memory)
        return data

    @classmethod
    def from_dict(  # keyword options for what is not serialized
        cls, data: Mapping[str, Any], **kwargs: Any
    ) -> CtxBudgetMemory:
        """The memory `to_dict` described, its store re-opened (closed by `close`).

        Args:
            data: what `to_dict` (or ``json.loads`` of `to_json`) returned.
            **kwargs: ``memory`` (a `ContextMemory` to use instead of re-opening the store:
                required for a Chroma server or a given client), ``embedder`` (required when
                the store was written with another than the default), ``summarizer``,
                ``memory_blocks`` (required when the memory had blocks), and any field to
                override (``session_id=``...).

        Raises:
            ConfigurationError: something the dict cannot hold is missing (the message says
                what to pass), or ``data`` is another class's.
        """
        memory, owns, fields = from_dict_parts(data, kwargs, cls.class_name())
        return released_on_error(
            lambda: cls(memory=memory, owns_memory=owns, **fields), memory, owns
        )

    @classmethod
    def from_defaults(  # type: ignore[override]  # keyword options, like llama_index Memory
        cls,
        *,
        token_limit: int | None = None,
        session_id: str | None = None,
        path: str | os.PathLike[str] | None = None,
        memory: ContextMemory | None = None,
        model: str | None = None,
        llm: LLM | None = None,
        base_url: str | None = None,
        user_id: str | None = None,
        system_prompt: str | None = None,
        chat_history: Sequence[ChatMessage] | None = None,
        memory_blocks: Sequence[BaseMemoryBlock[Any]] = (),
        block_tiers: Mapping[str, int] | None = None,
        embedder: object = None,
        config: MemoryConfig | None = None,
        summarizer: Summarizer | None = None,
        strategy: StrategyLike | None = None,
    ) -> CtxBudgetMemory:
        """A memory for one session, on a new `ContextMemory` in ``path`` or on ``memory``.

        Args:
            token_limit: the most tokens `get` may return, as given (nothing is taken for the
                reply); default: ``llm``'s ``context_window`` less its ``num_output``, else
                what ``model`` allows (``Budget.for_model(model, base_url=base_url)``: its
                window minus a reply reserve). See `llama_index.ctxbudget.budget`.
            session_id: the conversation (default: a new random id).
            path: folder of the embedded Chroma store (default ``./.ctxbudget``).
            memory: an existing `ContextMemory` instead of ``path`` (not closed by `close`).
            model: the model whose tokenizer counts; default: ``llm``'s ``model_name`` when
                ctxbudget knows it, else ``"gpt-4o"``.
            llm: a LlamaIndex LLM, as ``ChatMemoryBuffer.from_defaults(llm=)``: sizes the
                default ``token_limit`` and names the model (read once, not kept).
            base_url: the local server of ``model`` (Ollama, vLLM, LM Studio) to ask its window
                from when ``token_limit`` is not given (`ctxbudget.detect_window`).
            user_id: the user (user-wide pinned facts, the user's other sessions).
            system_prompt: put as a system message: kept on every `get`, never cut.
            chat_history: replaces the session's stored messages (like `set`).
            memory_blocks: LlamaIndex memory blocks read on every `get`.
            block_tiers: tiers by block name (see `block_tier`).
            embedder: the embedder of a new `ContextMemory` (default: a `CtxBudgetEmbedding`,
                the local all-MiniLM-L6-v2 with a cache of recent vectors).
            config: candidate gathering of a new `ContextMemory` (`MemoryConfig`).
            summarizer: the summarizer of a new `ContextMemory` (e.g. `LLMSummarizer`).
            strategy: a preset, `ctxbudget.Strategy` or mapping, merged over the memory's.

        Raises:
            ConfigurationError: both ``path`` and ``memory``, or ``llm`` and ``base_url``, or
                ``embedder``/``config``/``summarizer`` with ``memory`` (set those on the
                `ContextMemory`).
            ConfigurationTypeError: ``llm`` is not a LlamaIndex LLM.
            InvalidBudgetError: ``token_limit`` is not a positive int, or ``llm``'s metadata
                cannot size one (its window, or a reply that leaves no room).
            UnknownModelError: ``model`` is not registered in ctxbudget.
            WindowDetectionError: the server at ``base_url`` cannot tell ``model``'s window.
        """
        model = model_of(model, llm)
        limit = token_limit_for(token_limit, model, base_url, llm)  # before a store is opened
        memory, owns = open_memory(
            memory, path=path, model=model, embedder=embedder, config=config, summarizer=summarizer
        )
        session = uuid.uuid4().hex if session_id is None else session_id  # "": refused
        fields = {"token_limit": limit, "session_id": session}
        fields.update(model=model, user_id=user_id, memory_blocks=list(memory_blocks))
        fields.update(block_tiers=dict(block_tiers or {}), strategy=strategy)

        def build() -> CtxBudgetMemory:  # a store it opened is closed if anything is refused
            built = cls(memory=memory, owns_memory=owns, **fields)
            built._start(chat_history, system_prompt)
            return built

        return released_on_error(build, memory, owns)

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
        """The assembly of this thread's or asyncio task's last `get` (``.explain()``).

        Kept per thread and task (`contextvars`): concurrent calls never see each other's, and
        a ``get`` run by an agent's workflow step is not seen from the caller's task. For one
        call's report wherever it ran, handle its `ContextAssembledEvent`. Its
        ``to_messages()`` are exactly the messages that `get` returned.
        """
        return self._last.get()

    # -- reading -----------------------------------------------------------------------------
    def get(  # noqa: A002 - the name LlamaIndex uses
        self, input: str | ChatMessage | None = None, **kwargs: Any
    ) -> list[ChatMessage]:
        """The messages to send, within ``token_limit``.

        Args:
            input: the message being answered, sent by the caller after these (chat engines):
                not returned (a stored copy neither: a retry), its room kept free; unless this
                memory's ``get()`` already returned it, still last stored (an agent's next step:
                returned last). None: the last stored user message (returned last when it is
                the last message stored). A question returned last that was put with images
                is the caller's own message (a copy), counted as sent. See
                `llama_index.ctxbudget.assembly` and `llama_index.ctxbudget.current`.
            **kwargs: ``initial_token_count``, tokens of messages the caller sends before these
                (one message's overhead is reserved with them); the rest goes to the memory
                blocks' ``aget``.

        Raises:
            InvalidBudgetError: ``initial_token_count`` leaves no room in ``token_limit``.
            BudgetExceededError: the system messages, priority-0 blocks and the query alone do
                not fit.
            InvalidItemError: the question returned last, or ``input``, holds a block
                ctxbudget cannot count (audio, video, a document).
        """
        initial = kwargs.pop("initial_token_count", 0)
        extra = run_sync(self._blocks(input, kwargs)) if self.memory_blocks else []
        return self._report(*self._get(input, initial, extra))

    def _get(
        self, input: str | ChatMessage | None, initial: object, extra: list[ContextItem]
    ) -> tuple[AssembledContext, CurrentMessage | None]:
        self._owner(write=False)
        given_parts = None  # an input message with images costs them (the caller sends it)
        if isinstance(input, ChatMessage) and has_own_blocks(input):
            given_parts = content_parts(input, "the input message of get()")
        context, question = assemble_get(
            self._memory,
            self.session_id,
            input_text(input),
            token_limit=self.token_limit,
            initial_token_count=initial,
            counter=self._counter,
            model=self.model,
            user_id=self.user_id,
            extra=extra,
            strategy=self.strategy,
            asked=self._asked,
            current=self._current,
            given_parts=given_parts,
            mine=self._mine,
        )
        if question.record_id is not None:  # an agent's next step may ask get(input=it)
            self._asked = question.record_id
        return context, question.own

    def _report(
        self, context: AssembledContext, own: CurrentMessage | None = None
    ) -> list[ChatMessage]:
        self._last.set(context)
        report_assembly(
            dispatcher,
            logger,
            context,
            component=self.class_name(),
            configured=f"token_limit={self.token_limit:,}",
            budget=self.token_limit,
            session_id=self.session_id,
        )
        sent = context.to_messages()
        if own is None:
            return [from_provider(message) for message in sent]
        # The pending question is rendered last, as its parts: the caller's own message.
        return [*(from_provider(message) for message in sent[:-1]), own.sent()]

    async def _blocks(
        self, input: str | ChatMessage | None, block_kwargs: dict[str, Any]
    ) -> list[ContextItem]:
        # Another user's session is refused before its messages reach a block (and its LLM).
        await self._memory.arun(self._owner, write=False)
        return await session_blocks(
            self._memory,
            self.session_id,
            self.memory_blocks,
            text=input_text(input),
            tiers=self.block_tiers,
            block_kwargs=block_kwargs,
        )

    def get_all(self) -> list[ChatMessage]:
        """Every stored message: system messages first, then the conversation as it was put.

        Two writers on one session (a user's two tabs) can store another turn's message between
        a tool call and its result; it comes after the result here (`tool_steps_together`), as
        `get` sends it and the LangChain chat history reads it.

        Raises:
            SessionOwnerError: the session was started by another user; nothing was read.
        """
        self._owner(write=False)
        systems = [
            ChatMessage(role=MessageRole.SYSTEM, content=record.text)
            for record in system_records(self._memory, self.session_id)
        ]
        records = tool_steps_together(self._memory.history(self.session_id))
        return systems + [from_record(r) for r in records]

    def close(self) -> None:
        """Close the `ContextMemory` if `from_defaults` opened it (idempotent)."""
        if self._owns_memory:
            self._memory.close()

    def __enter__(self) -> CtxBudgetMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
