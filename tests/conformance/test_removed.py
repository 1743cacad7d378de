"""Nothing removed is offered; nothing acknowledged and not removed is lost.

A small state machine with a reference model: through the door, turns of two users in three
sessions (and pins, through the door where it pins, else through the admin); behind its back,
the admin (another `ContextMemory` on the same place) deletes a session, replaces a message
(deletes it and adds the same id with other text), unpins a fact and deletes a user. Once an
admin call returned (and ``admin.flush()``), no ``send`` of the door offers anything removed;
at the end, a fresh memory's history of each session is exactly what the model kept.

A door that keeps turns as a user's values (a LangGraph store: ``removed_user_only``) is
concerned only by ``delete_user``: there the machine neither deletes sessions, replaces
messages nor pins and unpins (none of them is a value), and reads what is kept with the
driver's ``kept``.

Runs on an embedded folder and on a Chroma server (``integration``).
"""

from __future__ import annotations

from typing import Any

import pytest
from _suite import WORDS, eventually, fresh, kept, needs, tagged
from drivers.base import Place, Turn
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    precondition,
    rule,
    run_state_machine_as_test,
)

MACHINE = settings(
    max_examples=4,
    stateful_step_count=12,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],  # each step is slow to shrink
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
BUDGET = 3000
words = st.lists(st.sampled_from(WORDS), min_size=2, max_size=8)


def _whole(machine: Removal) -> bool:
    """Whether every removal of the admin concerns the door (not only ``delete_user``)."""
    return "removed_user_only" not in machine.driver.can


class Removal(RuleBasedStateMachine):
    """The door writes and reads; the admin removes; the model says what must be offered."""

    driver: Any
    admin: Any
    place: Place

    def __init__(self) -> None:
        super().__init__()
        run = fresh("r")
        self.users = [f"{run}-ua", f"{run}-ub"]
        self.owner = {f"{run}-s1": self.users[0], f"{run}-s2": self.users[0]}
        self.owner[f"{run}-s3"] = self.users[1]
        self.turns: dict[str, list[Turn]] = {s: [] for s in self.owner}
        self.pins: dict[str, tuple[str, str, str]] = {}  # id -> (scope kind, scope, text)
        self.removed: set[str] = set()
        self.asked: set[str] = set()  # what sends asked and stored: not the suite's tagged texts
        self.count = 0

    # -- through the door ---------------------------------------------------------------
    @rule(session=st.sampled_from([0, 1, 2]), said=st.lists(words, min_size=1, max_size=3))
    def add(self, session: int, said: list[list[str]]) -> None:
        name = list(self.owner)[session]
        new = []
        for text in said:
            self.count += 1
            role = "user" if len(self.turns[name]) % 2 == 0 else "assistant"
            new.append(Turn(role, tagged(text), f"{name}-m{self.count}"))
            self.turns[name].append(new[-1])
        self.driver.add(name, self.owner[name], new)

    @precondition(_whole)
    @rule(session=st.sampled_from([0, 1, 2]), on_user=st.booleans(), said=words)
    def pin(self, session: int, on_user: bool, said: list[str]) -> None:
        name = list(self.owner)[session]
        user = self.owner[name]
        if not on_user and not self.turns[name]:
            return  # a session is its user's through its messages: pin to one that has some
        self.count += 1
        text, pin_id = tagged(said), f"pin{self.count}"
        scope = ("user", user) if on_user else ("session", name)
        if "pin" in self.driver.can:
            self.driver.pin(
                text, pin_id, session=None if on_user else name, user=user if on_user else None
            )
        else:
            kwargs = {"user_id": user} if on_user else {}
            self.admin.pin(None if on_user else name, text, id=pin_id, **kwargs)
        self.pins[pin_id] = (*scope, text)

    @rule(session=st.sampled_from([0, 1, 2]), pick=st.integers(0, 50))
    def send(self, session: int, pick: int) -> None:
        self._check(list(self.owner)[session], pick)

    # -- behind its back ------------------------------------------------------------------
    @precondition(_whole)
    @rule(session=st.sampled_from([0, 1, 2]))
    def delete_session(self, session: int) -> None:
        name = list(self.owner)[session]
        self._settled()
        self.admin.delete_session(name)
        self._gone(name)
        self._after(self.owner[name])

    @precondition(lambda self: _whole(self) and any(self.turns.values()))
    @rule(pick=st.integers(0, 50), said=words)
    def replace(self, pick: int, said: list[str]) -> None:
        sessions = [s for s, turns in self.turns.items() if turns]
        name = sessions[pick % len(sessions)]
        old = self.turns[name][pick % len(self.turns[name])]
        new = Turn(old.role, tagged(said), old.id)
        self._settled()
        namespace = self.place.namespace
        self.admin.store.delete([old.id], namespace=namespace, session_id=name)
        self.admin.add_message(name, new.role, new.text, id=new.id, user_id=self.owner[name])
        self.removed.add(old.text)
        self.turns[name] = [t for t in self.turns[name] if t.id != old.id] + [new]
        self._after(self.owner[name])

    @precondition(lambda self: _whole(self) and bool(self.pins))
    @rule(pick=st.integers(0, 50))
    def unpin(self, pick: int) -> None:
        pin_id = sorted(self.pins)[pick % len(self.pins)]
        kind, scope, text = self.pins.pop(pin_id)
        where = {"session_id": scope} if kind == "session" else {"user_id": scope}
        self._settled()
        self.admin.unpin(pin_id, **where)
        self.removed.add(text)
        self._after(scope if kind == "user" else self.owner[scope])

    @rule(which=st.sampled_from([0, 1]))
    def delete_user(self, which: int) -> None:
        user = self.users[which]
        self._settled()
        self.admin.delete_user(user)
        for name, owner in self.owner.items():
            if owner == user:
                self._gone(name)
        for pin_id, (kind, scope, text) in list(self.pins.items()):
            if kind == "user" and scope == user:
                del self.pins[pin_id]
                self.removed.add(text)
        self._after(user)

    # -- what must hold -------------------------------------------------------------------
    def _stored(self) -> dict[str, list[str]]:
        return {name: kept(self.driver, self.admin, name, self.owner[name]) for name in self.turns}

    def _settled(self) -> None:
        """Before an admin call: what the door acknowledged is stored (it may write behind).

        A write still queued in the door when another object deletes is another promise
        (docs/reliability.md); this machine asks what happens after the write landed.
        """
        want = {name: [t.text for t in turns] for name, turns in self.turns.items()}
        stored = eventually(self._stored, lambda found: found == want)
        assert stored == want, f"{self.driver.name}: acknowledged turns not stored: {stored}"

    def _gone(self, name: str) -> None:
        self.removed.update(t.text for t in self.turns[name])
        self.turns[name] = []
        for pin_id, (kind, scope, text) in list(self.pins.items()):
            if kind == "session" and scope == name:
                del self.pins[pin_id]
                self.removed.add(text)

    def _after(self, user: str) -> None:
        """After an admin call: every session of ``user``, sent, offers nothing removed."""
        self.admin.flush()
        for name, owner in self.owner.items():
            if owner == user:
                self._check(name, 0)

    def _check(self, name: str, pick: int) -> None:
        user = self.owner[name]
        texts = [t.text for turns in self.turns.values() for t in turns] + sorted(self.removed)
        asked = texts[pick % len(texts)].rsplit(" ", 1)[0] if texts else "lisbon"
        got = self.driver.send(name, user, asked, BUDGET)
        self.turns[name] += got.stored  # an agent or chat engine stores its question and reply
        self.asked.update([asked, *(t.text for t in got.stored)])
        received = got.texts or [text for _, text in got.got]
        offered = sorted(t for t in self.removed - self.asked if any(t in r for r in received))
        assert not offered, f"{self.driver.name} offered what was removed: {offered}"

    def teardown(self) -> None:
        """A fresh memory holds, in each session, exactly the turns acknowledged and kept."""
        fresh_memory = self.place.open_memory()
        try:
            for name, turns in self.turns.items():
                want = [t.text for t in turns]
                stored = eventually(
                    lambda name=name: kept(self.driver, fresh_memory, name, self.owner[name]),
                    lambda texts, want=want: texts == want,
                )
                assert stored == want, f"session {name}: stored {stored}, acknowledged {want}"
        finally:
            fresh_memory.close()


@pytest.mark.parametrize(
    "place_kind", ["embedded", pytest.param("server", marks=pytest.mark.integration)]
)
def test_nothing_removed_is_offered_and_nothing_kept_is_lost(
    request: pytest.FixtureRequest, driver: Any, place: Place, place_kind: str
) -> None:
    needs(driver, "removal")
    needs(driver, "add")
    needs(driver, "send")
    if place_kind == "embedded" and "signals" in driver.can:
        pytest.skip(f"{driver.name} is a server process: it holds an embedded folder alone")
    admin = request.getfixturevalue("admin")

    class Machine(Removal):
        pass

    Machine.driver, Machine.admin, Machine.place = driver, admin, place
    run_state_machine_as_test(Machine, settings=MACHINE)
