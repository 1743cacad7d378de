"""`CtxBudgetMiddleware`: every model call of a ``create_agent`` agent fits the model's window.

Needs the ``agents`` extra (``pip install 'langchain-ctxbudget[agents]'``), which brings
``langchain``.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AnyMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables.config import run_in_executor

from ctxbudget import (
    AssembledContext,
    Budget,
    BudgetExceededError,
    ContextAssembler,
    ContextItem,
    InvalidBudgetError,
    StoreInputError,
    Summarizer,
    Tier,
    TokenCounter,
    UnknownModelError,
    lookup_model,
)
from ctxbudget.compat import renamed
from ctxbudget.core.ids import internal_id
from ctxbudget.core.items import Shrink
from ctxbudget.core.split import split_prefix
from ctxbudget.errors import ConfigurationError, MissingDependencyError
from langchain_ctxbudget._convert import (
    counter_for,
    item_of,
    record_payload,
    resolve_counter,
    tool_tokens,
)

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

from langchain_ctxbudget.identity import (
    context_field,
    message_keys,
    run_config,
    run_thread,
    text_value,
)

__all__ = ["CtxBudgetMiddleware"]

logger = logging.getLogger(__name__)

_SESSIONS_REMEMBERED = 1024


class CtxBudgetMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Agent middleware that assembles each model call's context within the model's window.

    Before every model call, the request's system prompt, the ``pinned`` facts, long-term
    memories from ``memory`` and the conversation are packed by the core `ContextAssembler`
    into ``window - reserve - safety`` tokens minus what the tool schemas cost, counted with
    the model's tokenizer. The call gets the result through ``request.override``: the agent's
    state keeps every message. What the model receives:

    * one system message: the system prompt, then pinned facts, then (with ``memory``) stored
      summaries and retrieved memories and documents;
    * the newest whole exchanges of the conversation (a user message and everything that
      answers it), the very message objects of the state. History never starts with a tool
      result and a tool call is never sent without its results.

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

    Tool schemas count as the tokens of their compact JSON (``convert_to_openai_tool``, sorted
    keys); providers do not publish their own rendering, so keep a few tokens of ``safety``.

    Args:
        model: the model's name in the ctxbudget registry: its tokenizer counts and its window
            is the budget. When None, the name is read from the chat model of the request
            (its ``model_name`` or ``model``).
        budget: the window in tokens instead of the model's (an int, with ``reserve`` and
            ``safety``), or a complete `ctxbudget.Budget` (then neither ``reserve`` nor
            ``safety`` may be given). ``max_tokens`` is its old name (an int).
        reserve: tokens kept for the reply; default: ``model``'s output limit capped as in
            `Budget.for_model`, or 0 with an int ``budget``.
        safety: extra tokens kept free.
        counter: a model name, a `ctxbudget.TokenCounter` or ``"approximate"`` to count
            with, when it is not ``model``'s tokenizer (``token_counter`` is its old name).
        pinned: facts sent on every call, whatever happens (a call they do not fit raises
            `BudgetExceededError`).
        memory: a `ctxbudget.ContextMemory` to store the conversation in and to recall
            long-term memories from.
        session_id: the memory session; default: ``session_id`` of the runtime context, else
            ``configurable["session_id"]`` or the ``thread_id`` of the run's config.
        user_id: the memory user; default: ``user_id`` of the runtime context or config.
        documents: which document collections of ``memory`` to search (True: all; False: none).
        summarizer: folds old stretches of the session into summaries after each run (e.g.
            `ChatModelSummarizer`); only with ``memory``.
        min_exchanges: newest exchanges kept before pinned facts and memories are packed.

    Raises:
        ConfigurationError: a `Budget` combined with ``reserve`` or ``safety``.
        UnknownModelError: ``model`` is not in the ctxbudget registry.
        InvalidItemError: (on a model call) a message whose id starts with ``ctxbudget:``.

    >>> from langchain.agents import create_agent  # doctest: +SKIP
    >>> agent = create_agent(llm, tools, middleware=[  # doctest: +SKIP
    ...     CtxBudgetMiddleware(model="gpt-4o", reserve=1024, pinned=["User is vegetarian"])])
    """

    def __init__(
        self,
        *,
        model: str | None = None,
        budget: Budget | int | None = None,
        reserve: int | None = None,
        safety: int = 0,
        counter: str | TokenCounter | None = None,
        pinned: Sequence[str] = (),
        memory: ContextMemory | None = None,
        session_id: str | None = None,
        user_id: str | None = None,
        documents: bool | str | Sequence[str] = True,
        summarizer: Summarizer | None = None,
        min_exchanges: int = 1,
        max_tokens: int | None = None,
        token_counter: str | TokenCounter | None = None,
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
        window = None if isinstance(budget, Budget) else budget
        if isinstance(window, bool) or not (window is None or isinstance(window, int)):
            msg = f"budget must be a number of tokens or a ctxbudget.Budget, got {budget!r}"
            raise ConfigurationError(msg)
        if isinstance(pinned, str):
            msg = "pinned must be a list of facts, not one string; pass [fact]"
            raise ConfigurationError(msg)
        if summarizer is not None and memory is None:
            msg = "summarizer= folds stored messages into summaries: it needs memory= too"
            raise ConfigurationError(msg)
        self.model = model
        self.memory = memory
        self.session_id = session_id
        self.user_id = user_id
        self.documents = documents
        self.summarizer = summarizer
        self.pinned = tuple(pinned)
        self._counter = (
            resolve_counter(counter, model) if counter is not None or model is not None else None
        )
        floors: dict[int, float] = {}
        if memory is not None and memory.config.retrieved_floor > 0:
            # As ContextMemory does for plain budgets: a share for memories even against history.
            floors[int(Tier.RETRIEVED)] = min(1.0, memory.config.retrieved_floor)
        self._floors = floors
        self._budget: Budget | None = budget if isinstance(budget, Budget) else None
        self._max_tokens = window
        self._reserve = reserve
        self._safety = safety
        if self._budget is None and (model is not None or window is not None):
            self._budget = self._make_budget(model)
        self.min_exchanges = min_exchanges
        self._assemblers: dict[int, ContextAssembler] = {}
        self._stored: OrderedDict[tuple[str, str], set[str]] = OrderedDict()
        self._recalled: OrderedDict[tuple[str, str, str], list[ContextItem]] = OrderedDict()
        self._lock = threading.Lock()
        for fact in self.pinned:
            if not isinstance(fact, str) or not fact.strip():
                msg = f"each pinned fact must be non-empty text, got {fact!r}"
                raise ConfigurationError(msg)

    # -- the hook ---------------------------------------------------------------------------
    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> Any:
        """Send the model the budgeted context instead of the whole state."""
        ids = self._identity(request.runtime)
        return handler(self._prepare(request, ids, run_thread(request.runtime)))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> Any:
        """Async `wrap_model_call` (memory I/O runs in an executor)."""
        ids = self._identity(request.runtime)
        thread = run_thread(request.runtime)
        if self.memory is None:
            prepared = self._prepare(request, ids, thread)
        else:
            prepared = await run_in_executor(None, self._prepare, request, ids, thread)
        return await handler(prepared)

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
            await run_in_executor(
                None, self._finish, state["messages"], self._identity(runtime), run_thread(runtime)
            )
        return None

    # -- assembling -------------------------------------------------------------------------
    def _prepare(
        self,
        request: ModelRequest[Any],
        ids: tuple[str, str | None] | None,
        thread: str | None = None,
    ) -> ModelRequest[Any]:
        counter = self._counter or self._counter_of(request.model)
        messages = list(request.messages)
        items: list[ContextItem] = []
        system = request.system_message
        if system is None and messages and isinstance(messages[0], SystemMessage):
            system, messages = messages[0], messages[1:]
        if system is not None and system.text.strip():
            items.append(
                ContextItem(internal_id("system"), system.text, tier=Tier.SYSTEM, source="system")
            )
        items.extend(
            ContextItem(
                internal_id("pinned", i),
                fact,
                tier=Tier.PINNED,
                shrink=Shrink.NEVER,
                source="pinned",
            )
            for i, fact in enumerate(self.pinned)
        )
        keys = message_keys(messages, ids[0] if ids is not None else None, thread)
        originals: dict[str, AnyMessage] = {}
        for index, (message, key) in enumerate(zip(messages, keys, strict=True)):
            items.append(item_of(message, id=key, index=index))
            originals[key] = message
        copies: dict[str, ContextItem] = {}
        budget = self._call_budget(counter, request.model, request.tools)
        if self.memory is not None and ids is not None:
            self._store(messages, keys, ids)
            extras, copies = self._recall(messages, keys, ids, set(originals), budget)
            items.extend(extras)

        ctx = self._assemble(counter, items, budget, bool(request.tools))
        if copies:
            # Older turns of this conversation come back as memories only when the history
            # lost them: a second pass offers the copies of the messages the first one cut
            # (history can only shrink when more is offered, so no copy repeats a kept turn).
            included = {it.id for it in ctx.included}
            lost = [c for key, c in copies.items() if key not in included]
            if lost:
                ctx = self._assemble(counter, [*items, *lost], budget, bool(request.tools))
        # Prefix and memories in one system message (see `ctxbudget.core.split`).
        prefix, kept_ids = split_prefix(ctx, originals)
        new_system: SystemMessage | None = None
        if prefix is not None:
            new_system = SystemMessage(content=prefix, id=system.id if system is not None else None)
        return request.override(
            system_message=new_system, messages=[originals[key] for key in kept_ids]
        )

    def _assemble(
        self, counter: TokenCounter, items: list[ContextItem], budget: Budget, tools: bool
    ) -> AssembledContext:
        try:
            return self._assembler(counter).assemble(items, budget=budget)
        except BudgetExceededError as exc:
            if not tools:
                raise
            msg = f"{exc} (the reserve includes the tool schemas)"
            raise BudgetExceededError(msg, required=exc.required, available=exc.available) from exc

    def _assembler(self, counter: TokenCounter) -> ContextAssembler:
        assembler = self._assemblers.get(id(counter))
        if assembler is None or assembler.counter is not counter:
            assembler = ContextAssembler(counter, min_exchanges=self.min_exchanges)
            self._assemblers[id(counter)] = assembler
        return assembler

    def _make_budget(self, model: str | None) -> Budget:
        if self._max_tokens is None:
            if model is None:  # pragma: no cover - guarded by the callers
                msg = "no model to take the window from"
                raise UnknownModelError(msg)
            return Budget.for_model(
                model, reserve=self._reserve, safety=self._safety, floors=self._floors
            )
        return Budget(
            window=self._max_tokens,
            reserve=self._reserve or 0,
            safety=self._safety,
            floors=self._floors,
        )

    def _call_budget(self, counter: TokenCounter, model: object, tools: Sequence[object]) -> Budget:
        budget = self._budget or self._make_budget(self._model_name(model))
        schemas = tool_tokens(counter, tools) if tools else 0
        if not schemas:
            return budget
        try:
            return dataclasses.replace(budget, reserve=budget.reserve + schemas)
        except InvalidBudgetError as exc:
            msg = (
                f"the {len(tools)} tool schemas need {schemas:,} tokens but only "
                f"{budget.available:,} are available (window {budget.window:,} - reserve "
                f"{budget.reserve:,} - safety {budget.safety:,}); use fewer or shorter tools "
                "or a larger window"
            )
            raise BudgetExceededError(msg, required=schemas, available=budget.available) from exc

    def _counter_of(self, model: object) -> TokenCounter:
        return counter_for(self._model_name(model))

    def _model_name(self, model: object) -> str:
        if self.model is not None:
            return self.model
        for attribute in ("model_name", "model", "model_id"):
            name = getattr(model, attribute, None)
            if isinstance(name, str) and name:
                try:
                    return lookup_model(name).name
                except UnknownModelError:
                    continue
        msg = (
            f"CtxBudgetMiddleware cannot tell which model {type(model).__name__} is; pass "
            "model='<name>' (a model ctxbudget knows, e.g. 'gpt-4o') or token_counter= and "
            "max_tokens="
        )
        raise UnknownModelError(msg)

    # -- memory -----------------------------------------------------------------------------
    def _identity(self, runtime: Runtime[Any] | None) -> tuple[str, str | None] | None:
        """The memory (session, user) of this run, or None without memory."""
        if self.memory is None:
            return None
        context = getattr(runtime, "context", None)
        configurable = run_config()
        session = (
            self.session_id
            or context_field(context, "session_id")
            or text_value(configurable.get("session_id"))
            or text_value(configurable.get("thread_id"))
        )
        if session is None:
            info = getattr(runtime, "execution_info", None)
            session = text_value(getattr(info, "thread_id", None))
        if session is None:
            msg = (
                "CtxBudgetMiddleware(memory=...) needs a session id: pass session_id=, put "
                "session_id in the runtime context, or run the agent with a thread_id"
            )
            raise StoreInputError(msg)
        user = (
            self.user_id
            or context_field(context, "user_id")
            or text_value(configurable.get("user_id"))
        )
        return session, user

    def _store(
        self, messages: Sequence[BaseMessage], keys: Sequence[str], ids: tuple[str, str | None]
    ) -> None:
        """Store the state's messages that the memory does not hold yet (once each)."""
        memory = self.memory
        if memory is None:
            return
        session, user = ids
        key = (memory.namespace, session)
        with self._lock:
            known = self._stored.setdefault(key, set())
            self._stored.move_to_end(key)
            while len(self._stored) > _SESSIONS_REMEMBERED:
                self._stored.popitem(last=False)
            fresh = [(m, k) for m, k in zip(messages, keys, strict=True) if k not in known]
        if not fresh:
            return
        stored = {
            r.id: r
            for r in memory.store.get(
                [k for _, k in fresh], namespace=memory.namespace, session_id=session
            )
        }
        now = time.time()
        payloads: list[dict[str, Any]] = []
        for message, k in fresh:
            payload = record_payload(message, id=k, timestamp=now)
            if payload is None:
                continue
            record = stored.get(k)
            if record is None:
                payloads.append(payload)
            elif (record.role, record.text) != (payload["role"], payload["text"]):
                # The id names another message of the session (a caller reusing ids across
                # threads, or a message edited in the state): the memory keeps the first.
                logger.warning(
                    "ctxbudget memory keeps the first message stored as %r in %r; the %s "
                    "message now under that id is not stored (give messages unique ids)",
                    k,
                    session,
                    message.type,
                )
        if payloads:
            self._add(session, user, payloads)
        with self._lock:
            self._stored.setdefault(key, set()).update(k for _, k in fresh)

    def _add(self, session: str, user: str | None, payloads: list[dict[str, Any]]) -> None:
        """Store payloads in one batch; if the batch is refused, each one that can be."""
        memory = self.memory
        if memory is None:  # pragma: no cover - guarded by the callers
            return
        try:
            memory.add_messages(session, payloads, user_id=user, progress=False)
            return
        except StoreInputError as exc:
            logger.warning(
                "ctxbudget memory refused a batch of %r (%s); storing one by one", session, exc
            )
        for payload in payloads:
            try:
                memory.add_messages(session, [payload], user_id=user, progress=False)
            except StoreInputError as exc:
                logger.warning(
                    "ctxbudget memory did not store %r of %r: %s", payload["id"], session, exc
                )

    def _recall(
        self,
        messages: Sequence[BaseMessage],
        keys: Sequence[str],
        ids: tuple[str, str | None],
        in_state: set[str],
        budget: Budget,
    ) -> tuple[list[ContextItem], dict[str, ContextItem]]:
        """What the memory adds: ``(extras, copies)``.

        Extras: pinned facts, tasks, summaries, documents, the user's other sessions and stored
        turns the state does not hold: `ContextMemory.candidates` for this call's budget (the
        same gathering and scoring as `ContextMemory.assemble`).
        Copies: older turns of the state that match the question, by the key of the turn (their
        own ids are ``ctxbudget:memory:<key>``).
        """
        memory = self.memory
        position = next(
            (i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], HumanMessage)),
            None,
        )
        if memory is None or position is None or not messages[position].text.strip():
            return [], {}
        session, user = ids
        query = messages[position].text
        # The candidates of one question are gathered once: the calls that follow tool results
        # in the same turn reuse them (what the tools returned is in the state).
        cache_key = (memory.namespace, session, f"{position}:{keys[position]}")
        with self._lock:
            cached = self._recalled.get(cache_key)
        if cached is None:
            # The candidates ContextMemory would offer, bounded by this call's budget; the newest
            # stored turns are searched too (here the state is the history).
            found = memory.candidates(
                session,
                query,
                budget=budget,
                user_id=user,
                documents=self.documents,
                search_recent=True,
            )
            cached = found.items
            with self._lock:
                self._recalled[cache_key] = cached
                while len(self._recalled) > _SESSIONS_REMEMBERED:
                    self._recalled.popitem(last=False)
        extras: list[ContextItem] = []
        copies: dict[str, ContextItem] = {}
        seen: set[str] = set()
        for item in cached:
            if item.tier in (Tier.SYSTEM, Tier.QUERY):
                continue  # the state has the prompt and the question
            if item.id in in_state:
                if item.tier != Tier.RECENT and item.id not in copies:
                    copies[item.id] = dataclasses.replace(
                        item, id=internal_id("memory", item.id), tool_calls=(), tool_call_id=None
                    )
                continue
            if item.tier == Tier.RECENT:
                # Stored turns the state does not hold (an earlier thread of the session).
                item = dataclasses.replace(
                    item,
                    id=internal_id("memory", item.id),
                    tier=Tier.RETRIEVED,
                    tool_calls=(),
                    tool_call_id=None,
                )
            if item.id not in seen:  # a turn can be both recent history and a match
                seen.add(item.id)
                extras.append(item)
        return extras, copies

    def _finish(
        self,
        messages: Sequence[BaseMessage],
        ids: tuple[str, str | None] | None,
        thread: str | None,
    ) -> None:
        if self.memory is None or ids is None:
            return
        self._store(messages, message_keys(messages, ids[0], thread), ids)
        if self.summarizer is not None:
            self.memory.summarize(ids[0], self.summarizer)
