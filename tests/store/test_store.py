"""ChromaStore against a real Chroma (embedded and server) and the real embedding model."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import chromadb
import pytest
from chromadb.config import Settings

from ctxbudget.embed.base import default_embedder
from ctxbudget.embed.local import LocalEmbedder, as_embedder
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.errors import MissingDependencyError, StoreError, StoreInputError
from ctxbudget.store.chroma_store import ChromaStore, Hit, Record

StoreFactory = Callable[..., ChromaStore]


def msg(
    rid: str,
    text: str,
    *,
    session: str = "s1",
    user: str | None = "u1",
    role: str = "user",
    namespace: str = "default",
    **extra: object,
) -> Record:
    return Record(
        id=rid,
        kind="message",
        text=text,
        namespace=namespace,
        session_id=session,
        user_id=user,
        role=role,
        **extra,  # type: ignore[arg-type]
    )


def pinned(rid: str, text: str, *, user: str | None = "u1", **extra: object) -> Record:
    return Record(id=rid, kind="pinned", text=text, user_id=user, **extra)  # type: ignore[arg-type]


def ids(records: list[Record]) -> list[str]:
    return [r.id for r in records]


def hit_ids(hits: list[Hit]) -> list[str]:
    return [h.record.id for h in hits]


# -- add / get ---------------------------------------------------------------------------------


def test_round_trip_keeps_every_field(store: ChromaStore) -> None:
    record = Record(
        id="a1",
        kind="message",
        text="I moved to Lisbon last spring",
        namespace="acme",
        session_id="s1",
        user_id="u1",
        role="assistant",
        timestamp=1_700_000_000.123456,
        tool_calls=("call-1", "call-2"),
        tool_call_id=None,
        summary_of=(),
        source="history",
        metadata={"topic": "travel", "n": 3, "score": 0.25, "flag": True, "seq": "user key"},
        tokens={"o200k_base": 7, "cl100k_base": 8},
    )
    summary = Record(
        id="sum1",
        kind="summary",
        text="The user moved to Lisbon",
        namespace="acme",
        session_id="s1",
        user_id="u1",
        summary_of=("a1",),
    )
    tool = Record(
        id="t1",
        kind="message",
        text='{"ok": true}',
        namespace="acme",
        session_id="s1",
        role="tool",
        tool_call_id="call-1",
    )
    stored = store.add([record, summary, tool])
    assert stored == [dataclasses.replace(record, seq=0), summary, dataclasses.replace(tool, seq=1)]
    assert len(set(stored)) == 3  # records are hashable values
    got = store.get(["t1", "missing", "a1", "sum1", "a1"], namespace="acme", session_id="s1")
    assert got == [
        stored[2],
        stored[0],
        stored[1],
    ]


def test_add_accepts_lists_for_tuple_fields(store: ChromaStore) -> None:
    record = Record(
        id="s",
        kind="summary",
        text="summary",
        summary_of=["a", "b"],  # type: ignore[arg-type]
    )
    assert store.add([record])[0].summary_of == ("a", "b")


def test_seq_is_assigned_per_session_in_insertion_order(store: ChromaStore) -> None:
    first = store.add([msg("m0", "hello"), msg("m1", "hi there", role="assistant")])
    other = store.add([msg("x0", "another chat", session="s2")])
    more = store.add([msg("m2", "how are you?"), pinned("p1", "likes tea")])
    assert [r.seq for r in first] == [0, 1]
    assert [r.seq for r in other] == [0]
    assert [r.seq for r in more] == [2, None]
    assert ids(store.session_messages(namespace="default", session_id="s1")) == ["m0", "m1", "m2"]


def test_recent_reads_the_last_messages_oldest_first(store: ChromaStore) -> None:
    store.add([msg(f"m{i}", f"message {i}") for i in range(6)])
    store.add([msg("other", "other session", session="s2")])
    assert ids(store.recent(namespace="default", session_id="s1", limit=3)) == ["m3", "m4", "m5"]
    assert ids(store.recent(namespace="default", session_id="s1", limit=2, before_seq=3)) == [
        "m1",
        "m2",
    ]
    assert len(store.recent(namespace="default", session_id="s1", limit=50)) == 6
    assert store.recent(namespace="default", session_id="s1", limit=0) == []
    assert store.recent(namespace="default", session_id="nope", limit=5) == []


def test_recent_skips_gaps_left_by_deleted_messages(store: ChromaStore) -> None:
    store.add([msg(f"m{i}", f"message {i}") for i in range(8)])
    assert store.delete(["m5", "m6", "m7"], namespace="default", session_id="s1") == 3
    assert ids(store.recent(namespace="default", session_id="s1", limit=3)) == ["m2", "m3", "m4"]
    # Deleted seqs are not reused: the next message comes after them.
    assert store.add([msg("m8", "message 8")])[0].seq == 8


def test_recent_stays_exact_past_the_counter_lag(store: ChromaStore) -> None:
    # The session counter is only rewritten every few messages; recent must not miss the rest.
    for start in range(0, 40, 10):
        store.add([msg(f"m{i:02d}", f"message {i}") for i in range(start, start + 10)])
    got = store.recent(namespace="default", session_id="s1", limit=5)
    assert [r.seq for r in got] == [35, 36, 37, 38, 39]
    assert store.add([msg("last", "the end")])[0].seq == 40


def test_readd_of_same_content_is_a_no_op(store: ChromaStore) -> None:
    first = store.add([msg("m0", "hello"), msg("m1", "bye")])
    again = store.add([msg("m1", "bye"), msg("m0", "hello"), msg("m2", "new")])
    assert again == [first[1], first[0], dataclasses.replace(msg("m2", "new"), seq=2)]
    assert store.add(first) == first  # the returned records (with seq) too
    assert store.count() == 3


def test_conflicting_readd_is_refused_and_changes_nothing(store: ChromaStore) -> None:
    store.add([msg("m0", "hello"), pinned("p1", "likes tea")])
    with pytest.raises(StoreInputError, match=r"default/session s1/m0.*replace=True") as info:
        store.add([msg("new", "a new message"), msg("m0", "HELLO, edited")])
    assert "nothing was written" in str(info.value)
    assert store.count() == 2
    assert store.get(["m0", "new"], namespace="default", session_id="s1")[0].text == "hello"
    assert ids(store.session_messages(namespace="default", session_id="s1")) == ["m0"]
    assert store.add([msg("m1", "next")])[0].seq == 1


def test_replace_overwrites_and_keeps_the_seq(store: ChromaStore) -> None:
    store.add([msg("m0", "hello"), msg("m1", "I like cats")])
    (replaced,) = store.add([msg("m1", "I like dogs")], replace=True)
    assert replaced.seq == 1
    assert store.get(["m1"], namespace="default", session_id="s1") == [replaced]
    top = store.search("dogs", namespace="default", k=1)
    assert top[0].record.text == "I like dogs"
    assert store.count() == 2


@pytest.mark.parametrize(
    ("metadata", "key"),
    [
        ({"ok": 1, "bad": {"nested": 1}}, "bad"),
        ({"bad": [1, 2]}, "bad"),
        ({"bad": None}, "bad"),
        ({"bad": float("nan")}, "bad"),
        ({"bad": 2**70}, "bad"),
        ({"": "empty key"}, "''"),
    ],
)
def test_bad_metadata_is_refused_before_anything_is_written(
    store: ChromaStore, metadata: dict[str, object], key: str
) -> None:
    store.add([msg("m0", "hello")])
    good = msg("m1", "fine")
    bad = msg("m2", "broken", metadata=metadata)
    with pytest.raises(StoreInputError) as info:
        store.add([good, bad])
    text = str(info.value)
    assert "'m2'" in text and key in text and "nothing was written" in text
    assert store.count() == 1
    assert store.get(["m1", "m2"], namespace="default", session_id="s1") == []
    assert store.add([good])[0].seq == 1


@pytest.mark.parametrize(
    ("record", "match"),
    [
        (Record(id="e", kind="message", text="", session_id="s1"), "text is empty"),
        (Record(id="e", kind="message", text="   \n", session_id="s1"), "text is empty"),
        (Record(id="e", kind="message", text=b"bytes", session_id="s1"), "text must be a str"),  # type: ignore[arg-type]
        (Record(id="e", kind="message", text="no session"), "needs a session_id"),
        (Record(id="e", kind="note", text="x"), "kind must be one of"),  # type: ignore[arg-type]
        (Record(id="e", kind=["pinned"], text="x"), "kind must be one of"),  # type: ignore[arg-type]
        (Record(id="e", kind="message", text="x", session_id="s1", role={}), "role"),  # type: ignore[arg-type]
        (Record(id="", kind="pinned", text="x"), "id must be a non-empty str"),
        (Record(id="e", kind="pinned", text="x", namespace=""), "namespace"),
        (Record(id="e", kind="message", text="x", session_id="s1", role="bot"), "role"),
        (Record(id="e", kind="message", text="x", session_id="s1", seq=4), "seq is assigned"),
        (Record(id="e", kind="pinned", text="x", timestamp=math.inf), "timestamp"),
        (Record(id="e", kind="pinned", text="x", tokens={"o200k": -1}), "tokens"),
        (Record(id="e", kind="pinned", text="x", tool_calls=("",)), "tool_calls"),
    ],
)
def test_malformed_records_are_refused(store: ChromaStore, record: Record, match: str) -> None:
    with pytest.raises(StoreInputError, match=match):
        store.add([pinned("ok", "fine"), record])
    assert store.count() == 0


def test_duplicate_ids_in_one_call_are_refused(store: ChromaStore) -> None:
    with pytest.raises(StoreInputError, match=r"\['m0'\] appear more than once"):
        store.add([msg("m0", "one"), msg("m1", "two"), msg("m0", "three")])
    assert store.count() == 0


def test_not_a_record_is_refused(store: ChromaStore) -> None:
    with pytest.raises(StoreInputError, match="not a ctxbudget Record"):
        store.add([{"id": "x", "text": "hi"}])  # type: ignore[list-item]


def test_vectors_of_another_dimension_are_refused(
    open_store: StoreFactory, embedder: LocalEmbedder
) -> None:
    store = open_store()
    store.add([pinned("p1", "likes tea")])
    # The same real model, cut to 64 dimensions: another embedder as far as the store can tell.
    short = as_embedder(
        lambda texts: [v[:64] for v in embedder.embed_documents(texts)], name="minilm-64"
    )
    other = open_store(embedder=short)
    with pytest.raises(StoreInputError, match=r"384-dimension.*'minilm-64' gives 64"):
        other.add([pinned("p2", "likes coffee")])
    with pytest.raises(StoreInputError, match="64 dimensions"):
        other.search("coffee", namespace="default", k=3)
    assert store.count() == 1


def test_constructing_a_store_does_not_load_the_model(tmp_path: Path) -> None:
    lazy = LocalEmbedder(tmp_path / "no-model-here")
    with ChromaStore(tmp_path / "db", embedder=lazy) as store:
        assert store.count() == 0
        with pytest.raises(MissingDependencyError, match="no-model-here"):
            store.add([pinned("p1", "likes tea")])
        assert store.count() == 0


def test_default_embedder_is_the_onnx_model_without_torch(tmp_path: Path) -> None:
    with ChromaStore(tmp_path / "db") as store:
        assert isinstance(store.embedder, OnnxEmbedder)
        assert store.embedder is default_embedder()  # one model per process
        assert store.embedder.name == OnnxEmbedder().name  # int8 or fp32 arithmetic: see exact_int8


# -- search ------------------------------------------------------------------------------------

FACTS = [
    pinned("p-lisbon", "The user lives in Lisbon, Portugal", metadata={"topic": "geo"}),
    pinned("p-cat", "The user has a cat named Miso", metadata={"topic": "pets"}),
    pinned("p-diet", "The user is vegetarian", metadata={"topic": "food", "level": 2}),
    pinned("p-other", "Another user lives in Porto", user="u2", metadata={"topic": "geo"}),
]


def test_search_ranks_by_similarity(store: ChromaStore) -> None:
    store.add(FACTS)
    hits = store.search("Which city does the user live in?", namespace="default", k=4)
    assert hit_ids(hits)[0] == "p-lisbon"
    sims = [h.similarity for h in hits]
    assert sims == sorted(sims, reverse=True)
    assert all(-1.0 <= s <= 1.0 for s in sims)
    exact = store.search("The user is vegetarian", namespace="default", k=1)
    assert exact[0].record.id == "p-diet" and exact[0].similarity == pytest.approx(1.0, abs=1e-3)


def test_search_with_a_vector_and_k(store: ChromaStore, embedder: LocalEmbedder) -> None:
    store.add(FACTS)
    vector = embedder.embed_query("pets at home")
    hits = store.search(vector, namespace="default", k=2)
    assert len(hits) == 2 and hits[0].record.id == "p-cat"
    assert store.search("anything", namespace="default", k=0) == []
    assert len(store.search("anything", namespace="default", k=50)) == 4


def test_search_filters(store: ChromaStore) -> None:
    store.add(FACTS)
    store.add(
        [
            msg("m-s1", "I live in Lisbon", session="s1"),
            msg("m-s2", "I live in Lisbon too", session="s2", user="u2"),
        ]
    )
    query = "lives in Lisbon"
    ns = "default"

    def found(**filters: object) -> set[str]:
        return set(hit_ids(store.search(query, namespace=ns, k=10, **filters)))  # type: ignore[arg-type]

    assert found(user_id="u2") == {"p-other", "m-s2"}
    assert found(session_id="s1") == {"m-s1"}
    assert found(kinds=["message"]) == {"m-s1", "m-s2"}
    assert found(kinds=["pinned"], user_id="u1") == {"p-lisbon", "p-cat", "p-diet"}
    assert found(exclude_session_id="s1") == {"p-lisbon", "p-cat", "p-diet", "p-other", "m-s2"}
    assert found(where={"topic": "geo"}) == {"p-lisbon", "p-other"}
    assert found(where={"topic": "geo", "$or": [{"topic": "pets"}, {"level": 1}]}) == set()
    assert found(where={"$or": [{"topic": "pets"}, {"level": {"$gte": 2}}]}) == {"p-cat", "p-diet"}
    assert found(kinds=[]) == set()
    with pytest.raises(StoreInputError, match="unknown"):
        found(kinds=["notes"])
    with pytest.raises(StoreInputError, match="where"):
        found(where={"$nor": []})


def test_search_many_answers_each_query_as_search_does(
    store: ChromaStore, embedder: LocalEmbedder
) -> None:
    store.add(FACTS)
    store.add([msg(f"m{i}", f"I went to Lisbon on day {i} with my cat") for i in range(6)])
    queries: list[str | list[float]] = [
        "Which city does the user live in?",
        embedder.embed_query("pets at home"),
        "what does the user eat",
    ]
    for filters in ({}, {"kinds": ["message"]}, {"user_id": "u1", "kinds": ["pinned"]}):
        for k in (1, 3, 20):
            many = store.search_many(queries, namespace="default", k=k, **filters)  # type: ignore[arg-type]
            one = [store.search(q, namespace="default", k=k, **filters) for q in queries]  # type: ignore[arg-type]
            assert [hit_ids(h) for h in many] == [hit_ids(h) for h in one]
            for got, want in zip(many, one, strict=True):
                for a, b in zip(got, want, strict=True):
                    assert a.similarity == pytest.approx(b.similarity, abs=1e-5)
    per_query = store.search_many(queries, namespace="default", k=[1, 0, 4])
    assert [len(h) for h in per_query] == [1, 0, 4]
    assert hit_ids(per_query[2]) == hit_ids(store.search(queries[2], namespace="default", k=4))
    assert store.search_many([], namespace="default", k=3) == []
    assert store.search_many(queries, namespace="default", k=3, kinds=[]) == [[], [], []]


def test_search_many_refuses_bad_input(store: ChromaStore) -> None:
    store.add(FACTS)
    with pytest.raises(StoreInputError, match="got the str 'cat'; pass \\['cat'\\]"):
        store.search_many("cat", namespace="default", k=3)
    with pytest.raises(StoreInputError, match="k gives 1 numbers for 2 queries; give one per"):
        store.search_many(["cat", "dog"], namespace="default", k=[3])
    with pytest.raises(StoreInputError, match="k must be a non-negative int, got -1"):
        store.search_many(["cat"], namespace="default", k=[-1])
    with pytest.raises(StoreInputError, match="k must be a non-negative int, got True"):
        store.search_many(["cat"], namespace="default", k=True)
    with pytest.raises(StoreInputError, match="query is empty"):
        store.search_many(["cat", " "], namespace="default", k=2)
    with pytest.raises(StoreInputError, match="3 dimensions"):
        store.search_many(["cat", [0.1, 0.2, 0.3]], namespace="default", k=2)


def test_search_of_an_empty_store_finds_nothing(store: ChromaStore) -> None:
    assert store.search("anything", namespace="default", k=3) == []
    with pytest.raises(StoreInputError, match="query is empty"):
        store.search("  ", namespace="default", k=3)


# -- namespaces and listings -------------------------------------------------------------------


def test_namespaces_are_isolated(store: ChromaStore) -> None:
    a = store.add([msg("m0", "secret plan A", namespace="a"), pinned("p", "A fact")])
    b = store.add([msg("m0", "secret plan B", namespace="b")])
    assert a[0].seq == 0 and b[0].seq == 0
    assert store.get(["m0"], namespace="a", session_id="s1")[0].text == "secret plan A"
    assert store.get(["m0"], namespace="b", session_id="s1")[0].text == "secret plan B"
    assert store.get(["m0"], namespace="c", session_id="s1") == []
    assert hit_ids(store.search("secret plan", namespace="b", k=10)) == ["m0"]
    assert store.search("secret plan", namespace="b", k=10)[0].record.namespace == "b"
    assert ids(store.recent(namespace="b", session_id="s1", limit=10)) == ["m0"]
    assert store.count(namespace="a") == 1 and store.count(namespace="b") == 1
    assert store.count(namespace="default") == 1 and store.count() == 3
    assert store.delete_session(namespace="a", session_id="s1") == 1
    assert store.get(["m0"], namespace="b", session_id="s1")[0].text == "secret plan B"


def test_list_sessions_and_stats(store: ChromaStore) -> None:
    store.add([msg("a", "x", session="s1"), msg("b", "y", session="s2", user="u2")])
    store.add([msg("c", "z", session="s3", namespace="other"), pinned("p", "fact", user=None)])
    assert store.list_sessions(namespace="default") == ["s1", "s2"]
    assert store.list_sessions(namespace="default", user_id="u2") == ["s2"]
    assert store.list_sessions(namespace="other") == ["s3"]
    stats = store.stats()
    assert stats["records"] == 4
    assert stats["by_kind"] == {"message": 3, "pinned": 1}
    assert stats["namespaces"] == 2 and stats["sessions"] == 3


# -- deleting ----------------------------------------------------------------------------------


def test_delete_session_removes_its_records_and_counter(store: ChromaStore) -> None:
    store.add([msg("a0", "alpha one"), msg("a1", "alpha two"), msg("b0", "beta", session="s2")])
    store.add([Record(id="sum", kind="summary", text="alpha summary", session_id="s1")])
    assert store.delete_session(namespace="default", session_id="s1") == 3
    assert store.recent(namespace="default", session_id="s1", limit=10) == []
    assert store.search("alpha", namespace="default", k=10, session_id="s1") == []
    assert hit_ids(store.search("alpha", namespace="default", k=10)) == ["b0"]
    assert store.list_sessions(namespace="default") == ["s2"]
    assert store.add([msg("n0", "fresh start")])[0].seq == 0
    assert store.delete_session(namespace="default", session_id="nope") == 0


def test_delete_user_removes_everything_of_theirs(store: ChromaStore) -> None:
    store.add(
        [
            msg("m0", "my cat is called Miso", user="u1"),
            msg("m1", "nice cat", user=None, role="assistant"),
            msg("x0", "my cat is called Tom", session="s9", user="u1"),
            msg("o0", "my cat is called Felix", session="s2", user="u2"),
        ]
    )
    store.add([pinned("p1", "u1 has a cat named Miso", user="u1")])
    store.add([Record(id="sum", kind="summary", text="cat talk", session_id="s9", user_id="u1")])
    assert store.add([msg("u2-in-s1", "hello from u2", user="u2")])[0].seq == 2
    assert store.delete_user(namespace="default", user_id="u1") == 4
    assert store.get(["m0", "p1"], namespace="default", session_id="s1") == []
    assert store.get(["x0", "sum"], namespace="default", session_id="s9") == []
    assert store.get(["p1"], namespace="default", user_id="u1") == []
    assert store.search("cat", namespace="default", k=10, user_id="u1") == []
    assert {h.record.user_id for h in store.search("cat", namespace="default", k=10)} == {
        None,
        "u2",
    }
    assert store.count() == 3
    assert store.list_sessions(namespace="default", user_id="u1") == []
    # s9 held only u1's records and is gone; s1 keeps its counter for the others.
    assert store.list_sessions(namespace="default") == ["s1", "s2"]
    assert store.add([msg("m3", "still here", user=None)])[0].seq == 3
    assert store.delete_user(namespace="default", user_id="u1") == 0


def test_delete_by_id(store: ChromaStore) -> None:
    store.add([msg("m0", "a"), msg("m1", "b"), pinned("p", "c")])
    assert store.delete(["m0", "p", "missing"], namespace="default", session_id="s1") == 1
    assert store.delete(["p"], namespace="default", user_id="u1") == 1
    assert store.delete(["m1"], namespace="elsewhere", session_id="s1") == 0
    assert ids(store.get(["m0", "m1", "p"], namespace="default", session_id="s1")) == ["m1"]


# -- reading arguments -------------------------------------------------------------------------


def test_reads_require_a_namespace_and_valid_arguments(store: ChromaStore) -> None:
    with pytest.raises(StoreInputError, match="namespace"):
        store.recent(namespace="", session_id="s1", limit=1)
    with pytest.raises(StoreInputError, match="limit"):
        store.recent(namespace="default", session_id="s1", limit=-1)
    with pytest.raises(StoreInputError, match="list of ids"):
        store.get("m0", namespace="default", session_id="s1")
    with pytest.raises(StoreInputError, match="exactly one scope"):
        store.get(["m0"], namespace="default")
    with pytest.raises(StoreInputError, match="exactly one scope"):
        store.delete(["m0"], namespace="default", session_id="s1", user_id="u1")
    with pytest.raises(StoreInputError, match="k must"):
        store.search("x", namespace="default", k=-2)


# -- where the store lives ---------------------------------------------------------------------


def test_embedded_store_persists(tmp_path: Path, embedder: LocalEmbedder) -> None:
    with ChromaStore(tmp_path / "db", embedder=embedder) as store:
        store.add([msg("m0", "remember me")])
    with ChromaStore(tmp_path / "db", embedder=embedder) as store:
        assert ids(store.recent(namespace="default", session_id="s1", limit=5)) == ["m0"]
        assert store.add([msg("m1", "and me")])[0].seq == 1


def test_given_client_is_used_and_not_closed(tmp_path: Path, embedder: LocalEmbedder) -> None:
    client = chromadb.PersistentClient(
        str(tmp_path / "db"), settings=Settings(anonymized_telemetry=False)
    )
    try:
        with ChromaStore(client=client, embedder=embedder, collection="mine") as store:
            store.add([pinned("p", "fact")])
        names = {c.name for c in client.list_collections()}
        assert "mine.meta" in names
        assert sum(client.get_collection(n).count() for n in names if n.startswith("mine.")) > 1
    finally:
        client.close()


def test_a_foreign_collection_with_the_store_name_is_left_alone(
    tmp_path: Path, embedder: LocalEmbedder
) -> None:
    # Layouts 1 and 2 kept records in a collection named as the store; one ctxbudget did not
    # write is neither migrated nor deleted (and its distance does not matter any more).
    client = chromadb.PersistentClient(
        str(tmp_path / "db"), settings=Settings(anonymized_telemetry=False)
    )
    try:
        theirs = client.create_collection("l2coll", embedding_function=None)
        theirs.add(ids=["x"], embeddings=[[1.0, 0.0]], documents=["not ours"])
        with ChromaStore(client=client, embedder=embedder, collection="l2coll") as store:
            store.add([pinned("p", "fact")])
            assert store.count() == 1
        assert client.get_collection("l2coll").get()["documents"] == ["not ours"]
    finally:
        client.close()


def test_unusable_folder_is_a_store_error(tmp_path: Path, embedder: LocalEmbedder) -> None:
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("x")
    with pytest.raises(StoreError, match="cannot open the embedded Chroma") as info:
        ChromaStore(not_a_folder, embedder=embedder)
    assert info.value.__cause__ is not None


@pytest.mark.parametrize(
    "url", ["ftp://127.0.0.1:8000", "http://", "http://127.0.0.1:8000/api", "http://h:99999"]
)
def test_bad_urls_are_refused(url: str, embedder: LocalEmbedder) -> None:
    with pytest.raises(StoreInputError, match="URL"):
        ChromaStore(url=url, embedder=embedder)


@pytest.mark.parametrize("name", ["ab", "-bad", "has space", "ok/no"])
def test_bad_collection_names_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(StoreInputError, match="collection"):
        ChromaStore(tmp_path / "db", collection=name)


def test_an_explicit_path_wins_over_the_environment(
    tmp_path: Path, embedder: LocalEmbedder, unused_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTXBUDGET_CHROMA_URL", unused_url)
    with ChromaStore(tmp_path / "db", embedder=embedder) as store:
        assert "embedded" in store.location
    with pytest.raises(StoreError, match="CTXBUDGET_CHROMA_URL"):
        ChromaStore(embedder=embedder)  # nothing explicit: the environment's server


def test_default_folder_is_dot_ctxbudget(
    tmp_path: Path, embedder: LocalEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CTXBUDGET_CHROMA_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    with ChromaStore(embedder=embedder) as store:
        store.add([pinned("p", "fact")])
        assert store.location.endswith(".ctxbudget")
    assert (tmp_path / ".ctxbudget").is_dir()


@pytest.mark.integration
def test_url_from_the_environment(
    chroma_server: Any, embedder: LocalEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTXBUDGET_CHROMA_URL", chroma_server.url)
    with ChromaStore(embedder=embedder, collection="from-env") as store:
        assert chroma_server.url in store.location
        store.add([pinned("p", "fact")])
        assert store.count() == 1


@pytest.mark.integration
def test_server_not_running_is_a_store_error(unused_url: str, embedder: LocalEmbedder) -> None:
    with pytest.raises(StoreError, match=r"127\.0\.0\.1.*chroma run") as info:
        ChromaStore(url=unused_url, embedder=embedder)
    assert info.value.__cause__ is not None


@pytest.mark.integration
def test_server_going_down_is_a_store_error(
    start_server: Callable[[], Any], embedder: LocalEmbedder
) -> None:
    server = start_server()
    with ChromaStore(url=server.url, embedder=embedder) as store:
        store.add([pinned("p", "fact")])
        server.stop()
        with pytest.raises(StoreError, match=r"failed to read.*is running") as info:
            store.get(["p"], namespace="default", user_id="u1")
        assert info.value.__cause__ is not None
        with pytest.raises(StoreError, match="nothing was written"):
            store.add([pinned("q", "another fact")])
