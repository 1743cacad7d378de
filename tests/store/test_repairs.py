"""Repair 1 (layout 1's "(tool call)" placeholder) reads no partition on open.

Reads are counted on chromadb's ``Collection`` class, so every read of any collection counts,
whichever part of the store makes it (no timing). Stores of the other layouts are built as in
`tests.store.test_migration`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from chromadb.api.models.Collection import Collection

from ctxbudget.store import migration
from ctxbudget.store.chroma_store import ChromaStore, Record
from ctxbudget.store.migration import PLACEHOLDER
from ctxbudget.store.partitions import session_partition, user_partition
from ctxbudget.store.records import json_key
from tests.conftest import StoreFactory
from tests.store.test_migration import TOOL_TURN, unrepaired, write_old_store

NS = "default"
OTHERS = [
    Record(id="m", kind="message", text=f"hi {u}", session_id=f"o{u}", user_id=f"u{u}", role="user")
    for u in range(4)
]


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The collections read (get, query, count) from now on, by name, in order."""
    names: list[str] = []
    for method in ("get", "query", "count"):
        original = getattr(Collection, method)

        def read(self: Collection, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            names.append(self.name)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(Collection, method, read)
    yield names


def partitions_read(store: ChromaStore, names: list[str]) -> list[str]:
    """The reads of ``names`` that read a partition (not the store's meta)."""
    return [n for n in names if n.startswith(f"{store.collection}.") and not n.endswith(".meta")]


def entry(store: ChromaStore, key: str) -> dict[str, Any]:
    (meta,) = store._collections.meta.get(ids=[key])["metadatas"]
    return dict(meta)


def test_a_store_created_at_this_layout_is_not_read_for_the_repair(
    open_store: StoreFactory, reads: list[str]
) -> None:
    first = open_store()
    first.add(OTHERS)
    assert int(entry(first, "layout")["repairs"]) >= 1  # recorded with the first write
    first.close()
    reads.clear()
    store = open_store()
    assert partitions_read(store, reads) == []
    assert store.count() == len(OTHERS)


def test_an_unrepaired_layout3_store_is_repaired_partition_by_partition_as_used(
    open_store: StoreFactory, reads: list[str]
) -> None:
    first = open_store()
    first.add(TOOL_TURN)  # session s1 (no user): its own partition, with the placeholder
    first.add(OTHERS)
    unrepaired(first)  # as an earlier ctxbudget left it: layout 3, no repairs
    first.close()
    reads.clear()

    store = open_store()
    assert partitions_read(store, reads) == []  # opening reads no partition
    home = session_partition(store.collection, NS, "s1")
    (turn,) = store.get(["call"], namespace=NS, session_id="s1")  # repaired before it is read
    assert turn.text == "" and turn.tool_calls == ("c1",) and turn.tokens == {}
    assert store.get(["said"], namespace=NS, session_id="s1")[0].text == PLACEHOLDER
    assert int(entry(store, json_key("part", home))["repairs"]) >= 1
    assert "repairs" not in entry(store, "layout")  # other partitions were not used yet
    unused = user_partition(store.collection, NS, "u3")
    assert unused not in reads and "repairs" not in entry(store, json_key("part", unused))
    store.close()

    # Another process: the partition repaired is not read for it again; the others are, once
    # each, and then the store records the repair.
    again = open_store()
    again.add(
        [
            Record(
                id="new",
                kind="message",
                text=PLACEHOLDER,
                session_id="s1",
                role="assistant",
                tool_calls=("c3",),
            )
        ]
    )
    assert again.get(["new"], namespace=NS, session_id="s1")[0].text == PLACEHOLDER
    assert "repairs" not in entry(again, "layout")
    assert len(again.find(namespace=NS, kinds=["message"])) == len(TOOL_TURN) + 1 + len(OTHERS)
    assert int(entry(again, "layout")["repairs"]) >= 1  # every partition used: recorded
    again.close()
    reads.clear()
    last = open_store()
    assert partitions_read(last, reads) == []
    assert last.get(["new"], namespace=NS, session_id="s1")[0].text == PLACEHOLDER


def test_a_migration_repairs_as_it_moves_and_reads_no_partition_for_it(
    open_store: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = open_store()
    write_old_store(first, TOOL_TURN, 1)
    first.close()
    scans: list[Any] = []
    monkeypatch.setattr(migration, "_repair_partition", lambda *args: scans.append(args) or 0)
    store = open_store()  # migrates
    assert scans == []
    (turn,) = store.get(["call"], namespace=NS, session_id="s1")
    assert turn.text == "" and turn.tool_calls == ("c1",) and turn.tokens == {}
    assert json.loads(str(turn.metadata["_tool_calls"]))[0]["id"] == "c1"
    untouched = store.get(["said", "more"], namespace=NS, session_id="s1")
    assert [r.text for r in untouched] == [PLACEHOLDER, f"before {PLACEHOLDER} after"]
    assert int(entry(store, "layout")["repairs"]) >= 1


def test_partitions_an_interrupted_migration_left_are_repaired(open_store: StoreFactory) -> None:
    first = open_store()
    first.add(TOOL_TURN)  # moved to layout 3 by an earlier ctxbudget, placeholder kept...
    unrepaired(first)
    write_old_store(first, OTHERS, 2)  # ...which stopped before these were moved (layout 2)
    first.close()
    store = open_store()  # finishes the migration
    (turn,) = store.get(["call"], namespace=NS, session_id="s1")
    assert turn.text == "" and turn.tool_calls == ("c1",)
    assert store.count() == len(TOOL_TURN) + len(OTHERS)
    assert int(entry(store, "layout")["repairs"]) >= 1
