"""The model-based test of the whole memory: random interleavings of writes and reads.

`machine_class` builds a hypothesis `RuleBasedStateMachine` over a `Driver`: the actors it
drives (``ContextMemory`` objects on one embedded folder, or worker processes on one Chroma
server) all work in one namespace. Each rule is one call on one actor: writes (add, a batch,
through the memory or an adapter; re-adding an id; replacing and deleting a message; pin and
unpin; clear, ``delete_session``, ``delete_user``; summarize) update the reference model
(`tests/memory/stateful_model.py`), and reads (assemble, candidates, history, search, the
logged contexts and access counts, entities, the adapters' reads) are checked against it
(`tests/memory/stateful_checks.py`).

A session is its owner's (its first writer's) at the doors: one add in four, through the memory
itself (which takes several users in one session), writes as the other user, so sessions hold
both users' messages; the LlamaIndex door refuses a user who is not the owner.

The contract checked is the documented one: after ``flush()`` every reader sees what was
acknowledged. So before an actor acts, every other actor that acted since its last flush is
flushed (reads of one actor need no flush of its own writes).
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable
from typing import Any, ClassVar, Protocol

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule, run_state_machine_as_test

from tests.memory.stateful_checks import (
    check_assembly,
    check_candidates,
    check_contexts,
    check_entities,
    check_history,
    check_search,
)
from tests.memory.stateful_model import (
    MAX_MESSAGES,
    MESSAGE_IDS,
    PIN_IDS,
    QUERIES,
    SESSIONS,
    USERS,
    Model,
    message_text,
    pin_text,
)

Command = dict[str, Any]
STEPS_PER_EXAMPLE = 50

sessions = st.sampled_from(SESSIONS)
users = st.sampled_from(USERS)
queries = st.sampled_from(QUERIES)
maybe_user = st.sampled_from((None, *USERS))
picks = st.integers(0, MAX_MESSAGES - 1)
batches = st.lists(
    st.tuples(st.sampled_from((*MESSAGE_IDS, None)), st.sampled_from(("user", "assistant"))),
    min_size=1,
    max_size=3,
    unique_by=lambda m: m[0] or "",
)


class Driver(Protocol):
    """The actors of one example: ``run`` a command on one of them, ``close`` them all."""

    def run(self, actor: int, command: Command) -> dict[str, Any]: ...

    def close(self) -> None: ...


def machine_class(  # noqa: C901 - one rule per operation
    actors: int, entity_actors: frozenset[int], open_driver: Callable[[], Driver]
) -> type[RuleBasedStateMachine]:
    """A state machine over ``actors`` actors (``entity_actors`` have entity memory on)."""
    actor = st.integers(0, actors - 1)

    class MemoryMachine(RuleBasedStateMachine):
        steps: ClassVar[list[int]] = [0]  # steps run, over every example

        def __init__(self) -> None:
            super().__init__()
            self.model = Model()
            self.driver = open_driver()
            self.dirty: set[int] = set()

        def teardown(self) -> None:
            self.driver.close()

        def act(self, who: int, command: Command) -> dict[str, Any]:
            self.steps[0] += 1
            for other in sorted(self.dirty - {who}):
                self.driver.run(other, {"op": "flush"})
                self.model.flushed(other)
            if command["op"] in ("replace", "delete_message", "contexts"):
                self.model.flushed(who)  # these flush the actor's log first (`Runner`, `records`)
            self.dirty = {who}
            return self.driver.run(who, command)

        def refused_as_not_owner(
            self, got: dict[str, Any], session: str, user: str | None, via: str
        ) -> bool:
            """Whether the LlamaIndex door refused ``user`` a session another user started.

            It refuses exactly a user who is not the owner of a session that has one (the
            model's `Session.owner`: its entry's first writer, kept while the entry is); a
            refusal changes nothing.
            """
            owner = self.model.sessions[session].owner
            expected = via == "llamaindex" and user is not None and owner not in (None, user)
            assert ("owner_refused" in got) == expected, f"owner {owner!r}, {user!r}: {got}"
            if expected:
                assert got == {"owner_refused": owner, "door": "llamaindex"}, got
            return expected

        # -- writes ----------------------------------------------------------------------------
        @rule(
            who=actor,
            session=sessions,
            user=users,
            batch=batches,
            same=st.booleans(),
            via=st.sampled_from(("memory", "memory", "langchain", "llamaindex")),
            stranger=st.sampled_from((False, False, False, True)),
        )
        def add(
            self,
            who: int,
            session: str,
            user: str,
            batch: list[tuple[str | None, str]],
            same: bool,
            via: str,
            stranger: bool,
        ) -> None:
            """Add a batch as the session's owner, or (``stranger``) as the other user.

            The other user writes through the memory itself (the doors keep a session to its
            owner). A session without an owner (new, or started by a pin) takes the drawn user.
            """
            model = self.model
            stored = model.sessions[session]
            if stored.owner is not None and stranger:
                user, via = next(u for u in USERS if u != stored.owner), "memory"
            elif stored.owner is not None:
                user = stored.owner
            messages: list[dict[str, Any]] = []
            for mid, role in batch:
                old = None if mid is None else stored.message(mid)
                if old is not None and (via != "memory" or not old.plain):
                    continue  # only the memory itself re-adds what it stored
                if old is not None and same:
                    messages.append({"id": mid, "role": old.role, "text": old.text})
                    continue
                if mid is None and via == "langchain":
                    mid = model.token("g")  # LangChain messages are stored under their own ids
                text = message_text(model.token("w"), user, session, model.writes)
                messages.append({"id": mid, "role": role, "text": text})
            new = sum(m["id"] is None or stored.message(m["id"]) is None for m in messages)
            if not messages or len(stored.messages) + new > MAX_MESSAGES:
                self.read_history(who, session, None, "memory")  # full: a read instead
                return
            refused = model.conflicts(session, user, messages)
            command = {"op": "add", "session": session, "user": user, "messages": messages}
            got = self.act(who, {**command, "via": via})
            if self.refused_as_not_owner(got, session, user, via):
                return
            assert ("error" in got) == refused, f"refused={refused}, got {got}"
            if refused:
                return
            if via == "memory":
                given = [m["id"] for m in messages]
                assert all(g in (None, i) for g, i in zip(given, got["ids"], strict=True))
            assert len(got["ids"]) == len(messages), got
            model.add(session, user, messages, got["ids"], plain=via == "memory")

        @rule(who=actor, session=sessions, user=users, batch=batches, same=st.booleans())
        def add_as_other_user(
            self, who: int, session: str, user: str, batch: list[tuple[str | None, str]], same: bool
        ) -> None:
            """`add` as the user who did not start the session, through the memory itself."""
            self.add(who, session, user, batch, same, "memory", stranger=True)

        @precondition(lambda self: any(s.messages for s in self.model.sessions.values()))
        @rule(who=actor, session=sessions, pick=picks)
        def replace(self, who: int, session: str, pick: int) -> None:
            stored = self.model.sessions[session]
            if not stored.messages:
                return self.read_history(who, session, None, "memory")
            old = stored.messages[pick % len(stored.messages)]
            text = message_text(self.model.token("w"), old.user, session, self.model.writes)
            command = {"session": session, "id": old.id, "text": text, "role": old.role}
            self.act(who, {"op": "replace", **command, "user": old.user})
            self.model.replace(session, old.id, text)
            return None

        @precondition(lambda self: any(s.messages for s in self.model.sessions.values()))
        @rule(who=actor, session=sessions, pick=picks)
        def delete_message(self, who: int, session: str, pick: int) -> None:
            stored = self.model.sessions[session]
            if not stored.messages:
                return self.read_history(who, session, None, "memory")
            mid = stored.messages[pick % len(stored.messages)].id
            got = self.act(who, {"op": "delete_message", "session": session, "id": mid})
            assert got["count"] == self.model.delete_message(session, mid) == 1
            return None

        @rule(
            who=actor,
            pid=st.sampled_from(PIN_IDS),
            scope=st.one_of(sessions, users),
            same=st.booleans(),
        )
        def pin(self, who: int, pid: str, scope: str, same: bool) -> None:
            model = self.model
            pins = model.sessions[scope].pins if scope in SESSIONS else model.user_pins[scope]
            old = pins.get(pid)
            text = (
                old if old is not None and same else pin_text(model.token("p"), scope, model.writes)
            )
            session, user = (scope, None) if scope in SESSIONS else (None, scope)
            command = {"op": "pin", "id": pid, "text": text, "session": session, "user": user}
            got = self.act(who, command)
            refused = old is not None and old != text
            assert ("error" in got) == refused, f"refused={refused}, got {got}"
            if not refused:
                assert got["id"] == pid
                pins[pid] = text
                if session is not None:
                    model.sessions[session].start(None)  # a pin's record carries no user

        @rule(who=actor, pid=st.sampled_from(PIN_IDS), scope=st.one_of(sessions, users))
        def unpin(self, who: int, pid: str, scope: str) -> None:
            model = self.model
            pins = model.sessions[scope].pins if scope in SESSIONS else model.user_pins[scope]
            session, user = (scope, None) if scope in SESSIONS else (None, scope)
            got = self.act(who, {"op": "unpin", "id": pid, "session": session, "user": user})
            assert got["result"] == (pins.pop(pid, None) is not None)
            if got["result"] and session is not None:
                model.touched(session)

        @rule(
            who=actor,
            session=sessions,
            pins=st.booleans(),
            via=st.sampled_from(("memory", "langchain", "llamaindex")),
        )
        def clear(self, who: int, session: str, pins: bool, via: str) -> None:
            got = self.act(who, {"op": "clear", "session": session, "pins": pins, "via": via})
            expected = self.model.clear(session, pins=pins)
            if via == "memory":
                assert got["count"] == expected, f"cleared {got['count']}, stored {expected}"

        @rule(who=actor, session=sessions)
        def delete_session(self, who: int, session: str) -> None:
            got = self.act(who, {"op": "delete_session", "session": session})
            expected = self.model.delete_session(session)
            assert got["count"] == expected, f"deleted {got['count']}, stored {expected}"

        @rule(who=actor, user=users)
        def delete_user(self, who: int, user: str) -> None:
            got = self.act(who, {"op": "delete_user", "user": user})
            expected = self.model.delete_user(user)
            assert got["count"] == expected, f"deleted {got['count']}, stored {expected}"

        @rule(who=actor, session=sessions)
        def summarize(self, who: int, session: str) -> None:
            """Fold the session's unsummarized stretches into summaries, as the model plans."""
            plan = self.model.summary_plan(session)
            got = self.act(who, {"op": "summarize", "session": session})
            assert got["ids"] == [sid for sid, _ in plan], f"summarized {got['ids']}, not {plan}"
            self.model.summarized(session, plan)

        # -- reads -----------------------------------------------------------------------------
        @rule(
            who=actor,
            session=sessions,
            query=queries,
            user=maybe_user,
            other_sessions=st.sampled_from((None, True, False)),
            via=st.sampled_from(("memory", "memory", "llamaindex")),
        )
        def assemble(
            self,
            who: int,
            session: str,
            query: str,
            user: str | None,
            other_sessions: bool | None,
            via: str,
        ) -> None:
            model = self.model
            if via == "llamaindex":
                other_sessions = None  # its get searches them as the memory's config says
            command = {"session": session, "query": query, "user": user}
            got = self.act(
                who, {"op": "assemble", **command, "other_sessions": other_sessions, "via": via}
            )
            if self.refused_as_not_owner(got, session, user, via):
                return
            for_user = model.user_for(session, user)
            allowed = model.offerable(
                session,
                for_user,
                other_sessions=other_sessions is not False,
                entities=who in entity_actors,
            )
            if via == "llamaindex" and user is None:
                # Without a user_id, no user's pins join the LlamaIndex memory's context (the
                # core's `assemble` takes the session's user): it must not offer them.
                users = {p for p in allowed.pinned if p.startswith(USER_PIN)}
                allowed = dataclasses.replace(
                    allowed,
                    pinned=allowed.pinned - users,
                    exact={k: v for k, v in allowed.exact.items() if k not in users},
                )
            check_assembly(allowed, got, query if via == "memory" else None)
            before = model.assembled.get((who, session))
            if before is not None and before != model.life[session]:
                assert got["prefix_tokens"] is None, "a prefix shared with a deleted session"
            model.log(who, session, for_user, got["included"], got["pruned"])

        @rule(who=actor, session=sessions, query=queries, user=maybe_user)
        def candidates(self, who: int, session: str, query: str, user: str | None) -> None:
            command = {"op": "candidates", "session": session, "query": query, "user": user}
            got = self.act(who, {**command, "other_sessions": None})
            for_user = self.model.user_for(session, user)
            allowed = self.model.offerable(
                session, for_user, other_sessions=True, entities=who in entity_actors
            )
            check_candidates(allowed, got, for_user)

        @rule(
            who=actor,
            session=sessions,
            limit=st.sampled_from((None, None, 0, 1, 3)),
            via=st.sampled_from(("memory", "memory", "langchain", "llamaindex")),
        )
        def read_history(self, who: int, session: str, limit: int | None, via: str) -> None:
            command = {"op": "history", "session": session, "limit": limit, "via": via}
            check_history(self.model, session, self.act(who, command), limit)

        @rule(
            who=actor,
            query=queries,
            scope=st.one_of(sessions, users),
            messages_only=st.booleans(),
        )
        def search(self, who: int, query: str, scope: str, messages_only: bool) -> None:
            session, user = (scope, None) if scope in SESSIONS else (None, scope)
            command = {"op": "search", "query": query, "session": session, "user": user}
            got = self.act(who, {**command, "messages_only": messages_only})
            check_search(self.model, got, session=session, user=user, messages_only=messages_only)

        @rule(who=actor, session=sessions)
        def contexts(self, who: int, session: str) -> None:
            got = self.act(who, {"op": "contexts", "session": session})
            self.model.logs[session] = check_contexts(self.model, session, got)

        @rule(who=actor, session=sessions)
        def entities(self, who: int, session: str) -> None:
            check_entities(
                self.model, session, self.act(who, {"op": "entities", "session": session})
            )

    return MemoryMachine


USER_PIN = "ctxbudget:user:"  # the id of a user-wide pin as an item: ctxbudget:user:["u","p1"]


def steps_wanted() -> int:
    """Steps of one run: ``CTXBUDGET_STATEFUL_STEPS``, else 1,000 in CI (``CI=true``), else 300."""
    given = os.environ.get("CTXBUDGET_STATEFUL_STEPS")
    if given:
        return int(given)
    return 1000 if os.environ.get("CI") == "true" else 300


def run_steps(machine: type[RuleBasedStateMachine], total: int) -> int:
    """Run ``machine`` until at least ``total`` steps ran; returns how many did.

    Hypothesis runs some examples shorter than ``STEPS_PER_EXAMPLE`` (it varies what it found),
    so it is asked again for the steps still missing.
    """
    done: list[int] = machine.steps  # type: ignore[attr-defined]
    for _ in range(10):
        missing = total - done[0]
        if missing <= 0:
            break
        run_state_machine_as_test(
            machine,
            settings=settings(
                max_examples=math.ceil(missing / STEPS_PER_EXAMPLE),
                stateful_step_count=STEPS_PER_EXAMPLE,
                deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
            ),
        )
    return done[0]
