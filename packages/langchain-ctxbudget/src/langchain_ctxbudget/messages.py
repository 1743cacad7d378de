"""`budget_messages`: a drop-in for ``langchain_core.messages.trim_messages`` built on the core.

The messages become `ctxbudget.ContextItem`s (the leading system message is never pruned,
``pinned`` facts come next, then the conversation as whole exchanges, newest first), the core
`ContextAssembler` packs them, and the messages it kept come back as the very objects given.
History is cut in steps by default (``history_trim="step"``, `ctxbudget.core.trimming`), so the
calls of a growing conversation share a prefix a provider's prompt cache reuses.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from functools import partial, wraps
from typing import Any, Concatenate, Literal, ParamSpec, Protocol, TypeVar, cast, overload

from langchain_core.language_models import BaseLanguageModel
from langchain_core.messages import AIMessage, BaseMessage, ChatMessage, HumanMessage, SystemMessage
from langchain_core.messages.utils import MessageLikeRepresentation, convert_to_messages
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables import Runnable, RunnableLambda

from ctxbudget import Budget, ContextAssembler, ContextItem, Tier, TokenCounter
from ctxbudget.core.ids import internal_id
from ctxbudget.core.items import Shrink
from ctxbudget.core.render import message_of
from ctxbudget.core.side_items import side_items
from ctxbudget.core.split import one_system_layouts, split_prefix
from ctxbudget.core.trimming import DEFAULT_TRIM_STEP, TrimMode, TrimOptions, trim_options
from ctxbudget.errors import ConfigurationError, InvalidItemError
from ctxbudget.tokens.images import IMAGE_TOKENS_MAX
from langchain_ctxbudget.convert import item_of, resolve_counter
from langchain_ctxbudget.model_request import never_pruned, own_keys, pinned_facts
from langchain_ctxbudget.observe import CallContext, budget_summary
from langchain_ctxbudget.system import SYSTEM_KEY, exact_system, lifted_item, system_plan

__all__ = ["budget_messages"]

logger = logging.getLogger(__name__)

MessageType = str | type[BaseMessage]
"""A message type as trim_messages takes it: ``"human"``, ``"ai"``... or a message class."""

_P = ParamSpec("_P")
_R_co = TypeVar("_R_co", covariant=True)
_Input = Sequence[MessageLikeRepresentation] | PromptValue

_ASSEMBLERS: dict[str, ContextAssembler] = {}


class _RunnableSupport(Protocol[_P, _R_co]):
    @overload
    def __call__(
        self, messages: None = None, *args: _P.args, **kwargs: _P.kwargs
    ) -> Runnable[_Input, _R_co]: ...

    @overload
    def __call__(self, messages: _Input, *args: _P.args, **kwargs: _P.kwargs) -> _R_co: ...

    def __call__(
        self, messages: _Input | None = None, *args: _P.args, **kwargs: _P.kwargs
    ) -> _R_co | Runnable[_Input, _R_co]: ...


def _runnable_support(
    func: Callable[Concatenate[_Input, _P], _R_co],
) -> _RunnableSupport[_P, _R_co]:
    """Called without messages, return a Runnable (as trim_messages does)."""

    @wraps(func)
    def wrapped(
        messages: _Input | None = None, *args: _P.args, **kwargs: _P.kwargs
    ) -> _R_co | Runnable[_Input, _R_co]:
        if messages is not None:
            return func(messages, *args, **kwargs)
        return RunnableLambda(partial(func, **kwargs), name=func.__name__)

    return cast("_RunnableSupport[_P, _R_co]", wrapped)


@_runnable_support
def budget_messages(
    messages: _Input,
    *,
    max_tokens: int,
    model: str | BaseLanguageModel[Any] = "gpt-4o",
    token_counter: str | TokenCounter | BaseLanguageModel[Any] | Callable[..., int] | None = None,
    strategy: Literal["last"] = "last",
    include_system: bool = True,
    start_on: MessageType | Sequence[MessageType] | None = "human",
    end_on: MessageType | Sequence[MessageType] | None = None,
    allow_partial: Literal[False] = False,
    text_splitter: None = None,
    pinned: Sequence[str] = (),
    extra: Sequence[ContextItem] = (),
    history_trim: TrimMode = "step",
    trim_step: float = DEFAULT_TRIM_STEP,
    previous: Sequence[MessageLikeRepresentation] | None = None,
    on_context: Callable[[CallContext], object] | None = None,
) -> list[BaseMessage]:
    """Keep the newest whole exchanges that fit ``max_tokens``, counted exactly.

    A drop-in for ``trim_messages(strategy="last", include_system=True, start_on="human")``
    (see docs/langchain.md for the table of equivalent settings). The differences are on
    purpose: counts are exact (the model's tokenizer and the provider's per-message overhead,
    tool calls included); the system message, ``pinned`` facts and the newest human message
    the user wrote (the question; with a harness's notification last, that one too:
    `model_request.never_pruned`) are never dropped (an error says so when they alone do not
    fit, where trim_messages returns more than ``max_tokens``, or no question at all);
    history is kept as whole exchanges (a user message and everything that answers it), so it
    never starts with an orphan tool result and never separates a tool call from its result;
    and it is cut in steps (``history_trim="step"``), so that as a conversation grows the calls
    share a prefix a provider's prompt cache reuses (``history_trim="message"`` keeps the
    newest exchanges that fit, as trim_messages does).

    Multimodal messages are kept as given: text blocks are counted exactly, images by OpenAI's
    rule (`ctxbudget.image_tokens`, size from the block's ``width``/``height`` or the header of
    inline base64 data); an image of unknown size counts as the most an image can cost (1,445
    tokens, logged at INFO). Reasoning blocks (Anthropic ``thinking``, OpenAI and LangChain
    ``reasoning``) are kept as given and count as the text they hold. Other blocks (audio,
    files...) raise `InvalidItemError`. A `SystemMessage` after the first is not returned in
    its place (providers take a system message only first): its text goes into the system
    message, after the given one's, never cut. A ``ChatMessage`` of role ``user``, ``system``
    (``developer``) or ``assistant`` is taken for the message it stands for.

    Called without ``messages`` it returns a Runnable, for LCEL:
    ``prompt | budget_messages(max_tokens=2000) | model``.

    Args:
        messages: the conversation (messages, message-likes or a PromptValue), oldest first.
        max_tokens: the most the returned messages may cost, reply priming included
            (``TokenCounter.count_messages`` of their OpenAI form never exceeds it).
        model: the model whose tokenizer counts: a name as the ctxbudget registry or
            ``init_chat_model`` spells it (``"gpt-4o"``, ``"openai:gpt-4o"``) or the chat model
            itself (its ``model_name``/``model``; a model the registry does not know counts
            approximately).
        token_counter: instead of ``model``: a model name, a chat model, a
            `ctxbudget.TokenCounter`, ``"approximate"`` or LangChain's
            ``count_tokens_approximately`` (the approximate counter). Other functions are
            refused (they cannot count the pieces the core renders).
        strategy: only ``"last"``: keeping the oldest messages would drop the current question.
        include_system: keep a `SystemMessage` at index 0 whatever happens (never pruned).
            When False it is an ordinary message of the history.
        start_on: ``"human"`` (the default; also ``HumanMessage`` or ``["human"]``) drops the
            messages before the first human one; None keeps them when everything fits. Whole
            exchanges always start on a human message, so no other type can be honoured.
        end_on: drop messages after the last one of these types first (as trim_messages).
        allow_partial: only False: a message is kept or dropped whole.
        text_splitter: not supported (it only serves ``allow_partial``).
        pinned: facts that are always sent, in the system message after its text. The system
            message returned is then a copy of the given one with them after its text (past
            a blank line; a text block of its own after a block content), every field kept.
        extra: more items offered beside the conversation, as they are: files and folder
            trees (`ctxbudget.file_item`, `ctxbudget.folder_tree_item`), facts, notes. Those
            that fit go in the system message (as ``pinned``), by tier and score; the report says
            why each other one was pruned. Not system, query or history items.
        history_trim: ``"step"`` cuts history only at anchors that stay put as messages are
            appended (kept history is between ``max_tokens - step`` and ``max_tokens``, less
            the system message); ``"message"`` keeps the newest exchanges that fit.
        trim_step: the share of history's room one step drops (`ctxbudget.core.trimming`).
        previous: the messages the previous call returned: the report's ``prefix_tokens``
            counts the leading tokens this call repeats exactly (what a prompt cache reuses).
        on_context: called with the call's `CallContext` (its `AssembledContext` as
            ``context``: ``explain()``, ``prefix_tokens``; no thread, session or user).

    Returns:
        The kept messages in order: the given objects (the system message a copy when
        something is added to it).

    Raises:
        BudgetExceededError: the system message, the pinned facts and the newest human
            message alone exceed max_tokens.
        InvalidBudgetError: max_tokens is not a positive int.
        InvalidItemError: a message that is not a chat message, has an unknown role, or has
            a content block that is neither text nor an image (the error names the message
            and the block).
        ValueError: an unsupported trim_messages option (the message says why), an unknown
            ``history_trim``, a ``trim_step`` outside (0, 1), or ``pinned`` that is not a list
            of non-empty texts (`ConfigurationError`).

    >>> from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
    >>> history = [SystemMessage("Be brief."), HumanMessage("Hi"), AIMessage("Hello!"),
    ...            HumanMessage("What is 2 + 2?")]
    >>> print([m.type for m in budget_messages(history, max_tokens=30)])
    ['system', 'human']
    """
    _check_options(strategy, allow_partial, text_splitter, start_on)
    if on_context is not None and not callable(on_context):
        msg = f"on_context must be a function of one CallContext, got {on_context!r}"
        raise ConfigurationError(msg)
    trim = trim_options(history_trim, trim_step)
    pinned = pinned_facts(pinned, "budget_messages")
    extras = side_items(extra, where="extra")  # ids of ctxbudget's own refused there
    counter = resolve_counter(token_counter, model)
    given = _messages_of(messages)
    if end_on is not None:
        while given and not any(_is_type(m, end_on) for m in (given[-1], _by_role(given[-1]))):
            given.pop()
    views = [_by_role(m) for m in given]  # what each is: a ChatMessage by its role
    system: SystemMessage | None = None
    if include_system and views and isinstance(views[0], SystemMessage):
        system = cast("SystemMessage", given[0])  # a ChatMessage(role="system") is sent as one
        given, views = given[1:], views[1:]
    if start_on is not None:
        first = next((i for i, m in enumerate(views) if isinstance(m, HumanMessage)), len(views))
        given, views = given[first:], views[first:]

    offset = 1 if system is not None else 0
    lifts = [  # system messages later on go into the one system message
        isinstance(m, SystemMessage) and (position > 0 or include_system)
        for position, m in enumerate(views)
    ]
    plan = system_plan(system, adds=bool(pinned or extras or any(lifts)), keep_blank=True)
    items: list[ContextItem] = plan.items()
    originals: dict[str, BaseMessage] = {}
    always = never_pruned(views)  # the question (and a notification after it): never pruned
    for position, message in enumerate(given):
        # Keyed by position in ctxbudget's own id space: the caller's message ids play no part.
        index = position + offset
        key = _key(index)
        if lifts[position]:
            items.extend(item for item in [lifted_item(message, key)] if item is not None)
            continue
        shrink = Shrink.NEVER if position in always else Shrink.DROP
        items.append(item_of(message, id=key, index=index, shrink=shrink))
        originals[key] = message
    items.extend(
        ContextItem(
            internal_id("pinned", i), fact, tier=Tier.PINNED, shrink=Shrink.NEVER, source="pinned"
        )
        for i, fact in enumerate(pinned)
    )
    items.extend(extras)
    assembler = _assembler(counter, trim, joined=plan.item is not None)
    run = partial(assembler.assemble, budget=Budget.coerce(max_tokens), previous=_sent(previous))
    own = own_keys(originals, plan)
    ctx = exact_system(run(items), plan, items, own, run)
    if on_context is not None:
        on_context(CallContext(ctx, None, None, None, budget_summary(ctx)))
    if ctx.estimated:
        logger.info(
            "budget_messages: images of unknown size counted as the most an image can cost "
            "(%d tokens) in messages %s; give image blocks a width and height to count them "
            "exactly",
            IMAGE_TOKENS_MAX,
            ", ".join(key.removeprefix(_key_prefix) for key in ctx.estimated),
        )
    prefix, kept_ids = split_prefix(ctx, own)
    sent = plan.sent(prefix)
    kept = [originals[key] for key in kept_ids if key != SYSTEM_KEY]
    return kept if sent is None else [sent, *kept]


_key_prefix = internal_id("message", "")


def _key(index: int) -> str:
    return internal_id("message", index)


def _messages_of(messages: _Input) -> list[BaseMessage]:
    """The messages given, as LangChain messages; one it cannot read is named."""
    if isinstance(messages, PromptValue):
        return messages.to_messages()
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
        msg = (
            f"messages must be a list of messages (or a PromptValue), got {type(messages).__name__}"
        )
        raise InvalidItemError(msg)
    out: list[BaseMessage] = []
    for index, message in enumerate(messages):
        try:
            out.extend(convert_to_messages([message]))
        except (ValueError, TypeError, NotImplementedError) as exc:
            msg = f"message {index} is not a chat message LangChain can read: {exc}"
            raise InvalidItemError(msg) from exc
    return out


_ROLES: dict[str, type[BaseMessage]] = {
    "user": HumanMessage,
    "human": HumanMessage,
    "system": SystemMessage,
    "developer": SystemMessage,
    "assistant": AIMessage,
    "ai": AIMessage,
}


def _by_role(message: BaseMessage) -> BaseMessage:
    """``message``, or for a `ChatMessage` of a standard role a copy of the class it stands for.

    ``ChatMessage(role="user")`` (``ChatMessagePromptTemplate``'s) is sent as the user's
    message: it can be the question, and starts an exchange; ``role="system"`` is a system
    message. Only to decide which is which: the message returned is the one given.
    """
    kind = _ROLES.get(message.role) if isinstance(message, ChatMessage) else None
    if kind is None:
        return message
    return kind(content=message.content, additional_kwargs=message.additional_kwargs)


def _assembler(counter: TokenCounter, trim: TrimOptions, *, joined: bool) -> ContextAssembler:
    key = (
        f"{counter.name}:{counter.model}:{id(counter)}:{trim['history_trim']}:"
        f"{trim['trim_step']}:{joined}"
    )
    assembler = _ASSEMBLERS.get(key)
    if assembler is None or assembler.counter is not counter:
        if len(_ASSEMBLERS) > 32:
            _ASSEMBLERS.clear()
        # The prefix is sent as one system message, inside the caller's (joined) if given.
        layouts = one_system_layouts(counter, joined=joined)
        assembler = _ASSEMBLERS[key] = ContextAssembler(counter, layouts=layouts, **trim)
    return assembler


def _sent(previous: Sequence[MessageLikeRepresentation] | None) -> list[dict[str, Any]] | None:
    """The previous call's messages as the core renders them (provider messages)."""
    if previous is None:
        return None
    sent: list[dict[str, Any]] = []
    for index, message in enumerate(_messages_of(previous)):
        item = item_of(message, id=_key(index), index=index)
        sent.append(message_of(item, item.role or "user", item.text))
    return sent


def _check_options(
    strategy: object, allow_partial: object, text_splitter: object, start_on: object
) -> None:
    if strategy != "last":
        msg = (
            f"budget_messages supports strategy='last' only, got {strategy!r}: it keeps the "
            "newest exchanges; keeping the oldest would drop the question being answered"
        )
        raise ConfigurationError(msg)
    if allow_partial:
        msg = (
            "budget_messages keeps or drops each message whole (allow_partial=False): half a "
            "message can change its meaning and half a tool call cannot be sent"
        )
        raise ConfigurationError(msg)
    if text_splitter is not None:
        msg = "text_splitter is only used with allow_partial=True, which is not supported"
        raise ConfigurationError(msg)
    if start_on is not None and not _means_human(start_on):
        msg = (
            f"start_on must be 'human' (or HumanMessage) or None, got {start_on!r}: history is "
            "kept as whole exchanges, which always start on a human message"
        )
        raise ConfigurationError(msg)


def _means_human(kind: object) -> bool:
    if isinstance(kind, str | type):
        kinds: list[object] = [kind]
    elif isinstance(kind, Sequence):
        kinds = list(kind)
    else:
        return False
    return bool(kinds) and all(
        k == "human" or (isinstance(k, type) and issubclass(k, HumanMessage)) for k in kinds
    )


def _is_type(message: BaseMessage, kind: MessageType | Sequence[MessageType]) -> bool:
    kinds: Sequence[Any] = [kind] if isinstance(kind, str | type) else kind
    return any(message.type == k if isinstance(k, str) else isinstance(message, k) for k in kinds)
