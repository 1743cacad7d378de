"""What each assembly reports: a LlamaIndex instrumentation event, a DEBUG log, a per-call context.

Every `CtxBudgetMemory.get`, `CtxBudgetNodePostprocessor` call and `CtxBudgetRetriever`
retrieval dispatches one `ContextAssembledEvent` through the dispatcher of its class's module
(``get_dispatcher(__name__)``, as LlamaIndex's own classes do: a handler added to the root
dispatcher sees it) and logs its ``explain()`` at DEBUG on that module's logger
(`report_assembly`). Its figures are `AssembledContext.summary`'s, the names the LangChain
adapter puts in run metadata; it also carries the call's own `AssembledContext`, so a handler
reads one call's report even when calls run at the same time.

``last_context`` of those classes is kept per thread and per asyncio task (`LastContext`, a
`contextvars` variable): a call never sees the result of another thread's or task's call.
"""

from __future__ import annotations

import logging
import weakref
from contextvars import ContextVar

from llama_index.core.bridge.pydantic import Field
from llama_index.core.instrumentation import Dispatcher  # type: ignore[attr-defined]
from llama_index.core.instrumentation.events.base import BaseEvent  # type: ignore[attr-defined]

from ctxbudget import AssembledContext

__all__ = ["ContextAssembledEvent", "LastContext", "report_assembly"]


class ContextAssembledEvent(BaseEvent):
    """One assembly by a ctxbudget component: what it was given, what fit and what was cut.

    Attributes:
        component: the class that assembled (``"CtxBudgetMemory"``,
            ``"CtxBudgetNodePostprocessor"``, ``"CtxBudgetRetriever"``).
        session_id: the memory's session (None for the postprocessor and the retriever).
        budget: what the user configured: the memory's ``token_limit``, the postprocessor's and
            the retriever's ``budget``.
        tokens_available: what this call could use: ``budget`` less what the caller sends
            beside the result (a chat engine's ``initial_token_count``, an input message the
            caller sends itself).
        tokens_used: tokens of what the call returned, as sent (at most ``tokens_available``).
        included: items kept (messages, nodes; the system prompt and pinned facts are items).
        pruned: items offered and left out, duplicates included.
        pruned_by_reason: ``pruned`` per `PruneReason` value (``"over_budget"``...).
        truncated: items kept, cut short to fit.
        solver: the least exact packing used: ``"greedy"`` (by density), ``"exact"``
            (knapsack) or ``"all"`` (everything offered fit); None when no tier needed one.
        solvers: per tier name, how it was packed (see `ctxbudget.core.packing`).
        prefix_tokens: leading tokens identical to the session's previous assembly (what a
            provider's prompt cache can reuse, `ctxbudget.core.prefix`); None without one.
        context: the call's `AssembledContext` (``explain()``, ``to_json()``, ``included``,
            ``pruned`` with reasons); not serialized. None when nothing could be packed (a
            budget below the cost of the layout itself).

    >>> from llama_index.core.instrumentation import get_dispatcher  # doctest: +SKIP
    >>> get_dispatcher().add_event_handler(MyHandler())  # doctest: +SKIP
    """

    component: str
    session_id: str | None = None
    budget: int
    tokens_available: int
    tokens_used: int
    included: int
    pruned: int
    pruned_by_reason: dict[str, int] = Field(default_factory=dict)
    truncated: int = 0
    solver: str | None = None
    solvers: dict[str, str] = Field(default_factory=dict)
    prefix_tokens: int | None = None
    context: AssembledContext | None = Field(default=None, exclude=True, repr=False)

    @classmethod
    def class_name(cls) -> str:
        """The event's name in LlamaIndex instrumentation."""
        return "ContextAssembledEvent"


def report_assembly(
    dispatcher: Dispatcher,
    logger: logging.Logger,
    context: AssembledContext | None,
    *,
    component: str,
    configured: str,
    budget: int,
    offered: int = 0,
    session_id: str | None = None,
) -> ContextAssembledEvent:
    """Dispatch the `ContextAssembledEvent` of one call and log ``explain()`` at DEBUG.

    Args:
        dispatcher: the instrumentation dispatcher of the calling module.
        logger: the logger of the calling module.
        context: the call's assembly (None: nothing could be packed).
        component: the class name.
        configured: the user's settings as they are named, for the log (``"budget=300"``).
        budget: the configured token count (``token_limit`` or ``budget``).
        offered: how many items were offered: all of them pruned when ``context`` is None.
        session_id: the memory's session, if any.
    """
    if context is None:
        event = ContextAssembledEvent(
            component=component,
            session_id=session_id,
            budget=budget,
            tokens_available=budget,
            tokens_used=0,
            included=0,
            pruned=offered,
        )
    else:
        event = ContextAssembledEvent(
            component=component,
            session_id=session_id,
            budget=budget,
            truncated=len(context.truncated),
            context=context,
            **context.summary(),
        )
    if logger.isEnabledFor(logging.DEBUG):
        where = "" if session_id is None else f" session {session_id!r}"
        head = (
            f"{component}{where} ({configured}): {event.tokens_used:,} of "
            f"{event.tokens_available:,} tokens available, {event.included} kept, "
            f"{event.pruned} cut"
        )
        body = "nothing fits: the budget is below the layout's own cost"
        logger.debug("%s\n%s", head, body if context is None else context.explain())
    dispatcher.event(event)
    return event


class LastContext:
    """A component's last `AssembledContext`, kept per thread and per asyncio task.

    Each component holds one; `set` and `get` read and write the current
    `contextvars.Context`, so what a thread or task sets is never seen by another (a task
    starts with what its creator had set). An entry lives as long as its component.
    """

    __slots__ = ("__weakref__",)

    def get(self) -> AssembledContext | None:
        """The last context set in this thread or task, or None."""
        held = _CALLS.get()
        return None if held is None else held.get(self)

    def set(self, context: AssembledContext | None) -> None:
        """Record the context of a call made in this thread or task."""
        # A copy: a task's context starts as a copy of its creator's, sharing the mapping.
        held: weakref.WeakKeyDictionary[LastContext, AssembledContext | None]
        held = weakref.WeakKeyDictionary(_CALLS.get() or {})
        held[self] = context
        _CALLS.set(held)


_CALLS: ContextVar[weakref.WeakKeyDictionary[LastContext, AssembledContext | None] | None] = (
    ContextVar("llama_index_ctxbudget_last_context", default=None)
)
