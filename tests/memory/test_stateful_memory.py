"""Several `ContextMemory` objects on one embedded folder agree with a model of what is stored.

Docs/reliability.md allows several objects on one folder in one process (an app and an admin
task). Each keeps copies of stored state beside the store: the session copy and its indexes,
access counts, the previous context, entity state, the write journal. The model-based test
(`tests/memory/stateful_machine.py`) drives three of them (entity memory on for one, write-behind
off for another) through random interleavings of every write and read, and checks each read
against the reference model: nothing deleted, nothing of another user or session, nothing
missing that was flushed.

Steps: ``CTXBUDGET_STATEFUL_STEPS`` when set, else 1,000 in CI (``CI=true``) and 300 otherwise.

The regression tests below pin the cases found this way: a session deleted (or its user) and
started again by another user, seen from an object that had assembled it before (its messages,
entities, access counts, previous context); a user deleted after their turns left a session
another user started; a message replaced in the store. Sessions hold both users' messages (one
add in four writes as the user who did not start the session): what that means for each read
and delete is in `tests/memory/stateful_model.py`.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxbudget.core.items import Tier
from ctxbudget.core.report import AssembledContext
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.store.records import Record
from tests.memory.stateful_machine import machine_class, run_steps, steps_wanted
from tests.memory.stateful_runner import Runner


class EmbeddedDriver:
    """Three memories on a fresh folder: plain, entity memory on, and write-behind off."""

    def __init__(self, root: Path, embedder: OnnxEmbedder) -> None:
        self.folder = Path(tempfile.mkdtemp(dir=root))
        self.memories = [
            ContextMemory(path=self.folder, embedder=embedder),
            ContextMemory(path=self.folder, embedder=embedder, config=MemoryConfig(entities=True)),
            ContextMemory(path=self.folder, embedder=embedder, write_behind=False),
        ]
        self.runners = [Runner(memory) for memory in self.memories]

    def run(self, actor: int, command: dict[str, object]) -> dict[str, object]:
        return self.runners[actor].run(command)

    def close(self) -> None:
        for memory in self.memories:
            memory.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def test_memories_on_one_folder_agree_with_the_model(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    machine = machine_class(3, frozenset({1}), lambda: EmbeddedDriver(tmp_path, embedder))
    total = steps_wanted()
    assert run_steps(machine, total) >= total


# -- regressions: a session deleted and started again, seen from another object ---------------

ALICE = [
    {"id": "m1", "role": "user", "text": "alice: my locker code is 4471, near Porto"},
    {"id": "m2", "role": "assistant", "text": "alice: noted, the locker code 4471"},
]
BOB = [
    {"id": "m1", "role": "user", "text": "bob: flying to Oslo next week"},
    {"id": "m2", "role": "assistant", "text": "bob: have a good flight to Oslo"},
]
QUERY = "what is my locker code?"
FORGET = ["delete_session", "delete_user", "clear_pins"]


@pytest.fixture
def pair(tmp_path: Path, embedder: OnnxEmbedder) -> Iterator[tuple[ContextMemory, ContextMemory]]:
    """An app (``a``) and an admin task (``b``, entity memory on) on one folder."""
    folder = tmp_path / "db"
    a = ContextMemory(path=folder, embedder=embedder)
    b = ContextMemory(path=folder, embedder=embedder, config=MemoryConfig(entities=True))
    yield a, b
    a.close()
    b.close()


def forget_alice(memory: ContextMemory, how: str) -> None:
    if how == "delete_session":
        memory.delete_session("s1")
    elif how == "delete_user":
        memory.delete_user("alice")
    else:
        memory.clear("s1", pins=True)


def alice_then_bob(a: ContextMemory, b: ContextMemory, how: str) -> AssembledContext:
    """Alice's s1 assembled by ``a``; ``b`` forgets her and bob starts s1 with as many turns."""
    a.add_messages("s1", ALICE, user_id="alice")
    a.pin("s1", "alice: the locker is in hall B", id="where")
    a.pin(user_id="alice", text="alice: prefers short answers", id="style")
    first = a.assemble("s1", QUERY, budget=8000)
    assert "4471" in first.render()  # the copies the next calls must not trust are held now
    a.flush()
    forget_alice(b, how)
    b.add_messages("s1", BOB, user_id="bob")
    b.flush()
    return first


def texts_of(ctx: AssembledContext) -> list[str]:
    return [item.text for item in [*ctx.included, *(p.item for p in ctx.pruned)]]


@pytest.mark.parametrize("how", FORGET)
def test_a_session_started_again_by_another_user_shows_none_of_the_old_one(
    pair: tuple[ContextMemory, ContextMemory], how: str
) -> None:
    a, b = pair
    alice_then_bob(a, b, how)
    ctx = a.assemble("s1", QUERY, budget=8000)
    texts = texts_of(ctx)
    assert not [t for t in texts if "alice" in t], texts
    assert {"bob: flying to Oslo next week", "bob: have a good flight to Oslo"} <= set(texts)
    found = a.candidates("s1", QUERY, budget=8000)
    assert not [it.text for it in found.items if "alice" in it.text]
    assert found.user_id == "bob"
    assert [r.text for r in a.history("s1")] == [m["text"] for m in BOB]
    hits = a.search(QUERY, kinds=None, session_id="s1")
    assert sorted(h.hit.record.text for h in hits) == sorted(m["text"] for m in BOB)


@pytest.mark.parametrize("how", FORGET)
def test_entities_of_a_session_started_again_are_the_new_ones(
    pair: tuple[ContextMemory, ContextMemory], how: str
) -> None:
    a, b = pair
    a.add_messages("s1", ALICE, user_id="alice")
    a.flush()
    assert [e.name for e in b.entities("s1")] == ["Porto"]
    forget_alice(a, how)
    a.add_messages("s1", BOB, user_id="bob")
    a.flush()
    assert [e.name for e in b.entities("s1")] == ["Oslo"]
    ctx = b.assemble("s1", "what about Porto?", budget=8000)
    sent = [it.text for it in ctx.included if it.tier != Tier.QUERY]
    assert not [t for t in sent if "Porto" in t or "alice" in t], sent


@pytest.mark.parametrize("how", FORGET)
def test_access_counts_read_by_another_object_forget_a_deleted_session(
    pair: tuple[ContextMemory, ContextMemory], how: str
) -> None:
    a, b = pair
    a.add_messages("s1", ALICE, user_id="alice")
    a.assemble("s1", QUERY, budget=8000)
    a.flush()
    assert b.access_counts("s1") == {"m1": 1, "m2": 1}  # b holds its copy of the counts now
    forget_alice(a, how)
    a.flush()
    assert b.access_counts("s1") == {}
    assert b.contexts("s1") == []
    a.add_messages("s1", BOB, user_id="bob")
    mine = a.assemble("s1", QUERY, budget=8000)
    theirs = b.assemble("s1", QUERY, budget=8000)
    a.flush()
    b.flush()
    both = [*mine.included_ids, *theirs.included_ids]
    expected = {i: both.count(i) for i in both if not i.startswith("ctxbudget:query")}
    assert a.access_counts("s1") == expected
    assert b.access_counts("s1") == expected


@pytest.mark.parametrize("how", FORGET)
def test_no_prefix_is_shared_with_a_deleted_session(
    pair: tuple[ContextMemory, ContextMemory], how: str
) -> None:
    a, b = pair
    alice_then_bob(a, b, how)
    ctx = a.assemble("s1", QUERY, budget=8000)
    assert ctx.prefix_tokens is None
    again = a.assemble("s1", QUERY, budget=8000)
    assert again.prefix_tokens is not None and again.prefix_tokens > 0  # same life: shared


# -- regressions: other cases the model-based test found ----------------------------------------


@pytest.mark.parametrize("how", ["clear", "delete_message"])
def test_deleting_a_user_keeps_a_session_that_no_longer_holds_their_records(
    tmp_path: Path, embedder: OnnxEmbedder, how: str
) -> None:
    # docs/reliability.md, "Deleting a user": a session another user started loses only the
    # user's records. alice started s1, bob's turn was there once; after it went, only alice's
    # turns and her log are there. (A session bob started would go whole: its entry names him.)
    memory = ContextMemory(path=tmp_path / "db", embedder=embedder)
    memory.add_message("s1", "user", "alice: I start here", id="m0", user_id="alice")
    memory.add_message("s1", "user", "bob: hello there", id="m1", user_id="bob")
    if how == "clear":
        memory.clear("s1")
    else:
        memory.flush()
        memory.store.delete(["m1"], namespace=memory.namespace, session_id="s1")
    memory.add_message("s1", "user", "alice: my turn now", id="m2", user_id="alice")
    memory.assemble("s1", "hello?", budget=8000, user_id="alice")
    assert memory.delete_user("bob") == 0
    left = (
        ["alice: my turn now"] if how == "clear" else ["alice: I start here", "alice: my turn now"]
    )
    assert [r.text for r in memory.history("s1")] == left
    assert len(memory.contexts("s1")) == 1
    memory.close()


def test_a_replaced_message_keeps_nothing_of_the_one_it_replaced(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    memory = ContextMemory(path=tmp_path / "db", embedder=embedder)
    calls = [{"id": "c1", "name": "lookup", "arguments": {}}]
    memory.add_message(
        "s1",
        "assistant",
        "let me look that up",
        id="m1",
        user_id="bob",
        timestamp=1_700_000_000.0,
        metadata={"topic": "trains"},
        name="helper",
        tool_calls=calls,
    )
    memory.flush()
    new = Record(
        id="m1",
        kind="message",
        text="the train leaves at nine",
        namespace=memory.namespace,
        session_id="s1",
        user_id="bob",
        role="assistant",
    )
    memory.store.add([new], replace=True)
    (stored,) = memory.history("s1")
    assert (stored.text, stored.timestamp, stored.tool_calls, stored.metadata) == (
        new.text,
        None,
        (),
        {},
    )
    # Adding what is stored again is a no-op, not a conflict.
    memory.add_message("s1", "assistant", new.text, id="m1", user_id="bob")
    memory.close()
