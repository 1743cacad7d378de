"""Layout 3: a call touches only its own user's collections, on keys only its scope matches.

- Which collections a call opens and reads (a probe on the chromadb client): `assemble` for one
  user reads that user's partition, the store's meta and the namespace's documents, whatever
  other users hold.
- Every ``where`` the hot path sends filters on selective keys (`ctxbudget.store.keys`) only:
  no clause that records of other scopes match (``ns``, ``kind``, ``seq``...), since Chroma
  evaluates each clause against the metadata of the whole store.
- Session homes: a session started without a user, another user writing into a session.
- Stamps: a process keeping a session in memory sees what another deleted or replaced.
- A partition deleted elsewhere (``delete_user``) is opened again by a store holding its handle.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxbudget.memory.context import ContextMemory
from ctxbudget.store.chroma_store import ChromaStore, Record
from ctxbudget.store.keys import KEY_FIELDS
from ctxbudget.store.partitions import docs_partition, session_partition, user_partition
from tests.conftest import StoreFactory

NS = "default"


class Probe:
    """Records the collection and the ``where`` of every Chroma call a store makes."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []
        self.threads: list[int] = []  # the thread of each call
        self.lock = threading.Lock()

    def wrap(self, collection: Any) -> Any:
        probe = self

        class Watched:
            def __getattr__(self, name: str) -> Any:
                attribute = getattr(collection, name)
                if name not in ("get", "query", "upsert", "add", "delete", "count"):
                    return attribute

                def call(*args: Any, **kwargs: Any) -> Any:
                    with probe.lock:
                        probe.calls.append((collection.name, name, kwargs.get("where")))
                        probe.threads.append(threading.get_ident())
                    return attribute(*args, **kwargs)

                return call

        return Watched()


@contextmanager
def probed(store: ChromaStore) -> Iterator[Probe]:
    probe = Probe()
    cols = store._collections
    client, meta = cols.conn.client, cols.meta

    class Client:
        def __getattr__(self, name: str) -> Any:
            attribute = getattr(client, name)
            if name in ("get_collection", "get_or_create_collection"):
                return lambda *a, **k: probe.wrap(attribute(*a, **k))
            return attribute

    cols._handles.clear()
    cols.conn.client, cols.meta = Client(), probe.wrap(meta)
    try:
        yield probe
    finally:
        cols._handles.clear()
        cols.conn.client, cols.meta = client, meta


def clause_keys(where: Any) -> set[str]:
    """The metadata keys a ``where`` filters on."""
    if not isinstance(where, dict):
        return set()
    keys: set[str] = set()
    for key, value in where.items():
        if key in ("$and", "$or"):
            for part in value:
                keys |= clause_keys(part)
        else:
            keys.add(key)
    return keys


def fill(memory: ContextMemory, users: int, sessions: int, turns: int) -> None:
    for u in range(users):
        for s in range(sessions):
            memory.add_messages(
                f"u{u}-s{s}",
                [
                    {"role": "user" if t % 2 == 0 else "assistant", "text": f"u{u} s{s} turn {t}"}
                    for t in range(turns)
                ],
                user_id=f"u{u}",
            )
        memory.pin(user_id=f"u{u}", text=f"u{u} likes tea")
    memory.flush()


def test_assemble_touches_only_its_users_collections_on_selective_keys(
    open_store: StoreFactory,
) -> None:
    store = open_store()
    memory = ContextMemory(store=store, write_behind=False)
    fill(memory, users=4, sessions=2, turns=6)
    memory.add_documents([{"id": "d", "text": "a shared document"}])
    name = store.collection
    with probed(store) as probe:
        for _ in range(2):  # the first builds the session's index, the second reuses it
            ctx = memory.assemble("u1-s1", "what does u1 like?", budget=2048, user_id="u1")
    assert "likes tea" in ctx.render()
    touched = {collection for collection, _, _ in probe.calls}
    assert touched <= {
        f"{name}.meta",
        user_partition(name, NS, "u1"),
        docs_partition(name, NS),
    }
    allowed = {*KEY_FIELDS, "doc_namespace"} | {"m.doc_namespace"}
    for collection, method, where in probe.calls:
        if collection != f"{name}.meta":
            assert clause_keys(where) <= allowed, (method, where)
    # The calls' own reads (the background context log's writer reads entries of its own).
    caller = threading.get_ident()
    calls = zip(probe.calls, probe.threads, strict=True)
    reads = [c for c, thread in calls if thread == caller and c[1] in ("get", "query")]
    assert len(reads) <= 2 * 6, reads  # a handful per assemble, whatever the store holds


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    first_user=st.sampled_from([None, "a", "b"]),
    writers=st.lists(st.sampled_from([None, "a", "b", "c"]), min_size=1, max_size=4),
)
def test_a_session_lives_in_one_home_and_each_users_records_are_found_and_deleted(
    open_store: StoreFactory, first_user: str | None, writers: list[str | None]
) -> None:
    store = open_store(collection=f"h{uuid.uuid4().hex[:16]}")  # a fresh store per example
    try:
        users = [first_user, *writers]
        for n, user in enumerate(users):
            store.add(
                [Record(id=f"m{n}", kind="message", text=f"m{n}", session_id="s", user_id=user)]
            )
        name = store.collection
        home = (
            session_partition(name, NS, "s")
            if first_user is None
            else user_partition(name, NS, first_user)
        )
        entry = store._sessions.entry(NS, "s")
        assert entry is not None and entry.home == home
        assert [r.id for r in store.session_messages(namespace=NS, session_id="s")] == [
            f"m{n}" for n in range(len(users))
        ]
        for user in {u for u in users if u is not None}:
            mine = {f"m{n}" for n, u in enumerate(users) if u == user}
            found = store.find(namespace=NS, user_id=user, kinds=["message"])
            assert {r.id for r in found} == mine
            hits = store.search("m0", namespace=NS, k=10, user_id=user)
            assert {h.record.id for h in hits} == mine
        for user in {u for u in users if u is not None}:
            mine = sum(u == user for u in users)
            assert store.delete_user(namespace=NS, user_id=user) == mine
        left = [f"m{n}" for n, u in enumerate(users) if u is None]
        got = [r.id for r in store.session_messages(namespace=NS, session_id="s")]
        assert got == left
    finally:
        store.close()


def test_a_copy_kept_in_memory_sees_what_another_process_deleted_or_replaced(
    open_store: StoreFactory,
) -> None:
    # Two stores on one location stand for two processes (or two workers of one server).
    one = ContextMemory(store=open_store(), write_behind=False)
    other = ContextMemory(store=open_store(), write_behind=False)
    one.add_messages(
        "s",
        [
            {"id": "a", "role": "user", "text": "my locker code is 4471"},
            {"id": "b", "role": "assistant", "text": "noted"},
            {"id": "c", "role": "user", "text": "and the bike lock is 9907"},
        ],
        user_id="u",
    )
    query = "what is my locker code?"
    assert "4471" in one.assemble("s", query, budget=2048).render()
    other.store.delete(["a"], namespace=one.namespace, session_id="s")
    assert "4471" not in one.assemble("s", query, budget=2048).render()
    other.store.add(
        [
            Record(
                id="c",
                kind="message",
                text="and the bike lock is 1234",
                session_id="s",
                user_id="u",
                role="user",
            )
        ],
        replace=True,
    )
    rendered = one.assemble("s", "what is the bike lock?", budget=2048).render()
    assert "1234" in rendered and "9907" not in rendered


def test_a_partition_deleted_by_another_store_is_opened_again(open_store: StoreFactory) -> None:
    one, other = open_store(), open_store()
    one.add([Record(id="m0", kind="message", text="hi", session_id="s", user_id="u")])
    assert other.delete_user(namespace=NS, user_id="u") == 1
    assert user_partition(one.collection, NS, "u") not in {
        c.name for c in one._client.list_collections()
    }
    # `one` still holds a handle to the deleted collection: it is opened again.
    again = one.add([Record(id="m1", kind="message", text="again", session_id="s", user_id="u")])
    assert again[0].seq is not None
    assert [r.id for r in other.session_messages(namespace=NS, session_id="s")] == ["m1"]


def test_a_write_that_replaces_and_moves_the_counter_keeps_the_version_bump(
    open_store: StoreFactory,
) -> None:
    store = open_store()
    first = [Record(id=f"m{i}", kind="message", text=f"m{i}", session_id="s") for i in range(3)]
    store.add(first)
    before = store._sessions.entry(NS, "s")
    assert before is not None
    changed = Record(id="m0", kind="message", text="m0, edited", session_id="s")
    more = [Record(id=f"n{i}", kind="message", text=f"n{i}", session_id="s") for i in range(40)]
    store.add([changed, *more], replace=True)
    after = store._sessions.entry(NS, "s")
    assert after is not None
    assert after.version == before.version + 1  # not undone by the counter's own write
    assert after.last >= 40  # the counter moved too
    view = store.session_view(namespace=NS, session_id="s", recent=5)
    assert view.stamp[:3] == (after.generation, 42, after.version)
    assert after.generation != before.generation  # a copy kept of the session is read again
