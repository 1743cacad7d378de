"""What one `CtxBudgetMemory.get` assembles: which message is the question, then candidates + core.

`question_of` decides what ``get`` answers: the ``input`` given, else the session's last user
message (never an assistant's reply). When that message is the last one stored, it is *pending*:
rendered last and returned. An input that is not stored is sent by the caller itself: it is not
offered, its cost comes off the budget (`llama_index.ctxbudget.budget.call_budget`), so the
report counts exactly the messages ``get`` returns.

`assemble_session` gathers the session's candidates with `ContextMemory.candidates` (the
gathering `ContextMemory.assemble` uses, with its assembler settings), offers the stored system
messages once, as never-cut system items (their pinned records are not offered a second time),
and packs everything with the core `ContextAssembler`, with the session's previous assembly
as ``previous=`` (`ContextMemory.previous_contexts`): its report says what prefix they share.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from ctxbudget import AssembledContext, ContextAssembler, ContextItem, TokenCounter
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.inputs import extra_items
from ctxbudget.memory.policy.plan import plan_for
from ctxbudget.memory.policy.presets import StrategyLike
from ctxbudget.memory.reading.candidates import offered
from ctxbudget.memory.reading.session_state import is_stored_query
from ctxbudget.store.chroma_store import Record
from llama_index.ctxbudget.budget import call_budget
from llama_index.ctxbudget.storing import system_items

__all__ = ["NO_QUESTION", "Question", "assemble_get", "assemble_session", "question_of"]

NO_QUESTION = "(no message yet)"
"""The stand-in searched for when there is nothing to answer yet (never shown)."""


@dataclass(frozen=True, slots=True)
class Question:
    """What one ``get`` answers.

    Attributes:
        text: the question ("" when the session has no user message and no input is given).
        pending: it is the session's last stored message: rendered last and returned.
        sent_by_caller: an input that is not stored: the caller sends it after the messages.
    """

    text: str
    pending: bool = False
    sent_by_caller: bool = False

    @property
    def asked(self) -> bool:
        """Whether there is a question to search by."""
        return bool(self.text.strip())


def _is_user_turn(record: Record) -> bool:
    return record.role == "user" and bool(record.text.strip())


def question_of(memory: ContextMemory, session_id: str, given: str | None) -> Question:
    """The question of a ``get``: ``given`` if not blank, else the last user message stored.

    The last message is read first (chat engines and agents store the question before they
    ask); only when it is not a user message is the recent window read
    (`MemoryConfig.recent_messages`), and the rest of the session only when that window holds
    no user message (a long run of tool calls).
    """
    newest = memory.history(session_id, limit=1)
    last = newest[-1] if newest else None
    if given is not None and given.strip():
        pending = is_stored_query(last, given)
        return Question(given, pending=pending, sent_by_caller=not pending)
    if last is None:
        return Question("")
    if _is_user_turn(last):
        return Question(last.text, pending=True)
    window = max(1, memory.config.recent_messages)
    recent = memory.history(session_id, limit=window)
    found = next((r for r in reversed(recent) if _is_user_turn(r)), None)
    if found is None and len(recent) >= window:
        found = next((r for r in reversed(memory.history(session_id)) if _is_user_turn(r)), None)
    return Question("" if found is None else found.text)


def assemble_session(
    memory: ContextMemory,
    session_id: str,
    question: Question,
    *,
    budget: int,
    model: str,
    user_id: str | None,
    extra: Sequence[ContextItem],
    strategy: StrategyLike | None = None,
) -> AssembledContext:
    """The assembly of one ``get``: what it returns is exactly ``to_messages()``.

    Args:
        memory: the `ContextMemory` holding the session.
        session_id: the conversation.
        question: what is answered (`question_of`); rendered last only when pending.
        budget: tokens the messages may use (`call_budget`).
        model: the model whose tokenizer counts.
        user_id: the user (pins, other sessions).
        extra: more items (memory blocks), offered as they are.
        strategy: merged over the memory's (`ctxbudget.memory.policy.plan.plan_for`).

    Raises:
        BudgetExceededError: the system messages, never-cut items and a pending question alone
            do not fit.
    """
    plan = plan_for(memory.config, memory.strategy, strategy)
    asked = question.asked
    found = memory.candidates(
        session_id,
        # Nothing to answer yet: a stand-in, never shown, and no searching beyond the session.
        question.text if asked else NO_QUESTION,
        budget=budget,
        model=model,
        user_id=user_id,
        documents=asked,
        other_sessions=None if asked else False,
        strategy=strategy,
    )
    systems = system_items(memory, session_id)
    # The system messages are pinned records too: offered once, as system items.
    own = {item.id for item in systems}
    found = dataclasses.replace(
        found, pinned=tuple(item for item in found.pinned if item.id not in own)
    )
    extras = extra_items([*systems, *extra])
    if question.pending:
        items = offered(found, question.text, system=None, tools=(), extras=extras)
    else:
        items = [*found.items, *extras]
    assembler = ContextAssembler(
        memory.counter_for(model),
        summarizer=memory.summarizer,
        min_exchanges=plan.config.min_exchanges,
    )
    # The session's previous assembly (by `get` or `ContextMemory.assemble`): the prefix shared.
    # "" is no generation (a session without records, as one deleted since): nothing kept.
    generation = found.generation
    kept = memory.previous_contexts
    previous = kept.get(session_id, generation=generation) if generation else None
    ctx = assembler.assemble(
        items, budget=plan.budget(budget), format="messages", previous=previous
    )
    if found.generation:
        memory.previous_contexts.put(session_id, ctx, generation=found.generation)
    memory.record_context(
        ctx, session_id=session_id, user_id=found.user_id, model=model, generation=generation
    )
    return ctx


def assemble_get(
    memory: ContextMemory,
    session_id: str,
    given: str | None,
    *,
    token_limit: int,
    initial_token_count: object,
    counter: TokenCounter,
    model: str,
    user_id: str | None,
    extra: Sequence[ContextItem],
    strategy: StrategyLike | None = None,
) -> AssembledContext:
    """One ``get``: its question (`question_of`), its budget (`call_budget`), its assembly.

    Raises:
        InvalidBudgetError: ``initial_token_count`` leaves no room in ``token_limit``.
        BudgetExceededError: what must be sent does not fit.
    """
    question = question_of(memory, session_id, given)
    budget = call_budget(
        token_limit,
        initial_token_count,
        counter,
        sent_after=question.text if question.sent_by_caller else None,
    )
    return assemble_session(
        memory,
        session_id,
        question,
        budget=budget,
        model=model,
        user_id=user_id,
        extra=extra,
        strategy=strategy,
    )
