"""What the memory adds to an agent's state: `ContextMemory.candidates` for the last question.

The agent's state is the history, so the middleware takes the memory's candidates as added to
the state's messages (`Candidates.added_to`: extras the state does not hold, and copies of its
older turns offered only when the history loses them). What is here is LangChain's part: which
message is the question, and the candidates of one question gathered once: the calls that
follow tool results in the same turn reuse them (what the tools returned is in the state)
while nothing they draw from changed: the `Stamps` of the session, the user (user-wide pins,
messages in the user's other sessions) and the namespace's documents, read by id in one read
before they were gathered and again on every call. A delete, clear, unpin or replace of any of
those, by anyone, draws a new stamp, and the question is gathered again.

Saved values (the middleware's ``values=``: LangGraph's store over the same memory) come with
the candidates (`ContextMemory.candidates`' ``values``, tier ``SAVED``). Every put or delete of
a user's values draws that user's stamp anew, and of a shared value (no user) the stamp of the
namespace's shared values (`ctxbudget.store.values`), read here in the same read when the
values asked for are shared: candidates kept are never served after anyone saved, changed or
deleted a value they drew from. Values of another user than the run's (whose stamp is not read
here) are never kept: those questions are gathered on every call.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from langchain_core.messages import BaseMessage

from ctxbudget import Budget
from ctxbudget.memory.reading.candidates import Additions, Candidates
from ctxbudget.store.sessions import Stamps
from langchain_ctxbudget.identity import session_owner
from langchain_ctxbudget.model_request import current_turn

if TYPE_CHECKING:
    from ctxbudget.memory.context import ContextMemory
    from ctxbudget.memory.policy.presets import StrategyLike
    from ctxbudget.memory.values import ValueQuery

__all__ = ["SESSIONS_RECALLED", "Recalled", "gathered_generation", "question_key", "recall"]

SESSIONS_RECALLED = 1024
"""Sessions whose question's candidates are kept (the least recently gathered go first)."""


class Recalled:
    """The candidates gathered for each session's newest question, until its run ends.

    Each with the `Stamps` read before they were gathered: they serve the model calls of the
    question's run while those are current (and a run of the same question again, after a
    run that failed). A run that ends forgets them (`forget`): a pool holds hundreds of items,
    and kept for every question asked they were most of what a long-lived process allocated
    and kept (684 objects a turn; 1,024 questions: about 700,000, which every full garbage
    collection walks).
    """

    def __init__(self) -> None:
        self._items: OrderedDict[tuple[str, str], tuple[str, Candidates, Stamps]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str, str]) -> tuple[Candidates, Stamps] | None:
        """The candidates gathered for ``key`` and the stamps read before, or None."""
        with self._lock:
            found = self._items.get(key[:2])
        if found is None or found[0] != key[2]:
            return None
        return found[1], found[2]

    def put(self, key: tuple[str, str, str], items: Candidates, stamps: Stamps) -> None:
        """Keep the candidates of ``key``, gathered after ``stamps`` were read.

        They replace what the session's previous question had.
        """
        with self._lock:
            self._items[key[:2]] = (key[2], items, stamps)
            self._items.move_to_end(key[:2])
            while len(self._items) > SESSIONS_RECALLED:
                self._items.popitem(last=False)

    def forget(self, key: tuple[str, str, str]) -> None:
        """Drop the candidates of ``key`` (its run ended), if they are still the session's."""
        with self._lock:
            found = self._items.get(key[:2])
            if found is not None and found[0] == key[2]:
                del self._items[key[:2]]


def recall(
    memory: ContextMemory,
    recalled: Recalled,
    messages: Sequence[BaseMessage],
    keys: Sequence[str],
    ids: tuple[str, str | None],
    in_state: Collection[str],
    budget: Budget | int,
    documents: bool | str | Sequence[str],
    strategy: StrategyLike | None = None,
    values: ValueQuery | None = None,
) -> tuple[Additions, str]:
    """What the memory adds for the state's last user message (`Candidates.added_to`).

    Extras: pinned facts, tasks, summaries, documents, the user's other sessions and stored
    turns the state does not hold: `ContextMemory.candidates` for ``budget`` (the room the
    call's own items leave: `ctxbudget.memory.reading.candidates.room_left`), the same
    gathering and scoring as `ContextMemory.assemble`.
    Copies: older turns of the state that match the question, by the key of the turn (their
    own ids are ``ctxbudget:memory:<key>``). ``strategy`` is the middleware's (merged over the
    memory's). Returned with the session's generation they were gathered in. Gathered again
    unless the session, the user and the documents have the stamps they had before the
    question's candidates were gathered (one read by id per call). With ``values``, the
    values that match the question are extras too (tier ``SAVED``); kept when they are the
    run's user's or shared (whose stamps their writes draw), else gathered on every call.
    """
    position = _question(messages)
    session, user = ids
    # What the app acknowledged (add_messages before the run) is read; the state's own not
    # stored yet is not waited for.
    memory.wait_for_writes(session, held=keys)
    if position is None or not messages[position].text.strip():
        stamp = memory.store.session_stamp(namespace=memory.namespace, session_id=session)
        session_owner(memory, stamp, session, user)
        return Additions(extras=(), copies={}), "" if stamp is None else stamp.generation
    query = messages[position].text
    cache_key = _question_key(memory, session, position, keys)
    kept = recalled.get(cache_key)
    # Read before gathering: whatever is removed after this read draws a stamp it does not have.
    # Without a user, the user the kept candidates drew from (one read: its stamp by id).
    reader = user if user is not None or kept is None else kept[1].user_id
    shared = values is not None and values.user_id is None
    stamps = memory.store.stamps(
        namespace=memory.namespace, session_id=session, user_id=reader, shared_values=shared
    )
    session_owner(memory, stamps.session, session, user)  # the owner is in the same read
    covered = values is None or shared or values.user_id == stamps.user_id
    found = kept[0] if kept is not None and covered and _current(kept, stamps) else None
    if found is None:
        # The candidates ContextMemory would offer, bounded by this call's budget; the newest
        # stored turns are searched too (here the state is the history). The messages just
        # added are in the state: no need to wait until they are stored.
        found = memory.candidates(
            session,
            query,
            budget=budget,
            user_id=user,
            documents=documents,
            search_recent=True,
            wait=False,
            strategy=strategy,
            values=values,
            stamps=stamps,  # the session's entry is not read again
        )
        if found.user_id is not None and found.user_id != stamps.user_id:
            # Drawn from a user (the session's newest writer) whose stamp was not read before:
            # kept for `gathered_generation` only, never current.
            stamps = stamps._replace(session=None)
        recalled.put(cache_key, found, stamps)
    return found.added_to(in_state), found.generation


def question_key(
    memory: ContextMemory, messages: Sequence[BaseMessage], keys: Sequence[str], session: str
) -> tuple[str, str, str] | None:
    """What `Recalled` keeps the state's question's candidates under (None: no question)."""
    position = _question(messages)
    return None if position is None else _question_key(memory, session, position, keys)


def gathered_generation(recalled: Recalled, key: tuple[str, str, str] | None) -> str | None:
    """The session's generation when the candidates of question ``key`` were gathered.

    What the run's model calls read (`recall`): the middleware stores the run's answer under
    it, with no read of the session (our own writes keep a generation; a session deleted or
    edited since loses it, and the messages stored under it are not stored again by this run:
    the next run gathers in the new one). None: nothing gathered for this question here.
    """
    kept = None if key is None else recalled.get(key)
    return None if kept is None else kept[0].generation


def _current(kept: tuple[Candidates, Stamps], stamps: Stamps) -> bool:
    """Whether nothing the kept candidates drew from was removed or replaced since.

    Their stamps (read before they were gathered) are ``stamps`` (read now), and so is the
    generation they read the session in; "" (no records yet) is no generation: never current;
    nor once a saved value among them expired.
    """
    found, before = kept
    session = stamps.session
    ends = found.true_until
    if ends is not None and time.time() >= ends:
        return False  # a saved value expired: gone, though its expiry drew no stamp
    return stamps.same(before) and session is not None and found.generation == session.generation


def _question(messages: Sequence[BaseMessage]) -> int | None:
    """The position of the state's last user message (None: there is none)."""
    position = current_turn(messages)
    return None if position == len(messages) else position


def _question_key(
    memory: ContextMemory, session: str, position: int, keys: Sequence[str]
) -> tuple[str, str, str]:
    """What `Recalled` keeps a question's candidates under: its session, position and key."""
    return (memory.namespace, session, f"{position}:{keys[position]}")
