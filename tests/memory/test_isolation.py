"""Concurrent writers and isolation: seqs stay unique and dense, nobody sees another's records."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any

import chromadb
import pytest
from chromadb.config import Settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxbudget.embed.local import LocalEmbedder
from ctxbudget.store.chroma_store import ChromaStore, Record
from ctxbudget.store.client import close_client

THREADS = 8
PER_THREAD = 25


def run_threads(work: Callable[[int], None], count: int) -> None:
    """Run work(0..count-1) in threads released together; re-raise the first failure."""
    barrier = threading.Barrier(count)
    errors: list[BaseException] = []

    def target(index: int) -> None:
        try:
            barrier.wait()
            work(index)
        except BaseException as exc:  # noqa: BLE001 - handed back to the test thread
            errors.append(exc)

    threads = [threading.Thread(target=target, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def message(rid: str, text: str, *, namespace: str, session: str, user: str | None) -> Record:
    return Record(
        id=rid,
        kind="message",
        text=text,
        namespace=namespace,
        session_id=session,
        user_id=user,
        role="user",
    )


def test_concurrent_writers_to_one_session(store: ChromaStore) -> None:
    acknowledged: dict[str, Record] = {}
    guard = threading.Lock()

    def writer(t: int) -> None:
        for i in range(PER_THREAD):
            record = message(
                f"t{t}-{i:02d}", f"t{t} n{i}", namespace="ns", session="s", user=f"u{t}"
            )
            (stored,) = store.add([record])
            with guard:
                acknowledged[stored.id] = stored

    run_threads(writer, THREADS)

    messages = store.session_messages(namespace="ns", session_id="s")
    total = THREADS * PER_THREAD
    assert len(acknowledged) == total
    assert len(messages) == total
    assert len({m.id for m in messages}) == total
    assert {m.id for m in messages} == set(acknowledged)
    assert [m.seq for m in messages] == list(range(total))  # unique and dense
    assert all(acknowledged[m.id] == m for m in messages)  # the acknowledged seq is the stored one
    for t in range(THREADS):  # each writer's messages keep its order
        own = [m.seq or 0 for m in messages if m.id.startswith(f"t{t}-")]
        assert own == sorted(own) and len(own) == PER_THREAD
    assert store.recent(namespace="ns", session_id="s", limit=10) == messages[-10:]
    assert store.recent(namespace="ns", session_id="s", limit=total) == messages


@pytest.mark.integration
def test_writers_that_share_no_lock_still_get_unique_dense_seqs(
    chroma_server: Any, embedder: LocalEmbedder
) -> None:
    # Stores over their own HTTP clients have their own locks, as separate processes would:
    # only the seq claims on the server keep their numbering apart.
    host, port = chroma_server.url.removeprefix("http://").split(":")
    clients = [
        chromadb.HttpClient(
            host=host, port=int(port), settings=Settings(anonymized_telemetry=False)
        )
        for _ in range(4)
    ]
    collection = f"shared-{uuid.uuid4().hex[:8]}"
    stores = [ChromaStore(client=c, embedder=embedder, collection=collection) for c in clients]
    per_thread = 15
    acknowledged: dict[str, Record] = {}

    def writer(t: int) -> None:
        for i in range(per_thread):
            record = message(f"t{t}-{i:02d}", f"t{t} n{i}", namespace="ns", session="s", user=None)
            (stored,) = stores[t % len(stores)].add([record])
            acknowledged[stored.id] = stored

    try:
        run_threads(writer, THREADS)
        messages = stores[0].session_messages(namespace="ns", session_id="s")
        assert [m.seq for m in messages] == list(range(THREADS * per_thread))
        assert {m.id: m for m in messages} == acknowledged
    finally:
        for store in stores:
            store.close()
        for client in clients:
            close_client(client)  # chromadb's close() leaves the HTTP connections open


def test_concurrent_writers_to_separate_sessions_stay_apart(store: ChromaStore) -> None:
    # Thread t writes session s{t // 2} of namespace ns{t % 2} as user u{t}: every session id
    # exists in both namespaces, and every text is alike, so only the filters keep them apart.
    def where(t: int) -> tuple[str, str, str]:
        return f"ns{t % 2}", f"s{t // 2}", f"u{t}"

    per_thread = 12
    colour = store.embedder.embed_query("my favourite colour")  # embedded once, not per read
    leaks: list[str] = []
    done = threading.Event()

    def writer(t: int) -> None:
        if t == THREADS:  # one reader, reading while the others write
            while not done.is_set():
                for hit in store.search(colour, namespace="ns0", k=20, session_id="s0"):
                    if (hit.record.namespace, hit.record.session_id) != ("ns0", "s0"):
                        leaks.append(hit.record.id)
                for record in store.recent(namespace="ns1", session_id="s0", limit=5):
                    if (record.namespace, record.session_id) != ("ns1", "s0"):
                        leaks.append(record.id)
            return
        ns, session, user = where(t)
        try:
            for i in range(per_thread):
                text = f"my favourite colour is number {i}"
                store.add(
                    [message(f"m{i:02d}-{user}", text, namespace=ns, session=session, user=user)]
                )
        finally:
            if t == 0:
                done.set()

    run_threads(writer, THREADS + 1)
    done.set()
    assert leaks == []

    for t in range(THREADS):
        ns, session, user = where(t)
        messages = store.session_messages(namespace=ns, session_id=session)
        assert [m.seq for m in messages] == list(range(per_thread))
        assert {(m.namespace, m.session_id, m.user_id) for m in messages} == {(ns, session, user)}
        recent = store.recent(namespace=ns, session_id=session, limit=3)
        assert recent == messages[-3:]
        hits = store.search(colour, namespace=ns, k=100, session_id=session)
        assert {h.record.id for h in hits} == {m.id for m in messages}
        by_user = store.search(colour, namespace=ns, k=100, user_id=user)
        assert {h.record.id for h in by_user} == {m.id for m in messages}
        others = store.search(colour, namespace=ns, k=100, exclude_session_id=session)
        assert all(h.record.session_id != session for h in others)
        assert all(h.record.namespace == ns for h in others)
        assert len(others) == (THREADS // 2 - 1) * per_thread
    for ns in ("ns0", "ns1"):
        assert store.list_sessions(namespace=ns) == [f"s{i}" for i in range(THREADS // 2)]
        assert store.count(namespace=ns) == THREADS // 2 * per_thread


# -- random interleavings ----------------------------------------------------------------------

TEXTS = ["I like tea", "I like coffee", "my cat is Miso", "I live in Lisbon", "call me Ana"]
Write = list[tuple[str, str, str | None, str, str]]

writes_strategy = st.lists(
    st.lists(
        st.tuples(
            st.sampled_from(["na", "nb"]),
            st.sampled_from(["s1", "s2", "s3"]),
            st.sampled_from(["u1", "u2", None]),
            st.sampled_from(["message", "message", "pinned"]),
            st.sampled_from(TEXTS),
        ),
        min_size=1,
        max_size=3,
    ),
    min_size=1,
    max_size=5,
)


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(writes=writes_strategy, threaded=st.booleans())
def test_random_interleavings_keep_sessions_users_and_namespaces_apart(
    store: ChromaStore, writes: list[Write], threaded: bool
) -> None:
    run = uuid.uuid4().hex[:8]  # the store outlives examples: each one gets its own namespaces
    calls: list[list[Record]] = []
    per_namespace: dict[str, int] = {}  # ids r0, r1... in each namespace: the same ids in both
    for write in writes:
        call = []
        for ns, session, user, kind, text in write:
            number = per_namespace[ns] = per_namespace.get(ns, -1) + 1
            call.append(
                Record(
                    id=f"r{number}",
                    kind=kind,  # type: ignore[arg-type]
                    text=f"{text} ({ns} {number})",
                    namespace=f"{run}-{ns}",
                    session_id=session,
                    user_id=user,
                    role="user" if kind == "message" else None,
                )
            )
        calls.append(call)
    results: dict[int, list[Record]] = {}

    def do(index: int) -> None:
        results[index] = store.add(calls[index])

    if threaded:
        run_threads(do, len(calls))
    else:
        for index in range(len(calls)):
            do(index)

    written = [r for index in range(len(calls)) for r in results[index]]
    tea, coffee = store.embedder.embed_documents(["tea", "coffee"])
    namespaces = {r.namespace for r in written}
    for ns in namespaces:
        mine = [r for r in written if r.namespace == ns]
        assert store.count(namespace=ns) == len(mine)
        for session in {r.session_id for r in mine}:
            assert session is not None
            expected = [r for r in mine if r.session_id == session and r.kind == "message"]
            got = store.session_messages(namespace=ns, session_id=session)
            assert [m.seq for m in got] == list(range(len(expected)))
            assert {m.id for m in got} == {r.id for r in expected}
            if not threaded:  # one writer at a time: seq follows the order of the calls
                assert [m.id for m in got] == [r.id for r in expected]
            assert store.recent(namespace=ns, session_id=session, limit=100) == got
            hits = store.search(tea, namespace=ns, k=100, session_id=session)
            assert {h.record.id for h in hits} == {r.id for r in mine if r.session_id == session}
        for user in {r.user_id for r in mine if r.user_id is not None}:
            hits = store.search(coffee, namespace=ns, k=100, user_id=user)
            assert {h.record.id for h in hits} == {r.id for r in mine if r.user_id == user}
        asked = sorted({r.id for r in written})  # ids of both namespaces
        for session in {r.session_id for r in mine}:  # ids are scoped: asked per session
            by_id = {r.id: r for r in mine if r.session_id == session}
            got_records = store.get(asked, namespace=ns, session_id=session)
            assert got_records == [by_id[i] for i in asked if i in by_id]
