"""The LangChain door: `CtxBudgetMiddleware` with a memory in a real ``create_agent``.

The chat model is `lc_fakes.RecordingChatModel` (LangChain's own fake, recording every call),
so what the driver reads is exactly the messages the model received. Runs name the session by
``thread_id`` in the config and by ``session_id`` in the runtime context, the user by
``user_id`` there. The memory writes behind (the product's default).

- ``add``: one agent run per (user, assistant) pair: the user turn is the run's input, the
  assistant turn is the fake model's reply (with the turn's id), and the middleware stores
  both. A turn without its partner (an assistant turn the fake cannot be asked for first, a
  trailing user turn) is stored with ``memory.add_messages``. ``add`` flushes the memory, so
  the turns are acknowledged when it returns.
- ``pin``: ``memory.pin`` (the middleware has no pin of its own).
- ``send``: one run whose state is only the question (its id is made of the session and the
  text, so asking again is the same question and the middleware's recall cache is used).
  Everything else the model gets comes from the memory: removal is the memory's promise here.
  The middleware stores the question and the reply in the session: ``stored`` says which.
  ``got``: the stored things found in what the model received (`common.identify`), ``chosen``:
  the report's (``last_context``) included items by their callers' ids.
- ``bad``: ``budget`` goes to the middleware, ``query``/``text`` is the run's message,
  ``session_id``/``user_id`` go in the runtime context; other names go to the middleware.
- ``close``: closes the memory the middleware reads; ``after_close`` runs the agent again.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import deque
from collections.abc import Iterator, Sequence
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.messages.utils import convert_to_openai_messages
from lc_fakes import RecordingChatModel

from langchain_ctxbudget import CtxBudgetMiddleware

from .base import Place, Received, Refusal, Turn
from .common import (
    BUDGET_NAMES,
    MODEL,
    SPANS,
    Registry,
    assembly_tokens,
    attempt,
    framework_value,
    heard,
    new_turns,
    overtaken_by_thread,
    overtaken_on_loop,
    pairs,
    payload,
    raised,
)

__all__ = ["MiddlewareDriver", "make"]

SYSTEM = "Be brief."
ADD_WINDOW = 8000
Agent = tuple[Any, CtxBudgetMiddleware, RecordingChatModel]


class MiddlewareDriver:
    """`CtxBudgetMiddleware` in ``create_agent``, run with ``invoke`` (or ``ainvoke``)."""

    can = frozenset({"add", "send", "report", "span", "removal", "bad", "kinds", "close", "pin"})
    takes = frozenset({"budget", "query", "query=text", "text", "session_id", "user_id"})

    def __init__(
        self, place: Place, *, run_async: bool = False, values: tuple[str, ...] | None = None
    ) -> None:
        self.name = "lc_middleware_async" if run_async else "lc_middleware"
        self.values = values  # the middleware's ``values=`` (`lc_middleware_values`)
        self.memory = place.open_memory(write_behind=True)
        self.registry = Registry()
        self._loop = asyncio.new_event_loop() if run_async else None
        self._replies: deque[AIMessage] = deque()
        self._agents: dict[int, Agent] = {}

    def _agent(self, window: int, **options: Any) -> Agent:
        if not options and window in self._agents:
            return self._agents[window]
        replies = self._replies

        def reply() -> Iterator[AIMessage]:
            while True:
                yield replies.popleft() if replies else AIMessage("noted")

        model = RecordingChatModel(messages=reply())
        given = {"budget": window, **options}
        if self.values is not None:
            given.setdefault("values", self.values)
        middleware = CtxBudgetMiddleware(model=MODEL, reserve=0, memory=self.memory, **given)
        agent = create_agent(
            model, system_prompt=SYSTEM, middleware=[middleware], context_schema=dict
        )
        if not options:
            self._agents[window] = (agent, middleware, model)
        return agent, middleware, model

    def _run(self, agent: Any, messages: list[BaseMessage], session: Any, user: Any) -> None:
        state = {"messages": messages}
        config = {"configurable": {"thread_id": session}}
        context = {"session_id": session, "user_id": user}
        if self._loop is None:
            agent.invoke(state, config, context=context)
        elif self._loop.is_closed():  # after close: a loop of its own
            asyncio.run(agent.ainvoke(state, config, context=context))
        else:
            self._loop.run_until_complete(agent.ainvoke(state, config, context=context))

    def add(self, session: str, user: str, turns: Sequence[Turn]) -> None:
        """Agent runs for the (user, assistant) pairs, ``add_messages`` for the others."""
        agent, _, _ = self._agent(ADD_WINDOW)
        for asked, answer in pairs(turns):
            if asked is not None and answer is not None:
                self._replies.append(AIMessage(answer.text, id=answer.id))
                self._run(agent, [HumanMessage(asked.text, id=asked.id)], session, user)
            else:
                alone = [payload(t) for t in (asked, answer) if t is not None]
                self.memory.add_messages(session, alone, user_id=user, progress=False)
        self.memory.flush()
        for turn in turns:
            self.registry.note(turn.id, turn.text)

    def pin(self, text: str, id: str, session: str | None = None, user: str | None = None) -> None:  # noqa: A002
        """Pin through the memory the middleware reads."""
        self.memory.pin(session, text, user_id=user, id=id)
        self.registry.note(id, text)

    def send(self, session: str, user: str, query: str, budget: int) -> Received:
        """One run for ``query`` within ``budget``; what the model received, and the report."""
        agent, middleware, model = self._agent(budget)
        asked = HumanMessage(query, id=question_id(session, query))
        self._replies.append(AIMessage(f"noted {asked.id}", id=f"{asked.id}-answer"))
        self.memory.flush()
        before = {r.id for r in self.memory.history(session)}
        SPANS.clear()
        self._run(agent, [asked], session, user)
        span = assembly_tokens()
        stored = new_turns(self.memory, session, before)
        sent = convert_to_openai_messages(model.calls[-1][0])
        context = middleware.last_context(session)
        return heard(sent, context, self.registry.texts, budget, span_tokens=span, stored=stored)

    def bad(self, argument: str, value: object) -> Refusal | None:
        """One run with ``argument=value`` (the middleware's option, or the run's value)."""
        run: dict[str, Any] = {"session": "bad-values", "user": "bad-user", "query": "hello"}
        options: dict[str, Any] = {}
        if argument in BUDGET_NAMES:
            options["budget"] = value
        elif argument in ("query", "text"):
            run["query"] = value
        elif argument in ("session_id", "user_id"):
            run[argument.removesuffix("_id")] = value
        else:
            options[argument] = value

        asked = framework_value(lambda: HumanMessage(run["query"]), "a message's content")

        def call() -> None:
            agent, _, _ = self._agent(ADD_WINDOW, **options)
            self._run(agent, [asked], run["session"], run["user"])

        return attempt(call)

    def overtaken(
        self, session: str, user: str, query: str, budget: int, delay: float
    ) -> BaseException | None:
        """A run the memory's close overtakes ``delay`` s after it began (`overtaken_by_thread`;
        async: ``aclose`` awaited by another task of the run's loop)."""
        if self._loop is None:
            return overtaken_by_thread(
                lambda: self.send(session, user, query, budget), self.close, delay
            )
        agent, _, _ = self._agent(budget)
        asked = HumanMessage(query, id=question_id(session, query))
        self._replies.append(AIMessage(f"noted {asked.id}", id=f"{asked.id}-answer"))
        config = {"configurable": {"thread_id": session}}
        context = {"session_id": session, "user_id": user}
        loop, self._loop = self._loop, None
        try:
            return overtaken_on_loop(
                lambda: agent.ainvoke({"messages": [asked]}, config, context=context),
                self.memory.aclose,
                delay,
                run=loop.run_until_complete,
            )
        finally:
            loop.close()

    def close(self) -> None:
        """Close the memory the middleware reads (and the driver's event loop)."""
        if self._loop is not None:
            self._loop.close()
        self.memory.close()

    def after_close(self) -> BaseException | None:
        """One agent run after `close`."""
        agent, _, _ = self._agent(ADD_WINDOW)
        asked: list[BaseMessage] = [HumanMessage("Still there?")]
        return raised(lambda: self._run(agent, asked, "closed", "closed-user"))


def question_id(session: str, query: str) -> str:
    """The same id for the same question in the same session."""
    digest = hashlib.blake2b(f"{session}\x00{query}".encode(errors="surrogatepass"), digest_size=6)
    return f"q-{digest.hexdigest()}"


def make(place: Place) -> MiddlewareDriver:
    """The sync driver (``invoke``)."""
    return MiddlewareDriver(place)
