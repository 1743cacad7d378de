"""What each model call of `CtxBudgetMiddleware` was sent, and what was cut: three views.

The view is always the call's own `AssembledContext`, the one whose included items are the
messages the model receives:

* `CallContext` (the context and the run it belongs to) is handed to ``on_context=`` in the
  thread or task of the call, and the newest one of each LangGraph thread is kept
  (`CallObserver.last`, behind ``CtxBudgetMiddleware.last_context``): the thread's next call
  is assembled with it as ``previous=`` and reports the prefix they share (``prefix_tokens``);
* `budget_summary`, a compact JSON summary, goes in the model call's run metadata under
  ``"ctxbudget"``: what LangSmith shows on the chat model run, and what callback handlers and
  ``astream_events`` see. `call_with_metadata` runs the call with it in its ``RunnableConfig``,
  the config the agent's model call inherits;
* ``explain()`` is logged at DEBUG on this module's logger (``langchain_ctxbudget.observe``), and
  only built when DEBUG is on.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from langchain_core.runnables import RunnableConfig, ensure_config
from langchain_core.runnables.config import set_config_context
from langchain_core.runnables.utils import coro_with_context

from ctxbudget import AssembledContext
from ctxbudget.errors import ConfigurationError, StoreInputError
from langchain_ctxbudget.identity import context_field, run_config, run_identity, text_value

if TYPE_CHECKING:
    from langgraph.runtime import Runtime

__all__ = [
    "METADATA_KEY",
    "CallContext",
    "CallObserver",
    "acall_with_metadata",
    "budget_summary",
    "call_identity",
    "call_with_metadata",
]

logger = logging.getLogger(__name__)

METADATA_KEY = "ctxbudget"
"""The run metadata key of the summary (``run.extra["metadata"]["ctxbudget"]``)."""

# From "everything fit" to "packed by density": the call's solver is the least exact one used.

_Request = TypeVar("_Request")
_Response = TypeVar("_Response")


def budget_summary(context: AssembledContext) -> dict[str, Any]:
    """`AssembledContext.summary`: what the model call's run metadata carries.

    >>> from ctxbudget import ContextAssembler, ContextItem
    >>> ctx = ContextAssembler(model="gpt-4o").assemble([ContextItem("a", "Hi")], budget=50)
    >>> budget_summary(ctx)["pruned"]
    0
    """
    return context.summary()


@dataclass(frozen=True, slots=True)
class CallContext:
    """One model call's context and the run it belongs to (what ``on_context=`` receives).

    Attributes:
        context: the assembly whose included items are the messages sent (``.explain()``,
            ``.included``, ``.pruned`` with reasons).
        thread_id: the LangGraph thread (``configurable["thread_id"]``), or None.
        session_id: the ctxbudget session of the run (see `run_identity`), or None.
        user_id: the user of the run, or None.
        summary: `budget_summary` of ``context``, as put in the run metadata.
    """

    context: AssembledContext
    thread_id: str | None
    session_id: str | None
    user_id: str | None
    summary: Mapping[str, Any] = field(repr=False)


def call_identity(
    runtime: Runtime[Any] | None, *, session_id: str | None, user_id: str | None
) -> tuple[str | None, str | None]:
    """The ``(session, user)`` of a run, each None when nothing names it (never raises)."""
    try:
        return run_identity(runtime, session_id=session_id, user_id=user_id)
    except StoreInputError:  # no session id anywhere: the call is still observed, unnamed
        context = getattr(runtime, "context", None)
        configurable = run_config()
        user = (
            user_id
            or context_field(context, "user_id")
            or text_value(configurable.get("user_id"))
            or text_value(configurable.get("langgraph_user_id"))
        )
        return None, user


class CallObserver:
    """Turns each call's context into a `CallContext`: kept per thread, logged, handed on.

    Args:
        on_context: called with each `CallContext` before the model is called, in the thread
            or task of the call (keep it fast; what it raises fails the call).
        keep: how many threads keep their newest context (the least recently used go first;
            0 keeps none). Runs without a ``thread_id`` are not kept.
        session_id: the middleware's ``session_id`` (names the session of every run).
        user_id: the middleware's ``user_id``.

    Raises:
        ConfigurationError: ``on_context`` is not callable, or ``keep`` is not a count.
    """

    def __init__(
        self,
        *,
        on_context: Callable[[CallContext], object] | None,
        keep: int,
        session_id: str | None = None,
        user_id: str | None = None,
    ) -> None:
        if on_context is not None and not callable(on_context):
            msg = f"on_context must be a function of one CallContext, got {on_context!r}"
            raise ConfigurationError(msg)
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 0:
            msg = f"keep_contexts must be a number of threads (0 or more), got {keep!r}"
            raise ConfigurationError(msg)
        self._on_context = on_context
        self._keep = keep
        self._session_id = session_id
        self._user_id = user_id
        # thread id -> (the session's generation when the call was made, the call)
        self._last: OrderedDict[str, tuple[str | None, CallContext]] = OrderedDict()
        self._lock = threading.Lock()

    def observe(
        self,
        context: AssembledContext,
        runtime: Runtime[Any] | None,
        thread_id: str | None,
        identity: tuple[str | None, str | None] | None = None,
        generation: str | None = None,
    ) -> CallContext:
        """Record one call's context; returns it with its run's identity and summary.

        ``identity`` is the run's ``(session, user)`` when the caller already has it (with
        memory); else it is read from ``runtime`` and the run's config (`call_identity`).
        ``generation``: the session's generation the call was assembled in (with memory; None
        without): the context is the next call's ``previous`` only in that generation.
        """
        if identity is None:
            identity = call_identity(runtime, session_id=self._session_id, user_id=self._user_id)
        call = CallContext(context, thread_id, identity[0], identity[1], budget_summary(context))
        if thread_id is not None and self._keep:
            with self._lock:
                self._last[thread_id] = (generation, call)
                self._last.move_to_end(thread_id)
                while len(self._last) > self._keep:
                    self._last.popitem(last=False)
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug(
                "model call of thread %s (session %s):\n%s",
                thread_id,
                identity[0],
                context.explain(),
            )
        if self._on_context is not None:
            self._on_context(call)
        return call

    def last(self, thread_id: str) -> CallContext | None:
        """The newest `CallContext` of ``thread_id`` (None if none is kept)."""
        with self._lock:
            kept = self._last.get(thread_id)
        return None if kept is None else kept[1]

    def previous(self, thread_id: str | None, generation: str | None) -> AssembledContext | None:
        """The context of the newest call of ``thread_id``: the next call's ``previous=``.

        None when that call was made in another generation of the session (with memory): a
        thread id used again after its session was deleted shares no prefix with its old life.
        A call made before the session had records (generation ``""``) is the previous call of
        the generation its own messages started.
        """
        if thread_id is None:
            return None
        with self._lock:
            kept = self._last.get(thread_id)
        if kept is None or (kept[0] and kept[0] != generation):
            return None
        return kept[1].context


def _config_with(summary: Mapping[str, Any]) -> RunnableConfig:
    # The config the model call would inherit anyway, plus the summary: its run (and only the
    # runs started inside this call) carries it; the caller's config is not changed.
    # A copy (nested counts too): what ``on_context`` does with its summary does not reach it.
    own = {key: dict(v) if isinstance(v, Mapping) else v for key, v in summary.items()}
    config = ensure_config()
    config["metadata"] = {**config.get("metadata", {}), METADATA_KEY: own}
    return config


def call_with_metadata(
    handler: Callable[[_Request], _Response], request: _Request, summary: Mapping[str, Any]
) -> _Response:
    """``handler(request)`` with ``summary`` in the run metadata of the model call it makes."""
    with set_config_context(_config_with(summary)) as context:
        return context.run(handler, request)


async def acall_with_metadata(
    handler: Callable[[_Request], Awaitable[_Response]],
    request: _Request,
    summary: Mapping[str, Any],
) -> _Response:
    """Async `call_with_metadata`."""
    with set_config_context(_config_with(summary)) as context:
        return await coro_with_context(handler(request), context)
