"""Indexing the entities of documents stored before (`ContextMemory.index_document_entities`).

Real parts: embedded Chroma and the local embedder. The promises: indexing later gives the index
that indexing when the chunks were stored gives (for any documents, collections and order);
indexing again counts nothing twice; only the collections named are read; ``rebuild`` forgets
what an earlier extractor found; one tenant's call never touches another's index; bad input is
refused before anything is read, and the stored chunks are never changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.errors import StoreInputError
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.entities import Mention
from ctxbudget.memory.entities.reindex import IndexedDocuments
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.store.chroma_store import ChromaStore
from ctxbudget.store.doc_entities import DocEntity

ON = MemoryConfig(entities=True, recent_messages=6)
OFF = MemoryConfig(recent_messages=6)
ACME = "Acme Robotics was founded by Priya Raman in Porto in 2011 to build warehouse arms."
FAIR = "Priya Raman spoke at the Lisbon fair about Nordic Freight and its rail depots."
KEYS = ["acme robotics", "priya raman", "porto", "lisbon", "nordic freight", "zed quill"]


def memory_at(
    folder: Path, embedder: OnnxEmbedder, config: MemoryConfig, **options: object
) -> ContextMemory:
    return ContextMemory(
        store=ChromaStore(folder / "db", embedder=embedder),
        config=config,
        **options,  # type: ignore[arg-type]
    )


def view(found: dict[str, DocEntity]) -> dict[str, tuple[int, list[tuple[str, str]], str]]:
    return {k: (e.count, sorted(e.chunks), e.type) for k, e in sorted(found.items())}


def test_documents_stored_with_entities_off_are_offered_once_indexed(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    before = memory_at(tmp_path, embedder, OFF)
    try:
        before.add_documents([("history", ACME), ("fair", FAIR)], collection="kb", progress=False)
        assert before.store.doc_entities.lookup("default", KEYS) == {}
        seen: list[tuple[str, int, int]] = []
        done = before.index_document_entities(progress=lambda *a: seen.append(a))
        assert done == IndexedDocuments(("kb",), 2, 2, done.entities)
        assert done.entities >= 4
        assert seen[-1] == ("kb", 2, 2)
    finally:
        before.close()
    after = memory_at(tmp_path, embedder, ON, strategy={"floors": {"ENTITY": 0.25}})
    try:
        found = after.candidates("s1", "Who is Priya Raman?", budget=600)
        card = next(i for i in found.entities if i.metadata.get("entity") == "Priya Raman")
        assert "Named in 2 document chunks" in card.text
        assert after.store.get(["history#0"], namespace="default", collection="kb")[0].text == ACME
    finally:
        after.close()


def test_indexing_again_counts_nothing_twice_and_only_named_collections_are_read(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    memory = memory_at(tmp_path, embedder, OFF)
    index = memory.store.doc_entities
    try:
        memory.add_documents([("h", ACME)], collection="kb", progress=False)
        memory.add_documents([("f", FAIR)], collection="wiki", progress=False)
        first = memory.index_document_entities("kb")
        assert first.collections == ("kb",) and first.chunks == 1
        assert view(index.lookup("default", KEYS))["priya raman"][:2] == (1, [("kb", "h#0")])
        assert "lisbon" not in index.lookup("default", KEYS)
        memory.index_document_entities("kb")
        both = memory.index_document_entities(["wiki", "kb"])
        assert both.collections == ("kb", "wiki") and both.chunks == 2
        priya = index.lookup("default", ["priya raman"])["priya raman"]
        assert priya.count == 2 and sorted(priya.chunks) == [("kb", "h#0"), ("wiki", "f#0")]
        assert memory.index_document_entities("nothing-here").chunks == 0
    finally:
        memory.close()


class Only:
    """A custom extractor that knows one name."""

    def __init__(self, name: str) -> None:
        self.name = name

    def extract(self, texts: Sequence[str], *, speakers: Sequence[str | None]) -> object:
        return [[Mention(self.name, "person")] if self.name in t else [] for t in texts]


def test_rebuild_forgets_what_an_earlier_extractor_found(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    rules = memory_at(tmp_path, embedder, ON)
    try:
        rules.add_documents([("h", ACME), ("f", FAIR)], collection="kb", progress=False)
        assert {"porto", "lisbon"} <= set(rules.store.doc_entities.lookup("default", KEYS))
    finally:
        rules.close()
    custom = memory_at(tmp_path, embedder, ON, entity_extractor=Only("Priya Raman"))
    try:
        kept = custom.index_document_entities()  # without rebuild: the chunks are indexed
        assert "porto" in custom.store.doc_entities.lookup("default", KEYS)
        assert kept.chunks == 2
        custom.index_document_entities(rebuild=True)
        found = custom.store.doc_entities.lookup("default", KEYS)
        assert view(found) == {"priya raman": (2, [("kb", "f#0"), ("kb", "h#0")], "person")}
    finally:
        custom.close()


@pytest.mark.parametrize("bad", [["kb", ""], [], b"kb", 3, [None], "\ud800"])
def test_a_bad_collection_is_refused_and_nothing_changes(
    tmp_path: Path, embedder: OnnxEmbedder, bad: object
) -> None:
    memory = memory_at(tmp_path, embedder, OFF)
    try:
        memory.add_documents([("h", ACME)], collection="kb", progress=False)
        with pytest.raises(StoreInputError, match="collection|namespace"):
            memory.index_document_entities(bad)  # type: ignore[arg-type]
        assert memory.store.doc_entities.lookup("default", KEYS) == {}
        assert memory.store.get(["h#0"], namespace="default", collection="kb")[0].text == ACME
    finally:
        memory.close()


def test_one_tenant_indexes_only_its_own_documents(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    store = ChromaStore(tmp_path / "db", embedder=embedder)
    first = ContextMemory(store=store, config=OFF, namespace="first")
    second = ContextMemory(store=store, config=OFF, namespace="second")
    try:
        first.add_documents([("h", ACME)], collection="kb", progress=False)
        second.add_documents([("f", FAIR)], collection="kb", progress=False)
        assert second.index_document_entities().chunks == 1
        assert store.doc_entities.lookup("first", KEYS) == {}
        assert "acme robotics" not in store.doc_entities.lookup("second", KEYS)
        assert "lisbon" in store.doc_entities.lookup("second", KEYS)
    finally:
        first.close()
        second.close()


# -- property ------------------------------------------------------------------------------

WORDS = ["Priya Raman", "Porto", "Acme Robotics", "Lisbon", "the depot", "Zed Quill", "rail"]
documents = st.lists(
    st.tuples(
        st.sampled_from(["kb", "wiki", "faq"]),
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=5).map(
            lambda ws: " and ".join(ws) + " met at noon."
        ),
    ),
    min_size=1,
    max_size=6,
)


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(docs=documents, chosen=st.sets(st.sampled_from(["kb", "wiki", "faq"])))
def test_indexing_later_gives_the_index_that_indexing_at_storage_gives(
    tmp_path_factory: pytest.TempPathFactory,
    embedder: OnnxEmbedder,
    docs: list[tuple[str, str]],
    chosen: set[str],
) -> None:
    folder = tmp_path_factory.mktemp("reindex")
    later = memory_at(folder / "later", embedder, OFF)
    now = memory_at(folder / "now", embedder, ON)
    try:
        for number, (collection, text) in enumerate(docs):
            for memory in (later, now):
                memory.add_documents([(f"d{number}", text)], collection=collection, progress=False)
        later.index_document_entities(sorted(chosen) or None)
        collections = chosen or {"kb", "wiki", "faq"}
        keys = [w.lower() for w in WORDS]
        expected = view(now.store.doc_entities.lookup("default", keys, collections=collections))
        assert view(later.store.doc_entities.lookup("default", keys)) == expected
    finally:
        later.close()
        now.close()
