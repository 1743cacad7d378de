"""`CtxBudgetChatMessageHistory`: a LangChain chat history kept in a `ContextMemory`."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from functools import partial

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage, RemoveMessage

from ctxbudget.core.ids import check_caller_id
from ctxbudget.errors import StoreInputError
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.ordering import CallOrder
from ctxbudget.memory.reading.tool_steps import answered_steps, tool_steps_together
from ctxbudget.memory.writing.owners import check_session_owner, claim_session
from ctxbudget.store.records import Record, require_name
from langchain_ctxbudget.convert import from_record, to_record_payload

__all__ = ["CtxBudgetChatMessageHistory"]

_DOOR = "CtxBudgetChatMessageHistory"


class CtxBudgetChatMessageHistory(BaseChatMessageHistory):
    """The messages of one session, stored in a `ctxbudget.memory.context.ContextMemory` (Chroma).

    A drop-in storage for ``RunnableWithMessageHistory``: messages are stored with their ids,
    names and tool calls, embedded by the memory's model so they can be recalled later, and
    read back in order. New code should use `CtxBudgetMiddleware` with ``memory=`` instead: it
    stores the conversation the same way and also keeps every model call within the window.

    With a ``user_id``, a session another user started is refused on every read and write
    (`SessionOwnerError`, as `CtxBudgetMiddleware` refuses it; docs/memory.md), and the first
    write to a new session makes the user its owner.

    Args:
        memory: where the messages are kept.
        session_id: the conversation.
        user_id: the user the messages belong to (lets the memory recall across sessions).

    >>> history = CtxBudgetChatMessageHistory(memory, "s1")  # doctest: +SKIP
    >>> history.add_user_message("I moved to Lisbon")  # doctest: +SKIP
    >>> [m.content for m in history.messages]  # doctest: +SKIP
    ['I moved to Lisbon']
    """

    def __init__(
        self, memory: ContextMemory, session_id: str, *, user_id: str | None = None
    ) -> None:
        if not isinstance(session_id, str) or not session_id:
            msg = f"session_id must be a non-empty string, got {session_id!r}"
            raise StoreInputError(msg)
        if user_id is not None:  # else refused as "another user" on every call, confusingly
            require_name("user_id", user_id)
        self.memory = memory
        self.session_id = session_id
        self.user_id = user_id
        # Async calls apply in the order they were called on their loop (gathered adds too).
        self._order = CallOrder()

    def _owner(self, *, write: bool) -> None:
        """A session another user started is refused (`SessionOwnerError`); a write claims it."""
        if write:
            claim_session(self.memory, self.session_id, user_id=self.user_id, door=_DOOR)
        else:
            check_session_owner(self.memory, self.session_id, user_id=self.user_id, door=_DOOR)

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """Every message of the session, oldest first, each tool result right after its call.

        Two writers on one session (a user's two tabs) can store another turn's message between
        a tool call and its result; it comes after the result here (`tool_steps_together`), so
        the history stays a conversation providers accept. So does a call never answered (a
        run cancelled while its tool ran): it is left out once the conversation went on past
        it, and a result whose call is not stored too (`answered_steps`); both stay stored
        (`ContextMemory.history`).

        Raises:
            SessionOwnerError: the session was started by another user than ``user_id``.
        """
        self._owner(write=False)
        records = answered_steps(tool_steps_together(self.memory.history(self.session_id)))
        return [from_record(r) for r in records]

    async def aget_messages(self) -> list[BaseMessage]:
        """Async `messages` (`ContextMemory.ahistory`)."""

        async def read() -> list[Record]:
            await self.memory.arun(partial(self._owner, write=False))
            return await self.memory.ahistory(self.session_id)

        records = await self._order.run(read, writes=False)  # after the adds called before it
        return [from_record(r) for r in answered_steps(tool_steps_together(records))]

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Store messages in order (all checked before any is written).

        Messages without an id get a new one. A message of media only (an image, a file) is
        stored as a mark per block (``[image]``...: the memory keeps text); one with no text,
        no media and no tool calls (valid or invalid) is not stored.

        Raises:
            StoreInputError: a message the store cannot keep; nothing was written.
            InvalidItemError: a message id in ctxbudget's own id space (``ctxbudget:...``);
                nothing was written.
            SessionOwnerError: the session was started by another user than ``user_id``;
                nothing was written.
        """
        if isinstance(messages, str | bytes | BaseMessage | Mapping) or not isinstance(
            messages, Iterable
        ):
            msg = (
                f"{_DOOR}.add_messages takes a list of messages, got {type(messages).__name__}; "
                "pass [message] (or add_user_message(text)); nothing was written"
            )
            raise StoreInputError(msg)
        now = time.time()
        payloads = []
        for index, message in enumerate(list(messages)):
            if not isinstance(message, BaseMessage):
                msg = (
                    f"message {index} is a {type(message).__name__}, not a LangChain message; "
                    "convert it first (langchain_core.messages.convert_to_messages); nothing "
                    "was written"
                )
                raise StoreInputError(msg)
            if isinstance(message, RemoveMessage):
                msg = (
                    f"message {index} is a RemoveMessage (id {message.id!r}): the history keeps "
                    "messages and cannot remove one; clear() forgets the whole session"
                )
                raise StoreInputError(msg)
            if message.id:
                key = check_caller_id(message.id, f"message {index} ({message.type})")
            else:
                key = f"{self.session_id}:{uuid.uuid4().hex[:16]}"
            payload = to_record_payload(message, id=key, timestamp=now)
            if payload is None:
                if message.type not in ("human", "ai", "system", "tool"):
                    msg = (
                        f"a {message.type} message cannot be stored; store human, ai, system "
                        "and tool messages"
                    )
                    raise StoreInputError(msg)
                continue
            payloads.append(payload)
        if payloads:
            self._owner(write=True)
            self.memory.add_messages(
                self.session_id, payloads, user_id=self.user_id, progress=False
            )

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Async `add_messages`: stored after the async calls made before it on the loop."""
        await self._order.run(lambda: self.memory.arun(self.add_messages, messages), writes=True)

    def clear(self, *, pins: bool = False) -> None:
        """Forget the session's messages and summaries (`ContextMemory.clear`).

        Pinned facts of the session stay unless ``pins=True``, as LlamaIndex's ``reset()``.

        Raises:
            SessionOwnerError: the session was started by another user than ``user_id``.
        """
        self._owner(write=False)
        self.memory.clear(self.session_id, pins=pins)

    async def aclear(self, *, pins: bool = False) -> None:
        """Async `clear` (``pins`` as there)."""
        await self._order.run(lambda: self.memory.arun(partial(self.clear, pins=pins)), writes=True)
