"""What one `CtxBudgetMemory.get` assembles: which message is the question, then candidates + core.

`question_of` decides what ``get`` answers: the ``input`` given, else the session's last user
message (never an assistant's reply). When that message is the last one stored and the caller
does not send it itself, it is *pending*: rendered last and returned. An input given is sent by
the caller (chat engines ask ``get(input=message)`` and send the message after the memory's,
even on a retry whose first attempt stored it), unless this memory already returned that stored
message as the question (an agent asks ``get()``, then ``get(input=...)`` in the same turn). What
the caller sends is not offered (its stored copy neither), its cost comes off the budget
(`llama_index.ctxbudget.budget.call_budget`), so the report counts exactly the messages ``get``
returns. A pending question that is this memory's current message (the last user message put
with its own blocks, `llama_index.ctxbudget.current`) is counted as its content parts, images by
their size, and is returned as the caller gave it; an input message given with its own blocks
costs its parts.

`assemble_session` gathers the session's candidates with `ContextMemory.candidates` (the
gathering `ContextMemory.assemble` uses, with its assembler settings), offers the stored system
messages first, as they were put, with what ctxbudget adds inside the first
(`llama_index.ctxbudget.system`; their pinned records are not offered a second time), and packs
everything with the core `ContextAssembler`, with the session's previous assembly as
``previous=`` (`ContextMemory.previous_contexts`): its report says what prefix they share.
Without a ``user_id`` nobody's user-wide pins or other sessions join, not even those of the
user stored with the session's messages (`ContextMemory.assemble` takes that user by default).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ctxbudget import AssembledContext, ContextAssembler, ContextItem, TokenCounter
from ctxbudget.core.split import one_system_layouts
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.inputs import extra_items
from ctxbudget.memory.policy.plan import plan_for
from ctxbudget.memory.policy.presets import StrategyLike
from ctxbudget.memory.reading.candidates import Candidates, offered
from ctxbudget.memory.reading.session_state import is_stored_query
from ctxbudget.store.chroma_store import Record
from llama_index.ctxbudget.budget import call_budget
from llama_index.ctxbudget.current import CurrentMessage
from llama_index.ctxbudget.system import SystemMessages, adds_to_system, system_messages

__all__ = ["NO_QUESTION", "Question", "assemble_get", "assemble_session", "question_of"]

NO_QUESTION = "(no message yet)"
"""The stand-in searched for when there is nothing to answer yet (never shown)."""


@dataclass(frozen=True, slots=True)
class Question:
    """What one ``get`` answers.

    Attributes:
        text: the question ("" when the session has no user message and no input is given).
        pending: it is the session's last stored message: rendered last and returned.
        sent_by_caller: an input given: the caller sends it after the messages (a stored copy
            of it is neither offered nor returned).
        record_id: the stored message of a pending question.
        own: the caller's own message of a pending question, when it is the current message
            (sent as given, `llama_index.ctxbudget.current`).
        name: the speaker's name stored with a pending question (a group chat's author).
    """

    text: str
    pending: bool = False
    sent_by_caller: bool = False
    record_id: str | None = None
    own: CurrentMessage | None = None
    name: str | None = None

    @property
    def asked(self) -> bool:
        """Whether there is a question to search by."""
        return bool(self.text.strip())


def _is_user_turn(record: Record) -> bool:
    return record.role == "user" and bool(record.text.strip())


def question_of(
    memory: ContextMemory,
    session_id: str,
    given: str | None,
    *,
    asked: str | None = None,
    current: CurrentMessage | None = None,
    mine: str | None = None,
) -> Question:
    """The question of a ``get``: ``given`` if not blank, else the last user message stored.

    ``given`` is sent by the caller, unless it is the last message stored and that message,
    ``asked``, was already returned as the question by this memory (an agent's later steps of
    one turn, which ask with the text of its text blocks): then it is pending again. The last
    message is read first (chat engines and agents store the question before they ask); only
    when it is not a user message is the recent window read (`MemoryConfig.recent_messages`),
    and the rest of the session only when that window holds no user message (a long run of
    tool calls). A pending question stored as ``current``'s record comes with it (``own``).

    ``mine`` is the record of the last user message this memory put, while nothing it put
    followed it. When another writer's message came after it (two tabs or workers on one
    session), the question is that message, not the other writer's (`_own_question`).
    """
    newest = memory.history(session_id, limit=1)
    last = newest[-1] if newest else None
    if mine is not None and last is not None and last.id != mine:
        yours = _own_question(memory, session_id, given, mine, current)
        if yours is not None:
            return yours
    own = (
        current
        if current is not None and last is not None and current.record_id == last.id
        else None
    )
    if given is not None and given.strip():
        if last is not None and last.id == asked:
            if is_stored_query(last, given) or (
                own is not None and own.text.strip() == given.strip()
            ):
                # The stored text: the session's copy is recognised as the question.
                return _pending(last, own)
        return Question(given, sent_by_caller=True)
    if last is None:
        return Question("")
    if _is_user_turn(last):
        return _pending(last, own)
    window = max(1, memory.config.recent_messages)
    recent = memory.history(session_id, limit=window)
    found = next((r for r in reversed(recent) if _is_user_turn(r)), None)
    if found is None and len(recent) >= window:
        found = next((r for r in reversed(memory.history(session_id)) if _is_user_turn(r)), None)
    return Question("" if found is None else found.text)


def _own_question(
    memory: ContextMemory,
    session_id: str,
    given: str | None,
    mine: str,
    current: CurrentMessage | None,
) -> Question | None:
    """This writer's own pending question ``mine`` when another writer's message followed it.

    Found in the recent window (`MemoryConfig.recent_messages`); when it is not there (gone,
    or far back), None: the question is found as for a single writer. A ``given`` input must
    be its text (an agent asks with the question it put), else the input is the question.
    The other writer's later messages stay history; the stored copy of this question is sent
    once, as the question (the history copy is pruned as a duplicate).
    """
    window = memory.history(session_id, limit=max(1, memory.config.recent_messages))
    found = next((r for r in reversed(window) if r.id == mine), None)
    if found is None or not _is_user_turn(found):
        return None
    own = current if current is not None and current.record_id == found.id else None
    blank = given is None or not given.strip()
    if (
        blank
        or is_stored_query(found, str(given))
        or (own is not None and own.text.strip() == str(given).strip())
    ):
        return _pending(found, own)
    return None


def _pending(record: Record, own: CurrentMessage | None) -> Question:
    """The stored user message ``record`` as the question, with its speaker's name."""
    name = record.metadata.get("_name")
    return Question(
        record.text,
        pending=True,
        record_id=record.id,
        own=own,
        name=name if isinstance(name, str) and name else None,
    )


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
        user_id: the user (user-wide pins, other sessions); None: neither joins.
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
        other_sessions=None if asked and user_id is not None else False,
        strategy=strategy,
    )
    counter = memory.counter_for(model)
    systems = system_messages(memory, session_id, counter)
    found = _offered_pins(found, systems, user_id)
    if question.pending and question.record_id is not None:
        found = _without_stored_question(found, question.record_id)
    extras = extra_items(extra)
    if question.pending:
        items = offered(found, question.text, system=None, tools=(), extras=extras)
        if question.own is not None:
            items[-1] = _own_query(items[-1], question.own, session_id)
        elif question.name is not None:  # sent as stored: by its author, as history would be
            items[-1] = dataclasses.replace(items[-1], name=question.name)
    else:
        items = [*found.items, *extras]
    assembler = ContextAssembler(
        counter,
        summarizer=memory.summarizer,
        min_exchanges=plan.config.min_exchanges,
        # What ctxbudget adds goes inside the first system message (`llama_index...system`).
        layouts=one_system_layouts(counter, joined=True) if systems.items else None,
    )
    # The session's previous assembly (by `get` or `ContextMemory.assemble`): the prefix shared.
    # "" is no generation (a session without records, as one deleted since): nothing kept.
    generation = found.generation
    kept = memory.previous_contexts
    previous = kept.get(session_id, generation=generation) if generation else None

    def run(first: Sequence[ContextItem], room: int) -> AssembledContext:
        return assembler.assemble(
            [*first, *items], budget=plan.budget(room), format="messages", previous=previous
        )

    may_add = adds_to_system(items)
    # When nothing could be added, the first system message is counted as it is put.
    ctx = run(systems.items if may_add else systems.plain, budget)
    if systems.items and may_add and not adds_to_system(ctx):
        # Nothing was added after all: sent as it was put, counted so, with the room the
        # separator took kept free (the same choice, without the separator).
        room = budget - systems.separator_tokens
        again = run(systems.plain, room) if room > 0 else ctx
        ctx = ctx if adds_to_system(again) else again
    if found.generation:
        memory.previous_contexts.put(session_id, ctx, generation=found.generation)
    memory.record_context(
        ctx, session_id=session_id, user_id=found.user_id, model=model, generation=generation
    )
    return ctx


def _own_query(query: ContextItem, own: CurrentMessage, session_id: str) -> ContextItem:
    """The query item counted as the caller's own message: its parts, its author's name."""
    parts = own.parts(session_id)
    text = "\n".join(p["text"] for p in parts if p.get("type") == "text")
    name = own.message.additional_kwargs.get("name")
    return dataclasses.replace(
        query, text=text, parts=parts, name=name if isinstance(name, str) and name else None
    )


def _offered_pins(found: Candidates, systems: SystemMessages, user_id: str | None) -> Candidates:
    """``found`` without the system messages' pinned records and the pins nobody asked for.

    The system messages are offered once, as messages; without a ``user_id``, nobody's
    user-wide pins join.
    """
    own = systems.ids
    pinned = tuple(
        item
        for item in found.pinned
        if item.id not in own
        and (user_id is not None or item.scope is None or item.scope[0] != "user")
    )
    return dataclasses.replace(found, pinned=pinned)


def _without_stored_question(found: Candidates, record_id: str) -> Candidates:
    """``found`` without the stored copy of the pending question: it is sent as the question.

    The core leaves it out when it is the session's newest message; another writer's message
    after it (`_own_question`) leaves it in the window.
    """

    def other(item: ContextItem) -> bool:
        return item.record_id != record_id

    history = tuple(filter(other, found.history))
    retrieved = tuple(filter(other, found.retrieved))
    return dataclasses.replace(found, history=history, retrieved=retrieved)


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
    asked: str | None = None,
    current: CurrentMessage | None = None,
    given_parts: Sequence[Any] | None = None,
    mine: str | None = None,
) -> tuple[AssembledContext, Question]:
    """One ``get``: its assembly and its question.

    The question is `question_of`'s (with ``asked``, ``current`` and ``mine``), the budget
    `call_budget`'s: an input sent by the caller costs ``given_parts`` when given (an input
    message with its own blocks), else its text.

    Raises:
        InvalidBudgetError: ``initial_token_count`` leaves no room in ``token_limit``.
        BudgetExceededError: what must be sent does not fit.
    """
    question = question_of(memory, session_id, given, asked=asked, current=current, mine=mine)
    after = given_parts if given_parts is not None else question.text
    budget = call_budget(
        token_limit,
        initial_token_count,
        counter,
        sent_after=after if question.sent_by_caller else None,
    )
    context = assemble_session(
        memory,
        session_id,
        question,
        budget=budget,
        model=model,
        user_id=user_id,
        extra=extra,
        strategy=strategy,
    )
    return context, question
