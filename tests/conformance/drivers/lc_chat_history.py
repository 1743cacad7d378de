"""The LangChain door `CtxBudgetChatMessageHistory` over the memory, read through a budget.

- ``add``: ``add_messages`` of the session's history (`HumanMessage`/`AIMessage` with the
  turns' ids, the user given to the history).
- ``send``: the budgeted view a ``RunnableWithMessageHistory`` chain sends: the history's
  ``messages`` (read from the store on every call) and the question, through
  ``budget_messages(max_tokens=budget)`` (`lc_budget_messages.budgeted`): ``got`` is the
  returned messages by id, ``chosen`` the report's kept messages by the same ids;
  ``extra["history"]`` is every message the history returned.
- ``bad``: ``session_id``/``user_id`` go to the history, ``text`` is a message's content
  given to ``add_messages``, ``budget`` goes to the view; other names go to the history.
- ``cancel_delete``: the history's ``aclear``, cancelled as soon as it started.
- ``close``: closes the memory; ``after_close`` reads the history again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from langchain_ctxbudget import CtxBudgetChatMessageHistory, budget_messages

from .base import Place, Received, Refusal, Turn
from .common import (
    BUDGET_NAMES,
    MODEL,
    attempt,
    cancelled,
    framework_value,
    gathered,
    raised,
)
from .lc_budget_messages import budgeted

__all__ = ["ChatHistoryDriver", "make"]

SYSTEM = "Be brief."


class ChatHistoryDriver:
    """`CtxBudgetChatMessageHistory` per session, over one memory."""

    name = "lc_chat_history"
    can = frozenset(
        {"add", "send", "report", "span", "removal", "bad", "kinds", "close", "cancel", "gather"}
    )
    takes = frozenset({"budget", "text", "session_id", "user_id"})

    def __init__(self, place: Place) -> None:
        self.memory = place.open_memory()

    def _history(self, session: object, user: object, **options: Any) -> Any:
        return CtxBudgetChatMessageHistory(self.memory, session, user_id=user, **options)  # type: ignore[arg-type]

    def add(self, session: str, user: str, turns: Sequence[Turn]) -> None:
        """``add_messages`` of the session's history."""
        kinds = {"user": HumanMessage, "assistant": AIMessage}
        self._history(session, user).add_messages([kinds[t.role](t.text, id=t.id) for t in turns])

    def add_gathered(self, session: str, user: str, turns: Sequence[Turn]) -> None:
        """One ``aadd_messages`` per turn, made at once on one loop."""
        kinds = {"user": HumanMessage, "assistant": AIMessage}
        history = self._history(session, user)
        gathered(
            [lambda t=t: history.aadd_messages([kinds[t.role](t.text, id=t.id)]) for t in turns]
        )

    def send(self, session: str, user: str, query: str, budget: int) -> Received:
        """The history's messages and ``query``, within ``budget``."""
        history = self._history(session, user).messages
        asked = HumanMessage(query, id=f"{session}:question")
        received = budgeted([SystemMessage(SYSTEM), *history, asked], budget)
        received.extra["history"] = [(str(m.id), m.text) for m in history]
        return received

    def bad(self, argument: str, value: object) -> Refusal | None:
        """One history call with ``argument=value``."""
        if argument in BUDGET_NAMES:
            return attempt(
                lambda: budget_messages([HumanMessage("Hi")], max_tokens=value, model=MODEL)  # type: ignore[arg-type]
            )
        call: dict[str, Any] = {"session": "bad-values", "user": "bad-user", "text": "hello"}
        options: dict[str, Any] = {}
        if argument in ("text", "session_id", "user_id"):
            call[argument.removesuffix("_id")] = value
        else:
            options[argument] = value
        message = framework_value(lambda: HumanMessage(call["text"]), "a message's content")
        history = self._history
        return attempt(
            lambda: history(call["session"], call["user"], **options).add_messages([message])
        )

    def cancel_delete(self, session: str) -> None:
        """Start the history's ``aclear`` of ``session`` and cancel it at once."""
        cancelled(self._history(session, None).aclear)

    def close(self) -> None:
        """Close the memory the history is kept in."""
        self.memory.close()

    def after_close(self) -> BaseException | None:
        """One read of a history after `close`."""
        return raised(lambda: self._history("closed", "closed-user").messages)


def make(place: Place) -> ChatHistoryDriver:
    """The driver."""
    return ChatHistoryDriver(place)
