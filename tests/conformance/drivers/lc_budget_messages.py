"""The LangChain door ``budget_messages`` (the ``trim_messages`` drop-in) over a message list.

No memory: each session's turns are a list of LangChain messages the driver keeps (what a
caller's own state would be), so removal by another object does not apply (``can`` says so)
and nothing needs closing.

- ``add``: the turns become `HumanMessage`/`AIMessage` objects with the turns' ids.
- ``send``: ``budget_messages([system, *session, question], max_tokens=budget)``. The caller
  gets message objects, ids and all: ``got`` is each returned message's (id, text) (the
  system message, which has none, left out), ``chosen`` the report's (``on_context``) kept
  messages, mapped from its positional keys back to the same ids.
- ``bad``: ``budget`` is ``max_tokens``, ``query`` the question's content (no ``text``: the
  function stores nothing); other names are passed as they are.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.messages.utils import convert_to_openai_messages

from ctxbudget.core.ids import internal_id
from langchain_ctxbudget import CallContext, budget_messages

from .base import Place, Received, Refusal, Turn
from .common import (
    MODEL,
    SPANS,
    HoldsNothing,
    assembly_tokens,
    attempt,
    count_sent,
    framework_value,
    routed,
    texts_of,
)

__all__ = ["BudgetMessagesDriver", "budgeted", "make"]

SYSTEM = "Be brief."


class BudgetMessagesDriver(HoldsNothing):
    """``budget_messages`` over each session's list of messages."""

    name = "lc_budget_messages"
    can = frozenset({"add", "send", "report", "span", "bad", "kinds"})
    takes = frozenset({"budget", "query", "query=text"})

    def __init__(self, place: Place) -> None:
        self._sessions: dict[str, list[BaseMessage]] = {}

    def add(self, session: str, user: str, turns: Sequence[Turn]) -> None:
        """Append the turns to the session's messages."""
        kept = self._sessions.setdefault(session, [])
        for turn in turns:
            kind = HumanMessage if turn.role == "user" else AIMessage
            kept.append(kind(turn.text, id=turn.id))

    def send(self, session: str, user: str, query: str, budget: int) -> Received:
        """``budget_messages`` of the session and ``query`` within ``budget``."""
        asked = HumanMessage(query, id=f"{session}:question")
        return budgeted([SystemMessage(SYSTEM), *self._sessions.get(session, []), asked], budget)

    def bad(self, argument: str, value: object) -> Refusal | None:
        """One ``budget_messages`` call with ``argument=value``."""
        query, options = routed(argument, value, {"max_tokens": 300}, budget_as="max_tokens")
        asked = framework_value(lambda: HumanMessage(query), "a message's content")  # type: ignore[arg-type]
        return attempt(lambda: budget_messages([asked], model=MODEL, **options))


def budgeted(given: list[BaseMessage], budget: int) -> Received:
    """``budget_messages(given, max_tokens=budget)``: what it returned, and its report.

    The report keys the messages by position (``start_on="human"`` first drops what precedes
    the first human message); ``chosen`` maps them back to the messages' own ids.
    """
    calls: list[CallContext] = []
    SPANS.clear()
    out = budget_messages(given, max_tokens=budget, model=MODEL, on_context=calls.append)
    span = assembly_tokens()
    context = calls[-1].context if calls else None
    chosen: list[tuple[str, str]] = []
    if context is not None:
        rest = given[1:]
        first = next((i for i, m in enumerate(rest) if isinstance(m, HumanMessage)), len(rest))
        by_key = {internal_id("message", i): m for i, m in enumerate([given[0], *rest[first:]])}
        kept = [(by_key[item.id], item.text) for item in context.included if item.id in by_key]
        chosen = [(str(message.id), text) for message, text in kept if message.id]
    sent = convert_to_openai_messages(out)
    return Received(
        got=[(m.id, m.text) for m in out if m.id],
        chosen=chosen,
        available=budget,
        sent_tokens=count_sent(sent),
        report_tokens=None if context is None else context.tokens_used,
        span_tokens=span,
        report=context,
        texts=texts_of(sent),
        messages=list(sent),
    )


def make(place: Place) -> BudgetMessagesDriver:
    """The driver."""
    return BudgetMessagesDriver(place)
