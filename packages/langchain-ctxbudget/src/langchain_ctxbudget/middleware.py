"""`CtxBudgetMiddleware`: every model call of a ``create_agent`` agent fits the model's window.

Needs the ``agents`` extra (``pip install 'langchain-ctxbudget[agents]'``), which brings
``langchain``. `langchain_ctxbudget.model_request` turns each model request into items, and
the assembled context back into the request the model receives; `langchain_ctxbudget.call_memory`
is what a call reads from and writes to the memory.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from numbers import Integral
from operator import is_
from typing import TYPE_CHECKING, Any

from langchain_core.language_models import BaseLanguageModel

from ctxbudget import AssembledContext, Budget, ContextItem, Summarizer, TokenCounter
from ctxbudget.compat import renamed
from ctxbudget.core.side_items import side_items
from ctxbudget.core.trimming import DEFAULT_TRIM_STEP, TrimMode, trim_options
from ctxbudget.errors import ConfigurationError, MissingDependencyError
from ctxbudget.memory.policy.plan import plan_for
from ctxbudget.memory.policy.presets import StrategyLike
from ctxbudget.memory.reading.candidates import room_left
from langchain_ctxbudget.assembly import CallAssembler
from langchain_ctxbudget.budget import budget_tokens, model_name
from langchain_ctxbudget.call_budgets import CallBudgets, response_tools
from langchain_ctxbudget.call_memory import CallMemory, id_option
from langchain_ctxbudget.convert import check_storable, resolve_counter
from langchain_ctxbudget.identity import message_keys, run_thread, values_template
from langchain_ctxbudget.model_request import (
    conversation_items,
    fixed_items,
    own_keys,
    pinned_facts,
    request_parts,
    sent_request,
    state_messages,
)
from langchain_ctxbudget.observe import (
    CallContext,
    CallObserver,
    acall_with_metadata,
    call_with_metadata,
)
from langchain_ctxbudget.recall import Recalled
from langchain_ctxbudget.storing import StoredKeys
from langchain_ctxbudget.system import exact_system, system_plan

try:
    from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest
    from langchain.agents.middleware.types import ModelResponse
except ImportError as exc:  # pragma: no cover - exercised by a test that hides langchain
    _msg = (
        "CtxBudgetMiddleware needs LangChain's agents (the 'langchain' package): "
        "pip install 'langchain-ctxbudget[agents]'"
    )
    raise MissingDependencyError(_msg) from exc

if TYPE_CHECKING:
    from langgraph.runtime import Runtime

    from ctxbudget.memory.context import ContextMemory
    from ctxbudget.memory.reading.candidates import Additions

__all__ = ["CtxBudgetMiddleware"]


class CtxBudgetMiddleware(CallBudgets, CallMemory, AgentMiddleware[AgentState[Any], Any, Any]):
    """Agent middleware that assembles each model call's context within the model's window.

    Before every model call, the request's system prompt, the ``pinned`` facts, long-term
    memories from ``memory`` and the conversation are packed by the core `ContextAssembler`
    into ``window - reserve - safety`` tokens minus what the tool schemas cost, counted with
    the model's tokenizer. The call gets the result through ``request.override``: the agent's
    state keeps every message. What the model receives:

    * one system message: the request's own as it was given (blocks and fields kept), with
      after it (past a blank line, or as a text block of its own) the text of any system
      message later in the conversation, pinned facts, then (with ``memory``) stored
      summaries, the agent's saved values (``values=``), retrieved memories and documents;
    * the newest whole exchanges of the conversation (a user message and everything that
      answers it), the very message objects of the state. History never starts with a tool
      result and a tool call is never sent without its results.

    List it last in ``middleware=`` (the innermost): what a middleware after it adds to the
    request (``TodoListMiddleware``'s prompt and tool) is sent uncounted. What one before it
    changes for a call only (``ContextEditingMiddleware``) is packed as sent, and the memory
    stores the state's messages as they are.

    Message ids are the caller's (LangGraph gives every message of an agent's state one); ids
    starting with ``ctxbudget:`` are refused (`InvalidItemError`): ctxbudget keeps them for its
    own items (the system prompt, pinned facts, memories), so no message can displace those.

    With ``memory``, every message of the state is stored in the `ContextMemory` (once, under
    its message id; a message without one under a key made of the session, the thread, its
    position and a digest of the conversation up to it) before each model call and when the
    agent finishes, and with
    ``summarizer`` old stretches of the session are folded into stored summaries when the
    agent finishes (`ContextMemory.summarize`); a summary then stands in for the messages it
    covers once they no longer fit.

    What each call kept and cut: its `AssembledContext` goes to ``on_context`` (a `CallContext`,
    with the thread, session and user of the run) and the newest one of each thread stays
    readable with `last_context`; the call's run metadata carries a summary under
    ``"ctxbudget"`` (tokens used and available, items included and pruned by reason, solver),
    which LangSmith shows on the chat model run; ``explain()`` is logged at DEBUG.

    Tool schemas count as the tokens of their compact JSON (``convert_to_openai_tool``, sorted
    keys), the structured-output tools of ``response_format`` too (a provider's own structured
    output counted as that tool); providers do not publish their own rendering, so keep a few
    tokens of ``safety``.

    Args:
        model: the model, by name as the ctxbudget registry or ``create_agent`` spells it
            (``"gpt-4o"``, ``"anthropic:claude-sonnet-4-5"``) or as the chat model itself: its
            tokenizer counts and its window is the budget. When None, the chat model of each
            request says (its ``model_name`` or ``model``). A chat model's own window wins over
            the registry's (Ollama's ``num_ctx``, else its profile's ``max_input_tokens``); a
            model the registry does not know needs a window that way or from ``budget`` (and
            counts approximately).
        budget: the window in tokens instead of the model's (an int, with ``reserve`` and
            ``safety``), or a complete `ctxbudget.Budget` (then neither ``reserve`` nor
            ``safety`` may be given). ``max_tokens`` is its old name (an int).
        reserve: tokens kept for the reply; default: ``model``'s output limit capped as in
            `Budget.for_model` (a window the chat model declares too), raised to what the chat
            model is set to generate (its ``max_tokens``, ``num_predict``..., or those of the
            request's ``model_settings`` an earlier middleware set: a provider checks the
            prompt against the window less that), or 0 with an int ``budget``.
        safety: extra tokens kept free.
        base_url: the local server of the model (Ollama, vLLM, LM Studio): its window is asked
            from there (`ctxbudget.detect_window`) unless ``budget`` gives it; a ``ChatOllama``
            without ``num_ctx`` asks its own server without it.
        counter: a model name, a `ctxbudget.TokenCounter` or ``"approximate"`` to count
            with, when it is not ``model``'s tokenizer (``token_counter`` is its old name).
        pinned: facts sent on every call, whatever happens (a call they do not fit raises
            `BudgetExceededError`).
        extra: items offered on every call beside the conversation (files, folder trees:
            `ctxbudget.file_item`), packed by tier in the system message (`budget_messages`).
        memory: a `ctxbudget.ContextMemory` to store the conversation in and to recall
            long-term memories from.
        session_id: the memory session (an integer names it by its text); default:
            ``session_id`` of the runtime context, else ``configurable["session_id"]`` or the
            ``thread_id`` of the run's config.
        user_id: the memory user; default: ``user_id`` of the runtime context or config
            (else the config's ``langgraph_user_id``, as LangMem names it).
        documents: which document collections of ``memory`` to search (True: all; False: none).
        values: a namespace of the agent's store (`CtxBudgetStore` over ``memory``), e.g.
            ``("memories", "{user_id}")``: those that match the question are offered on each
            call (tier ``SAVED``); a put or delete counts on the next call. ``"{user_id}"`` (or
            LangMem's ``"{langgraph_user_id}"``) is the run's user, at the store's ``user_at``.
        summarizer: folds old stretches of the session into summaries after each run (e.g.
            `ChatModelSummarizer`); only with ``memory``.
        min_exchanges: newest exchanges kept before pinned facts and memories are packed
            (default: the strategy's, else ``memory``'s `MemoryConfig`, else 1).
        strategy: a preset (``"agent"``, ``"coding"``...), `ctxbudget.Strategy` or mapping,
            merged over ``memory``'s: the budget's floors and caps and the memory's gathering.
        on_context: called with each model call's `CallContext` before the model is, in the
            thread or task of the call (what it raises fails the call).
        keep_contexts: how many threads keep their newest context for `last_context` (least
            recently used dropped first; 0: none); a thread's next call reports the prefix it
            shares with it (``prefix_tokens``).
        history_trim: ``"step"`` (default without ``memory``) cuts history at anchors, so calls
            share a cached prefix; ``"message"`` (default with ``memory``, whose memories
            change the system message anyway) keeps the newest exchanges that fit.
        trim_step: the share of history's room one step drops (`ctxbudget.core.trimming`).

    Raises:
        ConfigurationError: a `Budget` combined with ``reserve`` or ``safety``; an
            ``on_context`` that is not a plain (not async) function or a ``keep_contexts``
            that is not a count;
            a pinned fact that is not valid text; a ``session_id`` or ``user_id`` that is
            not an id (a non-empty str, or an integer taken as its text).
        UnknownModelError: ``model`` is not in the ctxbudget registry.
        InvalidItemError: (on a model call) a message whose id starts with ``ctxbudget:``.

    >>> from langchain.agents import create_agent  # doctest: +SKIP
    >>> agent = create_agent(llm, tools, middleware=[  # doctest: +SKIP
    ...     CtxBudgetMiddleware(model="gpt-4o", reserve=1024, pinned=["User is vegetarian"])])
    """

    def __init__(
        self,
        *,
        model: str | BaseLanguageModel[Any] | None = None,
        budget: Budget | int | None = None,
        reserve: int | None = None,
        safety: int = 0,
        base_url: str | None = None,
        counter: str | TokenCounter | None = None,
        pinned: Sequence[str] = (),
        extra: Sequence[ContextItem] = (),
        memory: ContextMemory | None = None,
        session_id: str | int | None = None,
        user_id: str | int | None = None,
        documents: bool | str | Sequence[str] = True,
        values: Sequence[str] | None = None,
        summarizer: Summarizer | None = None,
        min_exchanges: int | None = None,
        strategy: StrategyLike | None = None,
        on_context: Callable[[CallContext], object] | None = None,
        keep_contexts: int = 32,
        max_tokens: int | None = None,
        token_counter: str | TokenCounter | None = None,
        history_trim: TrimMode | None = None,
        trim_step: float = DEFAULT_TRIM_STEP,
    ) -> None:
        super().__init__()
        old = {"max_tokens": max_tokens, "token_counter": token_counter}
        given = {"budget": budget, "counter": counter}
        options = renamed(
            {k: v for k, v in {**old, **given}.items() if v is not None},
            {"max_tokens": "budget", "token_counter": "counter"},
            "CtxBudgetMiddleware",
        )
        budget, counter = options.get("budget"), options.get("counter")
        if isinstance(budget, Budget) and (reserve is not None or safety):
            msg = "pass either budget=Budget(...) or budget=<tokens> with reserve=/safety="
            raise ConfigurationError(msg)
        window = None
        if budget is not None and not isinstance(budget, Budget):  # numpy ints too
            window = budget_tokens(budget, "CtxBudgetMiddleware")
        if extra is None:
            msg = "CtxBudgetMiddleware: extra= is a list of ContextItems; for none, leave it out"
            raise ConfigurationError(msg)
        for name, option in (("summarizer", summarizer), ("values", values)):
            if option is not None and memory is None:
                msg = f"{name}= reads and writes the memory: it needs memory= too"
                raise ConfigurationError(msg)
        self._base_url = base_url
        declared = None if model is None or isinstance(model, str) else self._window(model)
        if model is not None and not isinstance(model, str):
            model = model_name(model)
        self.model = model
        self.memory = memory
        self.session_id = id_option("session_id", session_id)
        self.user_id = id_option("user_id", user_id)
        self.documents = documents
        self.values = values_template(values)
        self.summarizer = summarizer
        self.pinned = pinned_facts(pinned)
        self.extra = tuple(side_items(extra, where="extra"))
        self._counter = (
            resolve_counter(counter, model) if counter is not None or model is not None else None
        )
        self.strategy = strategy
        config, own = (None, None) if memory is None else (memory.config, memory.strategy)
        self._plan = plan_for(config, own, strategy)
        self._budget = self._plan.budget(budget) if isinstance(budget, Budget) else None
        self._given = self._budget
        self._max_tokens = window
        self._declared = declared
        self._reserve = reserve
        self._safety = safety
        if self._budget is None and (model is not None or window is not None):
            self._budget = self._make_budget(model)
        self.min_exchanges = (
            self._plan.config.min_exchanges if min_exchanges is None else min_exchanges
        )
        trim = trim_options(history_trim, trim_step, memories=memory is not None)
        self._assembly = CallAssembler(min_exchanges=self.min_exchanges, trim=trim)
        self._stored = StoredKeys()
        self._recalled = Recalled()
        if callable(on_context) and (  # an async def, or an object with an async __call__
            inspect.iscoroutinefunction(on_context)
            or inspect.iscoroutinefunction(type(on_context).__call__)
        ):
            msg = (
                f"on_context must be a plain function of one CallContext, got the async "
                f"{on_context!r}: it is called, never awaited, so it would never run; to do "
                "async work from it, schedule it (asyncio.get_running_loop().create_task(...))"
            )
            raise ConfigurationError(msg)
        if isinstance(keep_contexts, Integral) and not isinstance(keep_contexts, bool):
            keep_contexts = int(keep_contexts)  # numpy's too
        self._observer = CallObserver(
            on_context=on_context,
            keep=keep_contexts,
            session_id=self.session_id,
            user_id=self.user_id,
        )

    # -- the hook ---------------------------------------------------------------------------
    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> Any:
        """Send the model the budgeted context instead of the whole state."""
        ids = self._identity(request.runtime)
        thread = run_thread(request.runtime)
        prepared, context, generation = self._prepare(request, ids, thread)
        call = self._observer.observe(context, request.runtime, thread, ids, generation)
        return call_with_metadata(handler, prepared, call.summary)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> Any:
        """Async `wrap_model_call` (with memory, on the memory's threads: `ContextMemory.arun`)."""
        ids = self._identity(request.runtime)
        thread = run_thread(request.runtime)
        if self.memory is None:
            prepared, context, generation = self._prepare(request, ids, thread)
        else:
            # On the memory's own worker threads (not the loop's shared executor).
            prepared, context, generation = await self.memory.arun(
                self._prepare, request, ids, thread
            )
        call = self._observer.observe(context, request.runtime, thread, ids, generation)
        return await acall_with_metadata(handler, prepared, call.summary)

    def last_context(self, thread_id: str) -> AssembledContext | None:
        """The context of the newest model call of LangGraph thread ``thread_id``.

        None when that thread made no call, or is no longer among the ``keep_contexts``
        threads kept. Runs without a ``thread_id`` are not kept: use ``on_context``.
        """
        call = self._observer.last(thread_id)
        return None if call is None else call.context

    def after_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Store the run's last messages and fold old stretches into summaries (with memory)."""
        if self.memory is not None:
            self._finish(state["messages"], self._identity(runtime), run_thread(runtime))
        return None

    async def aafter_agent(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async `after_agent`."""
        if self.memory is not None:
            await self.memory.arun(
                self._finish, state["messages"], self._identity(runtime), run_thread(runtime)
            )
        return None

    # -- assembling -------------------------------------------------------------------------
    def _prepare(
        self,
        request: ModelRequest[Any],
        ids: tuple[str, str | None] | None,
        thread: str | None = None,
    ) -> tuple[ModelRequest[Any], AssembledContext, str | None]:
        """The request to send, its context, and the session's generation (None: no memory)."""
        counter = self._counter or self._counter_of(request.model)
        system, messages = request_parts(request)
        keys = message_keys(messages, ids[0] if ids is not None else None, thread)
        digests: list[int] = []
        kept, kept_keys = messages, keys  # what the memory keeps: the state's messages
        if self.memory is not None and ids is not None:  # stored later, in the background
            state = state_messages(request)
            if state is not None:  # not what a middleware before this one sends in their place
                same = len(state) == len(messages) and all(map(is_, state, messages))
                kept, kept_keys = state, keys if same else message_keys(state, ids[0], thread)
            digests, unstored = self._unstored(self.memory, kept, kept_keys, ids)
            # Refused now, as add_messages would: what is not stored yet (the rest was checked).
            check_storable(self.memory, kept, kept_keys, ids, unstored)
        conversation, originals = conversation_items(messages, keys)
        lifted = len(conversation) > len(originals)  # system messages of the conversation
        adds = bool(self.pinned or self.extra or lifted) or (self.memory is not None and bool(ids))
        plan = system_plan(system, adds=adds)
        joined = plan.item is not None
        items = [*fixed_items(plan, self.pinned), *self.extra, *conversation]
        added: Additions | None = None
        generation: str | None = None
        # The structured-output tools create_agent binds after the middleware count too.
        tools = [*request.tools, *response_tools(request.response_format)]
        budget = self._call_budget(counter, request.model, tools, request.model_settings)
        if self.memory is not None and ids is not None:
            layout = self._assembly.assembler(counter, joined=joined).layout("messages")
            room = room_left(budget, layout, items)
            in_state = set(originals)
            added, generation = self._recall(
                self.memory, kept, kept_keys, ids, in_state, room, digests
            )
            items.extend(added.extras)

        # Its report: the prefix they share; only a call of this generation of the session.
        previous = self._observer.previous(thread, generation)
        run = partial(
            self._assembly.assemble, counter, budget=budget, tools=bool(tools), joined=joined
        )
        ctx = run(items, previous=previous)
        if added is not None and added.copies:
            # Older turns of this conversation come back as memories only when the history
            # lost them: a second pass offers the copies of the messages the first one cut.
            lost = added.lost(ctx)
            if lost:
                items = [*items, *lost]
                ctx = run(items, previous=previous)
        own = own_keys(originals, plan)
        ctx = exact_system(ctx, plan, items, own, partial(run, previous=previous))
        self._record(ctx, ids, counter, generation)
        # What ctxbudget adds goes inside the system message (`langchain_ctxbudget.system`).
        return sent_request(request, ctx, originals, plan), ctx, generation
