"""The LlamaIndex door: `CtxBudgetMemory` in a real ``SimpleChatEngine``.

The LLM is LlamaIndex's MockLLM recording each prompt (`_llama.RecordingLLM`), so what the
driver reads is exactly what the LLM received. One `CtxBudgetMemory` (and engine) per
session, user and budget, all over the driver's one `ContextMemory`; the system prompt is put
into the memory (``from_defaults(system_prompt=...)``), so the LLM gets what ``get`` returned.

- ``add``: LlamaIndex's ``ChatMessage`` has no id (``put`` would give every message a new
  one), so the turns are stored with their ids in the memory the door reads
  (``ContextMemory.add_messages``), where the suite deletes and replaces them by id.
- ``pin``: ``ContextMemory.pin`` (the same as `CtxBudgetMemory.pin`, which pins to its own
  session or user only).
- ``send``: one ``engine.chat(query)``, which also puts the question and the reply into the
  session (``stored`` says which); ``got``: the stored things found in what the LLM received
  (`common.identify`), ``chosen``: the report's (``last_context``) included items by their
  callers' ids.
- ``bad``: ``budget`` is ``token_limit``, ``session_id``/``user_id`` go to ``from_defaults``,
  ``query``/``text`` to ``chat``; other names go to ``from_defaults``.
- ``cancel_delete``: ``areset`` of the session's memory, cancelled as soon as it started.
- ``close``: closes the memory; ``after_close`` chats again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.chat_engine import SimpleChatEngine

from llama_index.ctxbudget import CtxBudgetMemory

from ._llama import RecordingLLM, openai_form, use_settings
from .base import Place, Received, Refusal, Turn
from .common import (
    BUDGET_NAMES,
    MODEL,
    SPANS,
    Registry,
    assembly_tokens,
    attempt,
    cancelled,
    framework_value,
    gathered,
    heard,
    new_turns,
    payload,
    raised,
)

__all__ = ["MemoryDriver", "bad_parts", "make"]

SYSTEM = "Be brief."
Engine = tuple[SimpleChatEngine, CtxBudgetMemory]


class MemoryDriver:
    """`CtxBudgetMemory` per session in a ``SimpleChatEngine``, over one `ContextMemory`."""

    name = "li_memory"
    can = frozenset(
        {
            *("add", "send", "report", "span", "removal", "bad", "kinds", "close", "pin"),
            *("cancel", "gather"),
        }
    )
    takes = frozenset({"budget", "query", "query=text", "text", "session_id", "user_id"})

    def __init__(self, place: Place) -> None:
        use_settings(place.embedder)
        self.memory = place.open_memory()
        self.registry = Registry()
        self.llm = RecordingLLM()
        self._engines: dict[tuple[str, str, int], Engine] = {}

    def _engine(self, session: Any, user: Any, budget: Any, **options: Any) -> Engine:
        key = (session, user, budget)
        cached = not options and all(isinstance(v, str | int) for v in key)
        if cached and key in self._engines:
            return self._engines[key]
        chat = CtxBudgetMemory.from_defaults(
            memory=self.memory,
            session_id=session,
            user_id=user,
            token_limit=budget,
            model=MODEL,
            system_prompt=SYSTEM,
            **options,
        )
        engine = SimpleChatEngine.from_defaults(llm=self.llm, memory=chat)
        if cached:
            self._engines[key] = (engine, chat)
        return engine, chat

    def add(self, session: str, user: str, turns: Sequence[Turn]) -> None:
        """Store the turns, with their ids, in the memory the door reads."""
        self.memory.add_messages(session, [payload(t) for t in turns], user_id=user, progress=False)
        for turn in turns:
            self.registry.note(turn.id, turn.text)

    def add_gathered(self, session: str, user: str, turns: Sequence[Turn]) -> None:
        """One ``aput`` per turn of the session's `CtxBudgetMemory`, made at once on one loop."""
        chat = CtxBudgetMemory.from_defaults(
            memory=self.memory, session_id=session, user_id=user, token_limit=300, model=MODEL
        )
        gathered([lambda t=t: chat.aput(ChatMessage(role=t.role, content=t.text)) for t in turns])
        for turn in turns:
            self.registry.note(turn.id, turn.text)

    def pin(self, text: str, id: str, session: str | None = None, user: str | None = None) -> None:  # noqa: A002
        """Pin in the memory the door reads."""
        self.memory.pin(session, text, user_id=user, id=id)
        self.registry.note(id, text)

    def send(self, session: str, user: str, query: str, budget: int) -> Received:
        """One ``chat`` of the session's engine within ``budget``."""
        engine, chat = self._engine(session, user, budget)
        before = {r.id for r in self.memory.history(session)}
        SPANS.clear()
        engine.chat(query)
        span = assembly_tokens()
        stored = new_turns(self.memory, session, before)
        sent = openai_form(self.llm.prompts[-1])
        context = chat.last_context
        return heard(sent, context, self.registry.texts, budget, span_tokens=span, stored=stored)

    def bad(self, argument: str, value: object) -> Refusal | None:
        """One chat with ``argument=value``."""
        settings, query, options = bad_parts(argument, value)
        return attempt(lambda: self._engine(**settings, **options)[0].chat(query))  # type: ignore[arg-type]

    def cancel_delete(self, session: str) -> None:
        """Start ``areset`` of the session's `CtxBudgetMemory` and cancel it at once."""
        chat = CtxBudgetMemory.from_defaults(
            memory=self.memory, session_id=session, token_limit=300, model=MODEL
        )
        cancelled(chat.areset)

    def close(self) -> None:
        """Close the memory the door reads."""
        self.memory.close()

    def after_close(self) -> BaseException | None:
        """One chat after `close`."""
        return raised(lambda: self._engine("closed", "closed-user", 300)[0].chat("Still there?"))


def bad_parts(argument: str, value: object) -> tuple[dict[str, Any], object, dict[str, Any]]:
    """Where ``argument=value`` goes: (the engine's settings, the chat's query, the options).

    Raises:
        Inexpressible: a query LlamaIndex's own ``ChatMessage`` refuses (`framework_value`).
    """
    settings: dict[str, Any] = {"session": "bad-values", "user": "bad-user", "budget": 300}
    query: object = "hello"
    options: dict[str, Any] = {}
    if argument in BUDGET_NAMES:
        settings["budget"] = value
    elif argument in ("session_id", "user_id"):
        settings[argument.removesuffix("_id")] = value
    elif argument in ("query", "text"):
        query = value
    else:
        options[argument] = value
    framework_value(lambda: ChatMessage(role="user", content=query), "a message's content")
    return settings, query, options


def make(place: Place) -> MemoryDriver:
    """The driver."""
    return MemoryDriver(place)
