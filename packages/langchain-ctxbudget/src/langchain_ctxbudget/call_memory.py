"""The memory part of one model call of `CtxBudgetMiddleware` (with ``memory=``).

`CallMemory` is the middleware's part that works with its `ContextMemory`: whose run a call
is (`run_identity`), what the memory adds to the call (`recall`: pinned facts, summaries,
saved values, memories, documents), storing the state's messages (`store_edits` for those
edited in the state, `store_messages`), recording what was sent (`ContextMemory.record_context`)
and, when the agent finishes, storing the run's last messages and folding old stretches into
summaries (`store_run`, `ContextMemory.summarize`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from langchain_core.messages import BaseMessage

from ctxbudget import AssembledContext, Budget, Summarizer, TokenCounter
from ctxbudget.errors import ConfigurationError
from ctxbudget.memory.values import ValueQuery
from langchain_ctxbudget.edits import store_edits
from langchain_ctxbudget.identity import run_identity, text_value, values_scope
from langchain_ctxbudget.recall import Recalled, recall
from langchain_ctxbudget.storing import StoredKeys, digest, store_messages, store_run

if TYPE_CHECKING:
    from typing import Any

    from langgraph.runtime import Runtime

    from ctxbudget.memory.context import ContextMemory
    from ctxbudget.memory.policy.presets import StrategyLike
    from ctxbudget.memory.reading.candidates import Additions

__all__ = ["CallMemory", "id_option"]


def id_option(name: str, value: object) -> str | None:
    """The middleware's ``session_id=`` or ``user_id=`` option as the id it names, or None.

    Taken as a run's own ids are (`ctxbudget`'s LangChain identity: a non-empty str, or the
    text of an integer or a UUID, numpy's too).

    Raises:
        ConfigurationError: anything else (an empty str, a float...).
    """
    if value is None:
        return None
    found = text_value(value)
    if found is None:
        msg = (
            f"CtxBudgetMiddleware: {name} must be a non-empty str (or an integer or UUID, taken "
            f"as its text), got {value!r} ({type(value).__name__}); leave it out (None) to take "
            "it from each run's context or config"
        )
        raise ConfigurationError(msg)
    return found


class CallMemory:
    """What a model call reads from and writes to the memory (a part of `CtxBudgetMiddleware`).

    Attributes:
        memory: the memory (None: the middleware has none, and nothing here runs).
        session_id: the session the options give (None: each run's).
        user_id: the user the options give (None: each run's).
        documents: which document collections are searched.
        values: the namespace template of the saved values offered, or None.
        summarizer: folds old stretches into summaries when a run ends, or None.
        strategy: the middleware's strategy, merged over the memory's.
    """

    memory: ContextMemory | None
    session_id: str | None
    user_id: str | None
    documents: bool | str | Sequence[str]
    values: tuple[str, ...] | None
    summarizer: Summarizer | None
    strategy: StrategyLike | None
    _stored: StoredKeys
    _recalled: Recalled

    def _identity(self, runtime: Runtime[Any] | None) -> tuple[str, str | None] | None:
        """The memory (session, user) of this run, or None without memory."""
        if self.memory is None:
            return None
        return run_identity(runtime, session_id=self.session_id, user_id=self.user_id)

    def _values_query(self, user: str | None) -> ValueQuery | None:
        """The saved values offered to a run of ``user`` (``values=``), or None."""
        if self.values is None:
            return None
        namespace, owner = values_scope(self.values, user)
        return ValueQuery(namespace=namespace, user_id=owner)

    def _recall(
        self,
        memory: ContextMemory,
        messages: Sequence[BaseMessage],
        keys: Sequence[str],
        ids: tuple[str, str | None],
        in_state: Collection[str],
        room: Budget | int,
        digests: Sequence[int],
    ) -> tuple[Additions, str]:
        """What the memory adds to the call (`recall`), then the state's messages stored.

        Returned with the session's generation the additions were gathered in. Messages the
        state holds edited are stored first (`store_edits`), so nothing gathered quotes them.
        ``digests``: each message's `digest` (`CallMemory._unstored`).
        """
        held = store_edits(memory, self._stored, messages, keys, ids, digests)
        added, generation = recall(
            memory,
            self._recalled,
            messages,
            keys,
            ids,
            in_state,
            room,
            self.documents,
            self.strategy,
            self._values_query(ids[1]),
        )
        # Stored after the gathering, which does not need them (they are in the state): the
        # background writer then stores them while this call packs and the model answers, not
        # while the call reads the session. (Stored once the call is packed instead, measured
        # on 2026-11-30: no gain, `bench_middleware.py`; docs/benchmarks.md.)
        store_messages(memory, self._stored, messages, keys, ids, generation, held, digests)
        return added, generation

    def _unstored(
        self,
        memory: ContextMemory,
        messages: Sequence[BaseMessage],
        keys: Sequence[str],
        ids: tuple[str, str | None],
    ) -> tuple[list[int], list[int]]:
        """Each message's `digest`, and the positions not stored yet as they are.

        As the session was when this middleware last stored in it (`StoredKeys.since_last`).
        """
        digests = [digest(message) for message in messages]
        fresh, _ = self._stored.since_last(memory.namespace, ids[0], keys, digests)
        return digests, fresh

    def _record(
        self,
        ctx: AssembledContext,
        ids: tuple[str, str | None] | None,
        counter: TokenCounter,
        generation: str | None,
    ) -> None:
        """Log what the call sends in the memory's context log (`ContextMemory.record_context`)."""
        if self.memory is not None and ids is not None:
            self.memory.record_context(
                ctx, session_id=ids[0], user_id=ids[1], counter=counter, generation=generation or ""
            )

    def _finish(
        self,
        messages: Sequence[BaseMessage],
        ids: tuple[str, str | None] | None,
        thread: str | None,
    ) -> None:
        """A run ended: store its last messages and fold old stretches into summaries."""
        if self.memory is not None and ids is not None:
            store_run(self.memory, self._stored, self._recalled, messages, ids, thread)
            if self.summarizer is not None:
                self.memory.summarize(ids[0], self.summarizer)
