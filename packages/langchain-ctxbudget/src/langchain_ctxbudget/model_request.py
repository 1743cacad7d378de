"""An agent's `ModelRequest` as ctxbudget items, and the assembled context as the request sent.

`CtxBudgetMiddleware` turns each model call's request into items (`request_parts`,
`fixed_items`, `conversation_items`), hands them to the core with whatever memory adds, and
sends the model `sent_request`: one system message (the request's own, unchanged, with what
ctxbudget adds inside it: `langchain_ctxbudget.system`), then the very message objects of the
state that were kept.

Separate from `langchain_ctxbudget.middleware`, which decides when to assemble and what else
to offer (memories, the budget of the call, the report): this module only converts between
LangChain's request and ctxbudget's items, both ways, and holds no algorithm. It needs
LangChain's agents only for type checking.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.messages import (
    AnyMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
)

from ctxbudget import AssembledContext, ContextItem, Tier
from ctxbudget.core.ids import internal_id
from ctxbudget.core.items import Shrink
from ctxbudget.core.split import split_prefix
from ctxbudget.core.unicode import lone_surrogate
from ctxbudget.errors import ConfigurationError
from langchain_ctxbudget.convert import item_of
from langchain_ctxbudget.system import SYSTEM_KEY, SystemPlan, lifted_item

if TYPE_CHECKING:
    from langchain.agents.middleware import ModelRequest

__all__ = [
    "conversation_items",
    "current_turn",
    "fixed_items",
    "is_notification",
    "never_pruned",
    "own_keys",
    "pinned_facts",
    "request_parts",
    "sent_request",
    "state_messages",
]


def request_parts(request: ModelRequest[Any]) -> tuple[SystemMessage | None, list[AnyMessage]]:
    """The request's system message and its conversation.

    A request without a system message whose first message is one takes that message as its
    system message (it is then not part of the conversation).
    """
    messages = list(request.messages)
    system = request.system_message
    if system is None and messages and isinstance(messages[0], SystemMessage):
        system, messages = messages[0], messages[1:]
    return system, messages


def state_messages(request: ModelRequest[Any]) -> list[AnyMessage] | None:
    """The messages of the agent's state, what a memory stores (None: the request has none).

    Not the request's own: a middleware before this one may change what one call sends
    (``ContextEditingMiddleware`` clears old tool results, another adds a reminder) without
    changing the conversation, and the memory keeps the conversation (the state's messages,
    as the agent's end stores them). A request made without a state (by hand) has none.
    """
    state = request.state
    found = state.get("messages") if isinstance(state, Mapping) else None
    return list(found) if isinstance(found, list) and found else None


def pinned_facts(pinned: object, where: str = "CtxBudgetMiddleware") -> tuple[str, ...]:
    """A ``pinned=`` option (the middleware's, `budget_messages`'), checked: non-empty texts.

    Raises:
        ConfigurationError: one string, None, or a fact that is not non-empty valid text (a
            lone surrogate would fail every call, naming no pinned fact); ``where`` first.
    """
    if isinstance(pinned, str) or not isinstance(pinned, Iterable):
        msg = (
            f"{where}: pinned must be a list of facts, got {pinned!r:.80}; for one fact "
            "pass [fact], for none leave it out"
        )
        raise ConfigurationError(msg)
    facts = tuple(pinned)
    for number, fact in enumerate(facts):
        if not isinstance(fact, str) or not fact.strip():
            msg = f"{where}: pinned fact {number} must be non-empty text, got {fact!r:.80}"
            raise ConfigurationError(msg)
        problem = lone_surrogate(fact)
        if problem is not None:
            msg = f"{where}: pinned fact {number} {problem}"
            raise ConfigurationError(msg)
    return facts


def fixed_items(plan: SystemPlan, pinned: Sequence[str]) -> list[ContextItem]:
    """The items every call offers: the system message (unless blank), then the pinned facts.

    Both get ids in ctxbudget's own id space (`ctxbudget.core.ids.internal_id`), which no
    message can take; neither is ever cut.
    """
    items: list[ContextItem] = plan.items()
    items.extend(
        ContextItem(
            internal_id("pinned", i),
            fact,
            tier=Tier.PINNED,
            shrink=Shrink.NEVER,
            source="pinned",
        )
        for i, fact in enumerate(pinned)
    )
    return items


def current_turn(messages: Sequence[BaseMessage]) -> int:
    """Where the conversation's current turn starts: its question (``len``: there is none).

    The question is the last human message the user wrote: a notification the agent's harness
    added after it (`is_notification`: a background task's update, a human-in-the-loop answer)
    does not start a turn, so the user's request is not taken for history behind it. With only
    notifications, the last of them. That message is never pruned (`never_pruned`): one that
    cannot fit refuses the call (`BudgetExceededError`) rather than sending a request without
    it. What answers it so far (tool steps) is packed newest first, whole steps, as history is.
    """
    humans = [i for i, m in enumerate(messages) if _from_user(m)]
    written = [i for i in humans if not is_notification(messages[i])]
    return (written or humans or [len(messages)])[-1]


def _from_user(message: BaseMessage) -> bool:
    """A human message, or a ``ChatMessage(role="user")`` (sent as the user's message)."""
    if isinstance(message, ChatMessage):
        return message.role in ("user", "human")
    return isinstance(message, HumanMessage)


def never_pruned(messages: Sequence[BaseMessage]) -> frozenset[int]:
    """The positions never pruned: the question, and a notification the call answers.

    A harness's notification last in the conversation (the message this model call reacts to,
    after the user's question) is kept with the question: the model sees both, whatever the
    budget. Earlier notifications are history like any message.
    """
    question = current_turn(messages)
    if question == len(messages):
        return frozenset()
    last = len(messages) - 1
    if last > question and is_notification(messages[last]):
        return frozenset({question, last})
    return frozenset({question})


def is_notification(message: BaseMessage) -> bool:
    """A human message the agent's harness added (langchain-core's ``add_notification_metadata``).

    The rule of langchain-core's ``get_notification_metadata``: a string ``lc_source`` in its
    ``additional_kwargs``. Such a message is sent to the model as the human message it is.
    """
    return isinstance(message, HumanMessage) and isinstance(
        message.additional_kwargs.get("lc_source"), str
    )


def conversation_items(
    messages: Sequence[AnyMessage], keys: Sequence[str]
) -> tuple[list[ContextItem], dict[str, AnyMessage]]:
    """The conversation's items (one per message, id ``keys[i]``) and the messages by key.

    The question's is never pruned, nor a notification after it that the call answers
    (`never_pruned`). A system message goes into the one system
    message (`langchain_ctxbudget.system.lifted_item`): it is not among the messages by key.
    """
    items: list[ContextItem] = []
    originals: dict[str, AnyMessage] = {}
    kept = never_pruned(messages)
    for index, (message, key) in enumerate(zip(messages, keys, strict=True)):
        if isinstance(message, SystemMessage):
            lifted = lifted_item(message, key)
            items.extend([] if lifted is None else [lifted])
            continue
        shrink = Shrink.NEVER if index in kept else Shrink.DROP
        items.append(item_of(message, id=key, index=index, shrink=shrink))
        originals[key] = message
    return items, originals


def sent_request(
    request: ModelRequest[Any],
    context: AssembledContext,
    originals: Mapping[str, AnyMessage],
    plan: SystemPlan,
) -> ModelRequest[Any]:
    """``request`` with the assembled context: what the model receives.

    The request's system message as it was given, with everything ctxbudget rendered (pinned
    facts, memories...) inside it (`SystemPlan.sent`); the messages are the original objects
    of the conversation that were kept, in order.
    """
    prefix, kept_ids = split_prefix(context, own_keys(originals, plan))
    messages = [originals[key] for key in kept_ids if key != SYSTEM_KEY]
    return request.override(system_message=plan.sent(prefix), messages=messages)


def own_keys(originals: Collection[str], plan: SystemPlan) -> set[str]:
    """The keys of the caller's own messages of an assembly: the conversation's and system's."""
    return {*originals, *([SYSTEM_KEY] if plan.item is not None else [])}
