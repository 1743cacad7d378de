"""Isolation at the level users see: what `ContextMemory.assemble` offers, for hostile histories.

tests/memory/test_isolation.py checks the store's filters one call at a time. Here random
interleavings of writers, sessions, users and namespaces go through `ContextMemory` (messages,
batches, session and user pins, documents, summaries, deletions), sequentially and from several
threads at once, on an embedded Chroma and on a Chroma server, and every assembly is checked
against what it may contain. Every stored text carries a unique marker (``mk<n>x``), every
record an id, and the same ids, session ids and user ids exist in both namespaces, so only the
filters keep them apart.

What ``assemble(session, query, user_id=U)`` may offer (included or pruned), in its namespace:

- anything of that session: its messages (whoever wrote them), its pins and summaries;
- documents of the namespace (only the collections asked for with ``documents=``);
- pins of U with user scope;
- messages and summaries of U's other sessions, when ``other_sessions`` is on;

where U is the ``user_id`` given, else the user of the session's newest message that has one.
Nothing else: no other namespace, no other user's sessions or user pins, not even U's pins of
U's other sessions, and nothing deleted. Sessions here each belong to one user (``u1-s0`` is
u1's), with some anonymous assistant turns in them (no user id) that belong to the session.

``delete_user(U)`` removes every record carrying U's id and every session where such a record
is, whole (its anonymous turns, pins and summaries too). A session holding only anonymous turns
carries nothing that ties it to U, so it stays.

After ``delete_user`` the store itself is asked (count, find, get, list_sessions, search, in
every namespace): none of the user's records are left in that namespace, and every other record
(other users', the same user id in the other namespace, documents) is still there, intact.
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from deadline import run_threads
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxbudget import ContextItem
from ctxbudget.core.ids import internal_id
from ctxbudget.core.report import AssembledContext
from ctxbudget.embed.local import LocalEmbedder
from ctxbudget.memory.context import ContextMemory
from ctxbudget.store.chroma_store import ChromaStore, Record

NAMESPACES = ("na", "nb")
USERS = ("u1", "u2", "u3")
SESSIONS = (0, 1)
DOC_COLLECTIONS = ("kb", "faq")
# Alike texts everywhere: similarity never separates owners, only the filters do.
TOPICS = (
    "I plan a trip to Lisbon by train",
    "my favourite colour is green",
    "I am vegetarian and I like coffee",
    "the meeting about the budget is on Tuesday",
)
QUERIES = (
    "what did I say about the trip to Lisbon?",
    "which colour do I like?",
    "what do I eat and drink?",
    "when is the budget meeting?",
)
MARKER = re.compile(r"\bmk(\d+)x\b")
SUMMARY_ID = re.compile(r"^(?P<sid>[^|]+)\|ctxbudget:summary:\d+-\d+$")
QUERY_ID = internal_id("query")
THREAD_DEADLINE = 300.0  # seconds for a threaded example; a deadlock fails instead of hanging
BUDGET = 1500


def session_id(user: str, number: int) -> str:
    return f"{user}-s{number}"


def owner_of(sid: str) -> str:
    return sid.split("-s", 1)[0]


@dataclass(frozen=True, slots=True)
class Stored:
    """What the test knows of one record it wrote."""

    ns: str
    rid: str
    kind: str
    sid: str | None
    uid: str | None
    marker: str | None = None
    scope: str | None = None  # pins: "session" or "user"
    docs: str | None = None  # documents: their collection

    @property
    def owner(self) -> str | None:
        """The user the record belongs to: its session's, else its own."""
        return owner_of(self.sid) if self.sid is not None else self.uid


@dataclass
class World:
    """Every record an example wrote, by marker and by (namespace, id), and what was deleted."""

    run: str
    records: dict[tuple[str, str], Stored] = field(default_factory=dict)
    by_marker: dict[str, Stored] = field(default_factory=dict)
    deleted: set[tuple[str, str]] = field(default_factory=set)
    order: list[tuple[str, str]] = field(default_factory=list)  # write order
    lock: threading.Lock = field(default_factory=threading.Lock)
    _markers: Iterator[int] = field(default_factory=itertools.count)
    _ids: dict[str, Iterator[int]] = field(default_factory=dict)

    def ns(self, short: str) -> str:
        return f"{self.run}-{short}"

    def new(self, ns: str, kind: str, prefix: str, **fields: Any) -> Stored:
        """Register a record before it is written (a concurrent assembly may see it at once)."""
        with self.lock:
            # Ids count per namespace: both namespaces hold m0, m1, p0... with other contents.
            number = next(self._ids.setdefault(f"{ns}/{prefix}", itertools.count()))
            rid = f"{prefix}{number}" if kind != "document" else f"{prefix}{number}#0"
            marker = str(next(self._markers))
            rec = Stored(ns=ns, rid=rid, kind=kind, marker=marker, **fields)
            self.records[(ns, rid)] = rec
            self.by_marker[marker] = rec
            self.order.append((ns, rid))
            return rec

    def add_summary(self, ns: str, record: Record) -> None:
        # Summary ids are unique per session (ids are scoped): the test names them "sid|id".
        with self.lock:
            key = (ns, f"{record.session_id}|{record.id}")
            self.deleted.discard(key)  # a session summarized again after a deletion
            if key not in self.records:
                self.order.append(key)
            self.records[key] = Stored(
                ns=ns, rid=key[1], kind="summary", sid=record.session_id, uid=record.user_id
            )

    def live(self, ns: str) -> list[Stored]:
        with self.lock:
            return [self.records[k] for k in self.order if k[0] == ns and k not in self.deleted]

    def delete_user(self, ns: str, user: str) -> list[Stored]:
        """What ``delete_user`` must remove: records with the user's id, and the whole of every
        session where one of them is (a session of anonymous turns only is nobody's)."""
        with self.lock:
            live = [r for k, r in self.records.items() if k[0] == ns and k not in self.deleted]
            theirs = {r.sid for r in live if r.uid == user and r.sid is not None}
            gone = [r for r in live if r.uid == user or (r.sid is not None and r.sid in theirs)]
            self.deleted.update((r.ns, r.rid) for r in gone)
            return gone


@dataclass(frozen=True, slots=True)
class Ask:
    """One assembly and who may appear in it."""

    ns: str
    sid: str
    user: str | None  # the user whose other sessions and user pins may appear
    other_sessions: bool
    documents: bool | tuple[str, ...]

    def allows(self, rec: Stored, deleted: bool) -> bool:
        if rec.ns != self.ns or deleted:
            return False
        if rec.kind == "document":
            return self.documents is True or (
                isinstance(self.documents, tuple) and rec.docs in self.documents
            )
        if rec.sid == self.sid:
            return True
        if rec.kind == "pinned":
            return rec.scope == "user" and self.user is not None and rec.uid == self.user
        return (
            rec.kind in ("message", "summary")
            and self.other_sessions
            and self.user is not None
            and rec.owner == self.user
        )

    def allows_summary_id(self, rid: str) -> bool:
        # A summary written by a concurrent thread may not be registered yet: its id names it.
        match = SUMMARY_ID.match(rid)
        if match is None:
            return False
        sid = match["sid"]
        return sid == self.sid or (self.other_sessions and owner_of(sid) == self.user)


def offered(result: AssembledContext) -> list[ContextItem]:
    return [*result.included, *(p.item for p in result.pruned)]


def world_key(item_id: str, sid: str) -> str:
    """The test's id of an offered item: other scopes' ids come qualified (see item_id)."""
    if item_id.startswith("ctxbudget:summary:"):
        return f"{sid}|{item_id}"
    for kind in ("session", "user", "collection"):
        prefix = internal_id(kind) + ":"
        if item_id.startswith(prefix):
            name, rid = json.loads(item_id.removeprefix(prefix))
            return f"{name}|{rid}" if rid.startswith("ctxbudget:summary:") else str(rid)
    return item_id


def stored_key(record: Record) -> str:
    return f"{record.session_id}|{record.id}" if record.kind == "summary" else record.id


def leaks(world: World, ask: Ask, result: AssembledContext) -> list[str]:
    """Everything offered that ``ask`` may not see, by id and by the markers in its text."""
    found: list[str] = []
    with world.lock:
        records, deleted, by_marker = dict(world.records), set(world.deleted), world.by_marker
    texts = [result.render()]
    for item in offered(result):
        texts.append(item.text)
        if item.id == QUERY_ID:
            continue
        key = world_key(item.id, ask.sid)
        rec = records.get((ask.ns, key))
        if rec is None:
            if not ask.allows_summary_id(key):
                found.append(f"unknown id {item.id!r} ({item.source}): {item.text[:80]!r}")
        elif not ask.allows(rec, (rec.ns, rec.rid) in deleted):
            found.append(f"id {item.id!r} ({item.source}) is {rec}")
    for text in texts:
        for marker in MARKER.findall(text):
            rec = by_marker[marker]
            if not ask.allows(rec, (rec.ns, rec.rid) in deleted):
                found.append(f"marker mk{marker}x of {rec}")
    return sorted(set(found))


# -- the store under test ----------------------------------------------------------------------


@pytest.fixture(
    scope="module", params=["embedded", pytest.param("server", marks=pytest.mark.integration)]
)
def shared_store(request: pytest.FixtureRequest, embedder: LocalEmbedder) -> Iterator[ChromaStore]:
    """One store per backend for the module; each example writes its own namespaces."""
    collection = f"iso-{uuid.uuid4().hex[:12]}"
    if request.param == "server":
        server = request.getfixturevalue("chroma_server")
        with ChromaStore(url=server.url, embedder=embedder, collection=collection) as store:
            yield store
        return
    folder = Path(tempfile.mkdtemp(prefix="ctxbudget-iso-"))
    try:
        with ChromaStore(folder, embedder=embedder, collection=collection) as store:
            yield store
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def probe(embedder: LocalEmbedder) -> list[float]:
    return embedder.embed_query("trip colour coffee meeting")


# -- operations --------------------------------------------------------------------------------

Op = tuple[str, str, str, int, int]  # action, namespace, user, session number, variant
ACTIONS = ("say", "say", "say", "batch", "pin_session", "pin_user", "doc", "summarize")
ops_strategy = st.lists(
    st.tuples(
        st.sampled_from((*ACTIONS, "ask", "ask", "ask", "forget")),
        st.sampled_from(NAMESPACES),
        st.sampled_from(USERS),
        st.sampled_from(SESSIONS),
        st.integers(0, 11),
    ),
    min_size=4,
    max_size=16,
)


class Player:
    """Runs operations on one `ContextMemory` per namespace and checks every assembly."""

    def __init__(self, store: ChromaStore, world: World, *, exact_user: bool) -> None:
        self.store = store
        self.world = world
        self.exact_user = exact_user  # False while threads write: the user may be inferred
        self.memories = {
            short: ContextMemory(store=store, namespace=world.ns(short)) for short in NAMESPACES
        }
        self.problems: list[str] = []
        self.asked = 0

    def text(self, rec: Stored, variant: int) -> str:
        return f"{TOPICS[variant % len(TOPICS)]} mk{rec.marker}x."

    def run(self, op: Op) -> None:
        action, short, user, number, variant = op
        ns = self.world.ns(short)
        memory = self.memories[short]
        sid = session_id(user, number)
        if action == "say":
            role = "user" if variant % 2 == 0 else "assistant"
            uid = None if variant % 4 == 3 else user  # some assistant turns carry no user id
            rec = self.world.new(ns, "message", "m", sid=sid, uid=uid)
            memory.add_message(sid, role, self.text(rec, variant), id=rec.rid, user_id=uid)
        elif action == "batch":
            recs = [
                self.world.new(ns, "message", "m", sid=sid, uid=user)
                for _ in range(variant % 3 + 2)
            ]
            messages = [
                {
                    "role": ("user", "assistant")[i % 2],
                    "text": self.text(r, variant + i),
                    "id": r.rid,
                }
                for i, r in enumerate(recs)
            ]
            memory.add_messages(sid, messages, user_id=user)
        elif action == "pin_session":
            rec = self.world.new(ns, "pinned", "p", sid=sid, uid=user, scope="session")
            memory.pin(sid, self.text(rec, variant), user_id=user, id=rec.rid)
        elif action == "pin_user":
            rec = self.world.new(ns, "pinned", "p", sid=None, uid=user, scope="user")
            memory.pin(text=self.text(rec, variant), user_id=user, id=rec.rid)
        elif action == "doc":
            docs = DOC_COLLECTIONS[variant % 2]
            rec = self.world.new(ns, "document", "d", sid=None, uid=None, docs=docs)
            doc_id = rec.rid.removesuffix("#0")
            memory.add_documents([(doc_id, self.text(rec, variant))], collection=docs)
        elif action == "summarize":
            new = memory.summarize(sid, keep_recent=0, stretch=2)
            for record in self.store.get(new, namespace=ns, session_id=sid):
                self.world.add_summary(ns, record)
        elif action == "ask":
            self.ask(short, user, number, variant)
        elif action == "forget":
            self.forget(short, user)
        else:  # pragma: no cover - the strategy draws only the actions above
            raise AssertionError(action)

    def ask(self, short: str, owner: str, number: int, variant: int) -> None:
        ns = self.world.ns(short)
        sid = session_id(owner, number)
        given_user = (None, owner, USERS[(USERS.index(owner) + 1) % len(USERS)])[variant % 3]
        other_sessions = variant % 4 != 1
        documents: bool | tuple[str, ...] = (True, False, ("kb",))[variant // 3 % 3]
        if given_user is not None:
            user: str | None = given_user
        elif self.exact_user:
            user = self.inferred_user(ns, sid)
        else:
            user = owner  # the newest message with a user id may or may not be there yet
        ask = Ask(ns, sid, user, other_sessions, documents)
        result = self.memories[short].assemble(
            sid,
            QUERIES[variant % len(QUERIES)],
            budget=BUDGET,
            user_id=given_user,
            other_sessions=other_sessions,
            documents=list(documents) if isinstance(documents, tuple) else documents,
        )
        self.asked += 1
        self.problems += [f"assemble({ask}): {leak}" for leak in leaks(self.world, ask, result)]
        if self.exact_user:
            self.check_present(ask, result)

    def inferred_user(self, ns: str, sid: str) -> str | None:
        mine = [r for r in self.world.live(ns) if r.sid == sid and r.kind == "message"]
        return next((r.uid for r in reversed(mine) if r.uid is not None), None)

    def check_present(self, ask: Ask, result: AssembledContext) -> None:
        """What must be offered: the session's newest message, its pins and the user's pins."""
        ids = {world_key(item.id, ask.sid) for item in offered(result)}
        live = self.world.live(ask.ns)
        messages = [r for r in live if r.sid == ask.sid and r.kind == "message"]
        pins = [r for r in live if r.kind == "pinned" and ask.allows(r, False)]
        wanted = [*messages[-1:], *pins]
        missing = [r for r in wanted if r.rid not in ids]
        if missing:
            self.problems.append(f"assemble({ask}) left out {missing}")

    def forget(self, short: str, user: str) -> None:
        ns = self.world.ns(short)
        gone = self.world.delete_user(ns, user)
        removed = self.memories[short].delete_user(user)
        if removed != len(gone):
            self.problems.append(f"delete_user({ns}, {user}) removed {removed}, not {len(gone)}")


def verify_store(
    store: ChromaStore, world: World, probe: list[float], forgotten: Sequence[tuple[str, str]]
) -> None:
    """Ask the store itself: forgotten users have nothing left; everything else is intact."""
    for ns, user in forgotten:
        assert store.find(namespace=ns, user_id=user) == []
        assert store.list_sessions(namespace=ns, user_id=user) == []
        assert store.search(probe, namespace=ns, k=1000, user_id=user) == []
    for short in NAMESPACES:
        ns = world.ns(short)
        with world.lock:
            gone = [rid for key_ns, rid in world.deleted if key_ns == ns]
        live = world.live(ns)
        # Ids are scoped (the same id in several sessions): read the namespace, key as the test.
        got = {stored_key(r): r for r in store.find(namespace=ns)}
        assert not set(gone) & set(got)
        assert sorted(got) == sorted(r.rid for r in live), f"records lost in {ns}"
        for rec in live:
            if rec.marker is not None:
                assert f"mk{rec.marker}x" in got[rec.rid].text, (rec, got[rec.rid])
            assert got[rec.rid].namespace == ns
        assert store.count(namespace=ns) == len(live)
        hits = store.search(probe, namespace=ns, k=1000)
        assert sorted(stored_key(h.record) for h in hits) == sorted(r.rid for r in live)


def final_round(player: Player, probe: list[float], forget: tuple[str, str]) -> None:
    """Delete one user, ask the store, then assemble every session once more."""
    world = player.world
    short, user = forget
    player.forget(short, user)
    forgotten = [(world.ns(short), user)]
    for memory in player.memories.values():
        memory.flush()  # the store itself is read next: what each memory acknowledged, stored
    verify_store(player.store, world, probe, forgotten)
    player.exact_user = True
    for ns_short in NAMESPACES:
        sessions = {r.sid for r in world.live(world.ns(ns_short)) if r.sid is not None}
        if ns_short == short:  # the forgotten user's sessions show nothing of theirs either
            sessions |= {session_id(user, number) for number in SESSIONS}
        for sid in sorted(sessions):
            player.ask(ns_short, owner_of(sid), int(sid.rsplit("-s", 1)[1]), 0)


# -- the properties ----------------------------------------------------------------------------

QUIET = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]


@settings(max_examples=8, deadline=None, suppress_health_check=QUIET)
@given(ops=ops_strategy, forget=st.tuples(st.sampled_from(NAMESPACES), st.sampled_from(USERS)))
def test_sequential_interleavings_never_leak_across_sessions_users_or_namespaces(
    shared_store: ChromaStore, probe: list[float], ops: list[Op], forget: tuple[str, str]
) -> None:
    world = World(uuid.uuid4().hex[:8])
    player = Player(shared_store, world, exact_user=True)
    for op in ops:
        player.run(op)
    assert player.problems == []
    final_round(player, probe, forget)
    assert player.problems == []


@settings(max_examples=5, deadline=None, suppress_health_check=QUIET)
@given(
    ops=st.lists(ops_strategy, min_size=2, max_size=4),
    forget=st.tuples(st.sampled_from(NAMESPACES), st.sampled_from(USERS)),
)
def test_threaded_interleavings_never_leak_and_deletion_is_complete(
    shared_store: ChromaStore, probe: list[float], ops: list[list[Op]], forget: tuple[str, str]
) -> None:
    # Each thread plays its own list; deletions wait for the end (what a deletion racing a
    # writer of the same user leaves depends on who wins, which the model cannot know).
    world = World(uuid.uuid4().hex[:8])
    player = Player(shared_store, world, exact_user=False)

    def play(mine: list[Op]) -> Callable[[], None]:
        def job() -> None:
            for op in mine:
                if op[0] != "forget":
                    player.run(op)

        return job

    run_threads([play(mine) for mine in ops], deadline=THREAD_DEADLINE)
    assert player.problems == []
    final_round(player, probe, forget)
    assert player.problems == []


def test_the_checker_sees_a_planted_leak(shared_store: ChromaStore) -> None:
    # A check that cannot fail proves nothing: plant another user's record and another
    # namespace's text through `extra` and see both reported.
    world = World(uuid.uuid4().hex[:8])
    player = Player(shared_store, world, exact_user=True)
    player.run(("say", "na", "u1", 0, 0))
    player.run(("say", "na", "u2", 0, 0))
    player.run(("say", "nb", "u1", 0, 0))
    player.run(("pin_session", "na", "u1", 1, 0))
    stranger = world.records[(world.ns("na"), "m1")]  # u2's message
    elsewhere = world.records[(world.ns("nb"), "m0")]  # u1's message in the other namespace
    other_pin = world.records[(world.ns("na"), "p0")]  # u1's pin of u1's other session
    planted = [
        ContextItem(stranger.rid, "a text", source="message"),
        ContextItem("x1", f"copied mk{elsewhere.marker}x", source="message"),
        ContextItem(other_pin.rid, "a pin", source="pinned"),
    ]
    memory = player.memories["na"]
    result = memory.assemble("u1-s0", QUERIES[0], budget=BUDGET, extra=planted)
    ask = Ask(world.ns("na"), "u1-s0", "u1", True, True)
    found = leaks(world, ask, result)
    assert any(stranger.rid in leak for leak in found), found
    assert any(f"mk{elsewhere.marker}x" in leak for leak in found), found
    assert any("unknown id 'x1'" in leak for leak in found), found
    assert any(other_pin.rid in leak for leak in found), found
    clean = memory.assemble("u1-s0", QUERIES[0], budget=BUDGET)
    assert leaks(world, ask, clean) == []
