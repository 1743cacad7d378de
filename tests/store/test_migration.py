"""Stores written by older layouts open with nothing lost; a newer layout is refused.

Old stores are built straight through chromadb, as layouts 1 and 2 wrote them: every record in
one collection named after the store (keyed ``[namespace, id]`` in layout 1, scoped in layout
2), session counters and members in ``<collection>.meta``.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from ctxbudget import ContextMemory
from ctxbudget.errors import StoreError
from ctxbudget.store.chroma_store import LAYOUT_VERSION, ChromaStore, Record
from ctxbudget.store.migration import PLACEHOLDER
from ctxbudget.store.partitions import docs_partition, session_partition, user_partition
from ctxbudget.store.records import encode_record, json_key, record_key, scope_of
from tests.conftest import StoreFactory

RECORDS = [
    Record(
        id="m0",
        kind="message",
        text="hello",
        session_id="s1",
        user_id="u1",
        role="user",
        timestamp=1.7e9,
        metadata={"topic": "x"},
        tokens={"o200k_base": 1},
    ),
    Record(id="m1", kind="message", text="", session_id="s1", role="assistant", tool_calls=("c1",)),
    Record(id="n0", kind="message", text="u2 here", session_id="s2", user_id="u2", role="user"),
    Record(id="n1", kind="message", text="u1 joins", session_id="s2", user_id="u1", role="user"),
    Record(id="o0", kind="message", text="nobody", session_id="s3", role="user"),
    Record(id="p", kind="pinned", text="a fact", user_id="u1", metadata={"_scope": "user"}),
    Record(
        id="d#0",
        kind="document",
        text="a doc",
        namespace="other",
        metadata={"doc_namespace": "kb", "doc_id": "d"},
    ),
    Record(id="sum", kind="summary", text="a summary", session_id="s1", summary_of=("m0",)),
]


def write_old_store(store: ChromaStore, records: list[Record], version: int) -> list[Record]:
    """Write ``records`` into ``store``'s location as layout ``version`` (1 or 2) kept them."""
    client: Any = store._client  # building an old store on purpose
    name = store.collection
    legacy = client.get_or_create_collection(
        name, embedding_function=None, metadata={"hnsw:space": "cosine"}
    )
    meta = store._collections.meta
    numbered: list[Record] = []
    last: dict[tuple[str, str], int] = {}
    for r in records:
        if r.kind == "message" and r.session_id is not None:
            session = (r.namespace, r.session_id)
            last[session] = last.get(session, -1) + 1
            r = dataclasses.replace(r, seq=last[session])
        numbered.append(r)
    if version == 1:
        keys = [json.dumps([r.namespace, r.id], separators=(",", ":")) for r in numbered]
    else:
        keys = [record_key(r.namespace, scope_of(r), r.id) for r in numbered]
    vectors = store.embedder.embed_documents([r.text or "-" for r in numbered])
    legacy.upsert(
        ids=keys,
        embeddings=vectors,
        documents=[r.text for r in numbered],
        metadatas=[encode_record(r, store.embedder.name) for r in numbered],
    )
    entries: dict[str, dict[str, Any]] = {
        "store": {"type": "store", "embedder": store.embedder.name, "dim": len(vectors[0])}
    }
    for (ns, sid), seq in last.items():
        entries[json_key("session", ns, sid)] = {
            "type": "session",
            "ns": ns,
            "sid": sid,
            "last": seq,
        }
    for r in numbered:
        if r.session_id is not None and r.user_id is not None:
            key = json_key("member", r.namespace, r.session_id, r.user_id)
            entries[key] = {
                "type": "member",
                "ns": r.namespace,
                "sid": r.session_id,
                "uid": r.user_id,
            }
    if version == 2:
        entries["layout"] = {"type": "layout", "version": 2}
    meta.upsert(
        ids=list(entries),
        embeddings=[[1.0]] * len(entries),
        metadatas=list(entries.values()),
    )
    return numbered


def _collections(store: ChromaStore) -> set[str]:
    return {c.name for c in store._client.list_collections()}


@pytest.mark.parametrize("version", [1, 2])
def test_an_old_store_is_migrated_on_open_with_nothing_lost(
    open_store: StoreFactory, version: int
) -> None:
    first = open_store()
    written = write_old_store(first, RECORDS, version)
    first.close()

    store = open_store()  # migrates
    (layout,) = store._collections.meta.get(ids=["layout"])["metadatas"]
    assert layout["type"] == "layout" and layout["version"] == LAYOUT_VERSION
    assert int(layout["repairs"]) >= 1  # a migrated store needs no repair on its next open
    name = store.collection
    names = _collections(store)
    assert name not in names  # the single collection of the old layouts is gone
    assert {
        user_partition(name, "default", "u1"),
        user_partition(name, "default", "u2"),
        session_partition(name, "default", "s3"),
        docs_partition(name, "other"),
    } <= names
    assert store.count() == len(RECORDS)
    by = {(r.session_id, r.id): r for r in written}
    got = store.get(["m0", "m1", "sum"], namespace="default", session_id="s1")
    assert got == [by[("s1", "m0")], by[("s1", "m1")], by[("s1", "sum")]]
    assert store.get(["p"], namespace="default", user_id="u1") == [by[(None, "p")]]
    assert store.get(["d#0"], namespace="other", collection="kb") == [by[(None, "d#0")]]
    assert store.session_messages(namespace="default", session_id="s2") == [
        by[("s2", "n0")],
        by[("s2", "n1")],
    ]
    # u1's message in u2's session is found by user, and deleted with u1.
    mine = store.find(namespace="default", user_id="u1", kinds=["message"])
    assert {(r.session_id, r.id) for r in mine} == {("s1", "m0"), ("s2", "n1")}
    assert store.add([Record(id="m2", kind="message", text="next", session_id="s1")])[0].seq == 2
    store.close()

    again = open_store()  # idempotent: nothing left to migrate
    assert again.count() == len(RECORDS) + 1
    # m0, n1, p and the summary quoting m0 (a summary stored before 2026-11-29 names no
    # authors: it goes with the messages it covers)
    assert again.delete_user(namespace="default", user_id="u1") == 4
    assert again.session_messages(namespace="default", session_id="s2") == [by[("s2", "n0")]]
    assert again.find(namespace="default", user_id="u1") == []


def test_an_interrupted_migration_resumes(open_store: StoreFactory) -> None:
    first = open_store()
    records = [
        Record(id=f"m{i}", kind="message", text=f"text {i}", session_id="s", user_id="u")
        for i in range(4)
    ]
    written = write_old_store(first, records, 2)
    # Half done: the session's home chosen and two records copied there, the old ones kept.
    home = user_partition(first.collection, "default", "u")
    legacy = first._client.get_collection(first.collection)
    rows = legacy.get(include=["embeddings", "documents", "metadatas"], limit=2)
    first._client.get_or_create_collection(
        home, embedding_function=None, metadata={"hnsw:space": "cosine"}
    ).upsert(
        ids=rows["ids"],
        embeddings=rows["embeddings"],
        documents=rows["documents"],
        metadatas=rows["metadatas"],
    )
    first.close()
    store = open_store()
    assert store.count() == 4
    assert store.session_messages(namespace="default", session_id="s") == written


def test_a_newer_layout_is_refused(open_store: StoreFactory) -> None:
    first = open_store()
    first._collections.meta.upsert(
        ids=["layout"], embeddings=[[1.0]], metadatas=[{"type": "layout", "version": 99}]
    )
    first.close()
    with pytest.raises(StoreError, match="layout 99.*upgrade ctxbudget"):
        open_store()


# -- layout 1's "(tool call)" placeholder ----------------------------------------------------

CALL = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"q":"x"}'}}
TOOL_TURN = [
    Record(id="q", kind="message", text="look it up", session_id="s1", role="user"),
    # What layout 1 stored for an assistant turn with tool calls and no content.
    Record(
        id="call",
        kind="message",
        text=PLACEHOLDER,
        session_id="s1",
        role="assistant",
        tool_calls=("c1",),
        metadata={"_tool_calls": json.dumps([CALL])},
        tokens={"o200k_base": 3},
    ),
    Record(
        id="result",
        kind="message",
        text="x is 42",
        session_id="s1",
        role="tool",
        tool_call_id="c1",
    ),
    # Not placeholders: the same words with no tool call, and among other words.
    Record(id="said", kind="message", text=PLACEHOLDER, session_id="s1", role="user"),
    Record(
        id="more",
        kind="message",
        text=f"before {PLACEHOLDER} after",
        session_id="s1",
        role="assistant",
        tool_calls=("c2",),
    ),
]


def unrepaired(store: ChromaStore) -> None:
    """The layout entry an earlier ctxbudget recorded: layout 3, no repairs."""
    meta = store._collections.meta
    meta.delete(ids=["layout"])  # an upsert would keep the other keys of the entry
    meta.add(ids=["layout"], embeddings=[[1.0]], metadatas=[{"type": "layout", "version": 3}])


def _sent_tool_turn(store: ChromaStore) -> dict[str, Any]:
    """The tool-call turn assembled for the model (closes ``store``, with its memory)."""
    with ContextMemory(store=store) as memory:
        context = memory.assemble("s1", "what was x?", budget=4096)
        sent = context.to_messages()
        (turn,) = [m for m in sent if m.get("tool_calls") and m["tool_calls"][0]["id"] == "c1"]
        assert PLACEHOLDER not in json.dumps(turn)
        return turn


def test_a_layout1_tool_call_turn_is_sent_with_empty_content_and_its_calls(
    open_store: StoreFactory,
) -> None:
    first = open_store()
    write_old_store(first, TOOL_TURN, 1)
    first.close()
    store = open_store()  # migrates
    turn = store.get(["call"], namespace="default", session_id="s1")[0]
    assert turn.text == "" and turn.tool_calls == ("c1",) and turn.tokens == {}
    assert json.loads(str(turn.metadata["_tool_calls"])) == [CALL]
    untouched = store.get(["said", "more"], namespace="default", session_id="s1")
    assert [r.text for r in untouched] == [PLACEHOLDER, f"before {PLACEHOLDER} after"]
    message = _sent_tool_turn(store)
    assert message["role"] == "assistant" and not message["content"]
    assert [c["id"] for c in message["tool_calls"]] == ["c1"]
    assert message["tool_calls"][0]["function"]["name"] == "lookup"


def test_a_store_migrated_before_the_repair_is_repaired_once_on_open(
    open_store: StoreFactory,
) -> None:
    first = open_store()
    first.add(TOOL_TURN)  # layout 3, with the placeholder, as earlier migrations left it
    unrepaired(first)
    first.close()

    store = open_store()  # repairs
    (turn,) = store.get(["call"], namespace="default", session_id="s1")
    assert turn.text == "" and turn.tool_calls == ("c1",) and turn.tokens == {}
    assert turn.seq == 1  # repaired in place
    assert store.get(["said"], namespace="default", session_id="s1")[0].text == PLACEHOLDER
    # Once: a store already repaired is not read for it again (one read per partition, once).
    again = Record(
        id="new",
        kind="message",
        text=PLACEHOLDER,
        session_id="s1",
        role="assistant",
        tool_calls=("c3",),
    )
    store.add([again])
    store.close()
    reopened = open_store()
    assert reopened.get(["new"], namespace="default", session_id="s1")[0].text == PLACEHOLDER
    assert reopened.get(["call"], namespace="default", session_id="s1")[0].text == ""
    assert not _sent_tool_turn(reopened)["content"]


def test_the_repair_is_idempotent(open_store: StoreFactory) -> None:
    first = open_store()
    first.add(TOOL_TURN)
    unrepaired(first)
    first.close()
    open_store().close()  # repaired
    store = open_store()
    before = store.session_messages(namespace="default", session_id="s1")
    # As if the repair had been interrupted before recording it: it runs again, changes nothing.
    unrepaired(store)
    store.close()
    after = open_store().session_messages(namespace="default", session_id="s1")
    assert after == before
    assert [r.text for r in after][1] == ""
