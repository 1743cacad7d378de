"""Storing an agent's conversation in a `ContextMemory`: every message once, under its key.

Every model call sees the whole state, so the middleware remembers, per session and
generation, the keys it has stored with a digest of each message (`StoredKeys`) and stores only
the others (`store_messages`). A message of the state edited in place (LangGraph's
``add_messages`` replaces a message by id) is one of the others: it is read by id and the stored
message replaced (`langchain_ctxbudget.edits`); one not seen there keeps its first text, with a
warning, never silently. The generation
(`ctxbudget.store.sessions.Stamp`) changes when the session is deleted, cleared or edited, by
anyone: keys remembered from before are not trusted then.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage

from ctxbudget import StoreInputError
from langchain_ctxbudget.convert import to_record_payload
from langchain_ctxbudget.identity import claim_owner, fingerprint, message_keys
from langchain_ctxbudget.message_checks import framework_summary
from langchain_ctxbudget.recall import Recalled, gathered_generation, question_key

if TYPE_CHECKING:
    from ctxbudget.memory.context import ContextMemory

__all__ = [
    "SESSIONS_REMEMBERED",
    "StoredKeys",
    "add_payloads",
    "digest",
    "store_messages",
    "store_run",
]

logger = logging.getLogger(__name__)

SESSIONS_REMEMBERED = 1024
"""Sessions whose stored keys (and whose last question's candidates) are remembered."""


class StoredKeys:
    """The message keys stored per ``(namespace, session, generation)``, for the last seen.

    Each with the digest of the message stored under it (`digest`): a key given again with
    another message (edited in the state) is not stored yet.

    A session's first messages are stored before it has a generation (""), and nothing is
    remembered under "" (it comes back after a delete, when those keys are no longer stored).
    Their digests are kept apart (``_first``, until the session's generation is seen), to
    tell an edit of them only: an edit of a chat's first question was kept out before.
    """

    def __init__(self) -> None:
        self._keys: OrderedDict[tuple[str, str, str], dict[str, int]] = OrderedDict()
        self._last: dict[tuple[str, str], str] = {}  # a session's newest generation here
        self._first: OrderedDict[tuple[str, str], dict[str, int]] = OrderedDict()
        self._lock = threading.Lock()

    def unknown(
        self, scope: tuple[str, str, str], keys: Sequence[str], digests: Sequence[int]
    ) -> list[int]:
        """The positions of ``keys`` not stored yet in ``scope`` with these ``digests``.

        ``scope`` becomes the newest.
        """
        with self._lock:
            known = self._keys.setdefault(scope, {})
            self._keys.move_to_end(scope)
            self._last[scope[:2]] = scope[2]
            while len(self._keys) > SESSIONS_REMEMBERED:
                gone, _ = self._keys.popitem(last=False)
                if self._last.get(gone[:2]) == gone[2]:
                    del self._last[gone[:2]]
            return _unknown(known, keys, digests)

    def since_last(
        self, namespace: str, session: str, keys: Sequence[str], digests: Sequence[int]
    ) -> tuple[list[int], list[int]]:
        """The positions of ``keys`` not stored with these ``digests`` as the session last was.

        In the session's newest generation seen here (all positions for a session not seen);
        and, of those, the keys stored here with another digest (edited). Nothing is
        remembered.
        """
        with self._lock:
            generation = self._last.get((namespace, session))
            known = {} if generation is None else self._keys.get((namespace, session, generation))
            known = known or {}
            fresh = _unknown(known, keys, digests)
            first = self._first.get((namespace, session)) if not generation else None
            if first is None:
                return fresh, [i for i in fresh if keys[i] in known]
            edited = [
                i for i in fresh if keys[i] in known or first.get(keys[i], digests[i]) != digests[i]
            ]
            return fresh, edited

    def add(self, scope: tuple[str, str, str], keys: Sequence[str], digests: Sequence[int]) -> None:
        """Remember ``keys`` as stored in ``scope``, each with its message's digest.

        In the generation "" (a session without records): only to tell their edits.
        """
        with self._lock:
            if scope[2]:
                self._keys.setdefault(scope, {}).update(zip(keys, digests, strict=True))
                self._first.pop(scope[:2], None)
                return
            self._first.setdefault(scope[:2], {}).update(zip(keys, digests, strict=True))
            self._first.move_to_end(scope[:2])
            while len(self._first) > SESSIONS_REMEMBERED:
                self._first.popitem(last=False)


def _unknown(known: dict[str, int], keys: Sequence[str], digests: Sequence[int]) -> list[int]:
    pairs = zip(keys, digests, strict=True)
    return [i for i, (key, mark) in enumerate(pairs) if known.get(key) != mark]


def digest(message: BaseMessage) -> int:
    """A digest of what is stored of ``message`` (`fingerprint`), to tell an edited one."""
    return hash(fingerprint(message))


def store_messages(
    memory: ContextMemory,
    known: StoredKeys,
    messages: Sequence[BaseMessage],
    keys: Sequence[str],
    ids: tuple[str, str | None],
    generation: str | None = None,
    held: Collection[str] = frozenset(),
    digests: Sequence[int] | None = None,
) -> None:
    """Store the messages the memory does not hold yet (once each), under their keys.

    ``generation``: the session's, when the caller just read it (None: read here). ``held``:
    keys read as stored with this content just before (`store_edits`): not written again.
    ``digests``: each message's `digest`, when the caller made them (None: made here).

    The same message stored again (by a retry, or by another call that saw it first) is the
    same write: the memory keeps it once, with its first timestamp, and says nothing. A key the
    session already holds for another message (a caller reusing ids across threads, or an edit
    `store_edits` could not see) keeps the first message: the other one is logged (a warning,
    once per edit in this process) and not stored; the rest of the call's messages are.
    """
    session, user = ids
    if generation is None:
        stamp = memory.store.session_stamp(namespace=memory.namespace, session_id=session)
        generation = "" if stamp is None else stamp.generation
    scope = (memory.namespace, session, generation)
    pairs = list(zip(messages, keys, strict=True))
    if digests is None:
        digests = [digest(message) for message in messages]
    fresh = known.unknown(scope, keys, digests)
    if not fresh:
        return
    now = time.time()
    payloads: list[dict[str, Any]] = []
    for message, k in (pairs[i] for i in fresh if keys[i] not in held):
        if framework_summary(message):
            continue  # SummarizationMiddleware's: what it sums up is stored
        payload = to_record_payload(message, id=k, timestamp=now)
        if payload is not None:
            payloads.append(payload)
    if payloads and not generation:
        # A session without records yet: its user claims it before writing, so that of two
        # users starting it at once one is refused (`claim_owner`), never both stored in it.
        claim_owner(memory, session, user)
    refused: set[str] = set()
    if payloads:
        try:
            # The usual case in one call. The same message stored before is not stored twice;
            # a key the session holds for another message keeps that one (the memory warns),
            # found as the messages are stored, with no read before (`first_write_wins`).
            memory.add_messages(
                session, payloads, user_id=user, progress=False, first_write_wins=True
            )
        except StoreInputError:
            # A message the memory cannot keep: store the others.
            refused = add_payloads(memory, session, user, payloads)
    # A refused message is not remembered: the next call checks it again (`check_storable`).
    # Under "" (no records yet, and again after a delete) only to tell an edit (`StoredKeys`).
    kept = [i for i in fresh if keys[i] not in refused]
    known.add(scope, [keys[i] for i in kept], [digests[i] for i in kept])


def add_payloads(
    memory: ContextMemory, session: str, user: str | None, payloads: list[dict[str, Any]]
) -> set[str]:
    """Store payloads one by one: each the memory refuses is logged (a warning), not stored.

    For a batch the memory refused as a whole: an id the session holds with other content
    keeps its first message. Returns the ids of the payloads refused.
    """
    refused: set[str] = set()
    for payload in payloads:
        try:
            memory.add_messages(
                session, [payload], user_id=user, progress=False, first_write_wins=True
            )
        except StoreInputError as exc:
            refused.add(str(payload["id"]))
            logger.warning(
                "ctxbudget memory did not store the %s message %r of session %r: %s",
                payload["role"],
                payload["id"],
                session,
                exc,
            )
    return refused


def store_run(
    memory: ContextMemory,
    known: StoredKeys,
    recalled: Recalled,
    messages: Sequence[BaseMessage],
    ids: tuple[str, str | None],
    thread: str | None,
) -> None:
    """Store a finished run's messages under the generation its question was gathered in.

    The run ended: its question's candidates are forgotten then (`Recalled.forget`).
    """
    keys = message_keys(messages, ids[0], thread)
    question = question_key(memory, messages, keys, ids[0])
    generation = gathered_generation(recalled, question)
    store_messages(memory, known, messages, keys, ids, generation)
    if question is not None:
        recalled.forget(question)  # the run's calls are over
