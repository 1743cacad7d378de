"""What `CtxBudgetMemory` adds to LlamaIndex's memory interface: pinned facts and summaries.

LlamaIndex's ``BaseMemory`` reads and writes a conversation (``get``, ``put``, ``set``,
``reset``); a ctxbudget memory also keeps long-term memory beside it: facts pinned to the
session or to the user, offered on every ``get`` at ``Tier.PINNED`` (`LongTermMemory.pin`,
`LongTermMemory.unpin`), and summaries that stand in for old stretches of the session once they
no longer fit (`LongTermMemory.summarize`). `CtxBudgetMemory` inherits these methods from
`LongTermMemory`; each checks the session's owner first (`CtxBudgetMemory._owner`: a session
another user started is refused, `SessionOwnerError`, before anything is read or written), then
delegates to its `ContextMemory`.

Separate from `llama_index.ctxbudget.memory`, which implements LlamaIndex's interface (building,
serializing, reading and writing the conversation): this is only the part LlamaIndex has no
name for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ctxbudget.core.numbers import flag
from ctxbudget.errors import ConfigurationError

if TYPE_CHECKING:
    from ctxbudget.core.summaries import Summarizer
    from ctxbudget.memory.context import ContextMemory

__all__ = ["LongTermMemory"]


class LongTermMemory:
    """Pinned facts and summaries of a session: the methods `CtxBudgetMemory` inherits here.

    The class that inherits them has the session (``session_id``), the user (``user_id``) and
    the `ContextMemory` they are kept in (``context_memory``).
    """

    if TYPE_CHECKING:  # CtxBudgetMemory's fields and property (pydantic must not see them here)
        session_id: str
        user_id: str | None

        @property
        def context_memory(self) -> ContextMemory: ...  # noqa: D102

        def _owner(self, *, write: bool) -> None: ...

    def pin(self, text: str, *, user_wide: bool = False) -> str:
        """Pin a fact, offered on every `get` at ``Tier.PINNED``; returns its id.

        Args:
            text: the fact.
            user_wide: attach it to ``user_id`` (every session of the user), not the session.

        Raises:
            SessionOwnerError: the session was started by another user; nothing was pinned.
            ConfigurationError: ``user_wide`` without a ``user_id``, or not a bool.
        """
        # A str "false" is not False: it would pin the fact to every session of the user.
        user_wide = flag(user_wide, "CtxBudgetMemory.pin(user_wide=)")
        # A pin to the session is a write to it: a new session is claimed for user_id.
        self._owner(write=not user_wide)
        if user_wide:
            if self.user_id is None:
                msg = "pin(user_wide=True) needs a user_id; pass user_id= to from_defaults"
                raise ConfigurationError(msg)
            return self.context_memory.pin(user_id=self.user_id, text=text)
        return self.context_memory.pin(self.session_id, text)

    def unpin(self, id: str) -> bool:  # noqa: A002 - the name ContextMemory uses
        """Remove a pinned fact of the session, or else of the user; True when it existed.

        Raises:
            SessionOwnerError: the session was started by another user; nothing was removed.
        """
        self._owner(write=False)
        if self.context_memory.unpin(id, session_id=self.session_id):
            return True
        return self.user_id is not None and self.context_memory.unpin(id, user_id=self.user_id)

    def summarize(self, summarizer: Summarizer | None = None, **kwargs: Any) -> list[str]:
        """Fold old stretches of the session into stored summaries (`ContextMemory.summarize`).

        Pass an `LLMSummarizer` to summarize with a LlamaIndex LLM; returns the new summary ids.

        Raises:
            SessionOwnerError: the session was started by another user; nothing was read.
        """
        self._owner(write=False)
        return self.context_memory.summarize(self.session_id, summarizer, **kwargs)
