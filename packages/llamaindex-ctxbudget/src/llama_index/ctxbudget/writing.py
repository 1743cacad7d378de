"""Writing a `CtxBudgetMemory`'s conversation: ``put``, ``put_messages``, ``set``, ``reset``.

`ConversationWrites` holds the methods of LlamaIndex's memory interface that change the
session (`CtxBudgetMemory` inherits them; reading and building stay in
`llama_index.ctxbudget.memory`). Each checks every message first, then the session's owner (a
write claims a new session for ``user_id``, `SessionOwnerError` refuses another user's), then
stores (`llama_index.ctxbudget.storing`):

* a question put again when no reply followed it (a retry after a failed model call) is
  stored once (`retried_question`; the store decides, read only when what this object stored
  last, ``_last_put``, is that question or unknown);
* the last user message put with its own blocks (an image) is kept as the current message,
  sent as given while it is the one answered (`llama_index.ctxbudget.current`);
* the record of the last user message put, while nothing put after it (``_mine``), is the
  question a ``get`` answers even when another writer's message came after it
  (`llama_index.ctxbudget.assembly.question_of`);
* ``set`` replaces the conversation; the stored system messages stay unless the new messages
  bring their own (an agent's ``run(chat_history=...)`` calls ``set``: the system prompt put
  into the memory is the agent's instruction, not part of that history).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from llama_index.core.base.llms.types import ChatMessage, MessageRole

from ctxbudget.core.numbers import flag
from ctxbudget.memory.writing.owners import check_session_owner, claim_session
from llama_index.ctxbudget.current import CurrentMessage, current_of
from llama_index.ctxbudget.storing import (
    LastPut,
    check_writes,
    clear_session,
    last_put,
    retried_question,
    split_messages,
    store_messages,
)

if TYPE_CHECKING:
    from ctxbudget.memory.context import ContextMemory

__all__ = ["ConversationWrites"]

_DOOR = "CtxBudgetMemory"


class ConversationWrites:
    """``put``, ``put_messages``, ``set``, ``reset`` and ``clear`` of `CtxBudgetMemory`.

    Before LlamaIndex's ``BaseMemory`` among `CtxBudgetMemory`'s bases (it declares them
    abstract).
    """

    if TYPE_CHECKING:  # CtxBudgetMemory's fields (pydantic must not see them here)
        session_id: str
        user_id: str | None
        _memory: ContextMemory
        _current: CurrentMessage | None
        _last_put: LastPut | None
        _mine: str | None

    def put(self, message: ChatMessage) -> None:
        """Store one message (a system message becomes a never-cut system instruction).

        A user message put again when no reply followed it (a retry) is not stored twice.
        """
        self.put_messages([message])

    def put_messages(self, messages: list[ChatMessage]) -> None:
        """Store messages in order, in one batch; all are checked before any is written.

        When the first is a user message the session's last message already says, with no
        reply after it, it is a retry: not stored again (the new attempt's blocks are the ones
        sent, `llama_index.ctxbudget.current`).

        Raises:
            InvalidItemError: not a ``ChatMessage``, or a malformed tool call; nothing was written.
            SessionOwnerError: the session was started by another user; nothing was written.
            StoreInputError: a message the store cannot take; nothing was written.
        """
        split = split_messages(messages)
        self._owner(write=True)
        check_writes(self._memory, self.session_id, split, user_id=self.user_id)
        stored = split.stored
        retried = retried_question(self._memory, self.session_id, stored, hint=self._last_put)
        ids = store_messages(
            self._memory,
            self.session_id,
            split.systems,
            stored[1:] if retried is not None else stored,
            user_id=self.user_id,
        )
        if stored:  # else the session's last message, and what stands for it, are unchanged
            self._last_put = last_put(stored)
            last = ids[-1] if ids else retried
            self._current = current_of(split.last_given, last)
            self._mine = last if stored[-1]["role"] == "user" else None

    def set(self, messages: list[ChatMessage]) -> None:
        """Replace the session's conversation (pinned facts stay).

        The stored system messages are replaced only when ``messages`` holds system messages
        of its own; otherwise they stay (``reset`` forgets them).

        Raises:
            InvalidItemError: not a ``ChatMessage``, or a malformed tool call; nothing was changed.
            SessionOwnerError: the session was started by another user; nothing was changed.
            StoreInputError: a message the store cannot take; nothing was changed.
        """
        split = split_messages(messages)
        self._owner(write=True)
        check_writes(self._memory, self.session_id, split, user_id=self.user_id)
        self._current = self._last_put = self._mine = None
        clear_session(self._memory, self.session_id, systems=bool(split.systems))
        ids = store_messages(
            self._memory, self.session_id, split.systems, split.stored, user_id=self.user_id
        )
        self._last_put = last_put(split.stored)
        last = ids[-1] if ids else None
        self._current = current_of(split.last_given, last)
        self._mine = last if split.stored and split.stored[-1]["role"] == "user" else None

    def _start(self, history: Sequence[ChatMessage] | None, system_prompt: str | None) -> None:
        """``from_defaults``' ``chat_history`` (`set`), then its ``system_prompt`` (`put`).

        The prompt is checked before the history replaces anything: a prompt the store refuses
        leaves the session as it was.
        """
        prompt = [ChatMessage(role=MessageRole.SYSTEM, content=system_prompt)]
        prompt = prompt if system_prompt else []
        check_writes(self._memory, self.session_id, split_messages(prompt), user_id=self.user_id)
        if history is not None:
            self.set(list(history))
        if prompt:
            self.put_messages(prompt)

    def reset(self) -> None:
        """Forget the session's messages, system messages and summaries (pinned facts stay)."""
        self.clear()

    def clear(self, *, pins: bool = False) -> None:
        """`reset`, by the name both adapters use; ``pins=True`` also forgets pinned facts.

        Raises:
            ConfigurationError: ``pins`` is not a bool (a str "false" would forget them).
        """
        pins = flag(pins, "CtxBudgetMemory.clear(pins=)")
        self._owner(write=False)
        self._current = self._last_put = self._mine = None
        clear_session(self._memory, self.session_id, pins=pins)

    def _owner(self, *, write: bool) -> None:
        """A session another user started is refused (`SessionOwnerError`); a write claims it."""
        if write:
            claim_session(self._memory, self.session_id, user_id=self.user_id, door=_DOOR)
        else:
            check_session_owner(self._memory, self.session_id, user_id=self.user_id, door=_DOOR)
