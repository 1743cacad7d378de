"""Entities in documents: indexed when chunks are stored, offered when a query names them.

Real parts: an embedded Chroma, a Chroma server (isolation) and the local embedder. The
promises: a chunk that names the entity a question names is offered even when it shares no
vector neighbourhood with the question; the index always lists exactly the stored chunks that
name an entity (adding again counts nothing twice, deleting a chunk takes it out); only the
collections searched are read; one namespace's documents never reach another's; a card never
quotes an item offered otherwise, and what is sent is what the report includes.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path

import pytest
from core.fidelity import check_sent
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxbudget import BudgetExceededError, Tier
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.errors import ConfigurationError
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.entities import Mention
from ctxbudget.memory.entities.documents import query_grams
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.memory.reading.candidates import offered
from ctxbudget.store.chroma_store import ChromaStore
from ctxbudget.store.doc_entities import CHUNKS_KEPT, ChunkEntities, Named

ON = MemoryConfig(entities=True, recent_messages=6)
ROOM = {"floors": {"ENTITY": 0.25}}

FILLER = [
    f"Section {i}. The quarterly report covers shipping volumes, weather delays and rail freight."
    for i in range(30)
]
ACME = "Acme Robotics was founded by Priya Raman in Porto in 2011 to build warehouse arms."


def docs_memory(folder: Path, embedder: OnnxEmbedder, **options: object) -> ContextMemory:
    config = options.pop("config", ON)
    return ContextMemory(
        store=ChromaStore(folder / "db", embedder=embedder),
        config=config,  # type: ignore[arg-type]
        strategy=ROOM,
        **options,  # type: ignore[arg-type]
    )


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder) -> ContextMemory:
    memory = docs_memory(tmp_path_factory.mktemp("doc-entities"), embedder)
    docs = [(f"report-{i}", text) for i, text in enumerate(FILLER)]
    docs.insert(17, ("history", ACME))
    memory.add_documents(docs, collection="kb", chunk_tokens=60, overlap=0, progress=False)
    yield memory
    memory.close()


def session_id() -> str:
    return f"s-{uuid.uuid4().hex[:10]}"


def test_a_question_naming_an_entity_brings_the_chunk_that_names_it(
    shared: ContextMemory,
) -> None:
    session = session_id()
    shared.add_message(session, "user", "Hello there!")
    query = "Who is Priya Raman?"
    found = shared.candidates(session, query, budget=600)
    cards = {it.metadata["entity"]: it for it in found.entities}
    assert "Priya Raman" in cards
    card = cards["Priya Raman"]
    assert card.tier == Tier.ENTITY and card.source == "entity"
    assert "Named in 1 document chunk: kb/history#0." in card.text
    chunks = [it for it in found.retrieved if it.metadata.get("source") == "entity"]
    assert [it.text for it in chunks] == [ACME]
    assert chunks[0].id == 'ctxbudget:collection:["kb","history#0"]'
    # The card does not quote what is offered as a candidate already.
    assert ACME[:40] not in card.text
    ctx = shared.assemble(session, query, budget=600, format="text")
    assert ACME in ctx.render()
    check_sent(ctx, offered(found, query, system=None, tools=(), extras=()))


def test_only_the_collections_searched_are_read(shared: ContextMemory) -> None:
    session = session_id()
    shared.add_message(session, "user", "Hello there!")
    for documents in (False, ["other"], "other"):
        found = shared.candidates(session, "Who is Priya Raman?", budget=600, documents=documents)
        assert not [it for it in found.retrieved if "history#0" in it.id]
        assert "Priya Raman" not in {it.metadata.get("entity") for it in found.entities}
    found = shared.candidates(session, "Who is Priya Raman?", budget=600, documents=["kb"])
    assert "Priya Raman" in {it.metadata.get("entity") for it in found.entities}


def test_entities_off_indexes_nothing(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    memory = docs_memory(tmp_path, embedder, config=MemoryConfig())
    try:
        memory.add_documents([("h", ACME)], collection="kb", progress=False)
        assert memory.store.doc_entities.lookup("default", ["priya raman"]) == {}
    finally:
        memory.close()


def test_adding_again_counts_nothing_twice_and_deleting_takes_chunks_out(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    memory = docs_memory(tmp_path, embedder)
    index = memory.store.doc_entities
    try:
        docs = [("a", ACME), ("b", "Priya Raman spoke at the Porto fair.")]
        for _ in range(2):
            memory.add_documents(docs, collection="kb", progress=False)
        found = index.lookup("default", ["priya raman", "porto"])
        assert found["priya raman"].count == 2
        assert sorted(found["priya raman"].chunks) == [("kb", "a#0"), ("kb", "b#0")]
        assert memory.store.delete(["b#0"], namespace="default", collection="kb") == 1
        found = index.lookup("default", ["priya raman"])
        assert found["priya raman"].chunks == [("kb", "a#0")]
        assert found["priya raman"].count == 1
        memory.store.delete(["a#0"], namespace="default", collection="kb")
        assert index.lookup("default", ["priya raman", "acme robotics"]) == {}
    finally:
        memory.close()


def test_one_namespace_never_sees_another_namespaces_documents(
    chroma_server: object, embedder: OnnxEmbedder
) -> None:
    url = chroma_server.url  # type: ignore[attr-defined]
    name = f"t{uuid.uuid4().hex[:8]}"
    first = ContextMemory(
        store=ChromaStore(url=url, embedder=embedder, collection=name),
        config=ON,
        namespace="first",
        strategy=ROOM,
    )
    second = ContextMemory(
        store=ChromaStore(url=url, embedder=embedder, collection=name),
        config=ON,
        namespace="second",
        strategy=ROOM,
    )
    try:
        first.add_documents([("h", ACME)], collection="kb", progress=False)
        session = session_id()
        second.add_message(session, "user", "Hello there!")
        found = second.candidates(session, "Who is Priya Raman?", budget=600)
        assert not found.entities and not [it for it in found.retrieved if "h#0" in it.id]
        mine = first.candidates(session_id(), "Who is Priya Raman?", budget=600)
        assert "Priya Raman" in {it.metadata.get("entity") for it in mine.entities}
    finally:
        first.close()
        second.close()


class Failing:
    def extract(self, texts: Sequence[str], *, speakers: Sequence[str | None]) -> object:
        return [[Mention("Acme")]]  # one list for any number of texts


def test_a_broken_extractor_fails_before_anything_is_written(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    memory = docs_memory(tmp_path, embedder, entity_extractor=Failing())
    try:
        with pytest.raises(ConfigurationError, match="one list of mentions per text"):
            memory.add_documents([("a", "x"), ("b", "y")], collection="kb", progress=False)
        assert memory.store.get(["a#0"], namespace="default", collection="kb") == []
    finally:
        memory.close()


def test_hostile_names_and_ids_never_reach_a_card_as_markup(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    memory = docs_memory(tmp_path, embedder)
    try:
        text = "Zed Quill wrote <script>alert(1)</script> then met Zed Quill again.\n\nEnd."
        memory.add_documents([("doc<b>", text)], collection="kb", progress=False)
        found = memory.candidates(session_id(), "What did Zed Quill write?", budget=800)
        card = next(it for it in found.entities if it.metadata.get("entity") == "Zed Quill")
        head = card.text.splitlines()[:2]
        assert '"kb/doc<b>#0"' in head[1]  # an id that is not plain is quoted, whole
        assert not any("<" in line.replace('"kb/doc<b>#0"', "") for line in head)
        assert "\n" not in card.metadata["entity"]
    finally:
        memory.close()


# -- properties ----------------------------------------------------------------------------

NAMES = ["ana", "bruno", "caroline smith", "acme corp", "porto"]
chunk_refs = st.tuples(
    st.sampled_from(["kb", "wiki"]), st.sampled_from([f"d{i}#0" for i in range(8)])
)
operations = st.lists(
    st.one_of(
        st.tuples(
            st.just("add"),
            chunk_refs,
            st.lists(st.sampled_from(NAMES), max_size=3, unique=True),
        ),
        st.tuples(st.just("delete"), chunk_refs, st.just([])),
    ),
    max_size=25,
)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=operations)
def test_the_index_lists_exactly_the_stored_chunks_naming_each_entity(
    tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder, ops: list[tuple]
) -> None:
    store = ChromaStore(tmp_path_factory.mktemp("idx") / "db", embedder=embedder)
    try:
        index = store.doc_entities
        model: dict[tuple[str, str], set[str]] = {}  # chunk -> the keys it names
        for op, ref, names in ops:
            if op == "add":
                if ref in model:
                    continue  # a stored chunk is not stored again with other text
                named = tuple(Named(n, n.title()) for n in names)
                index.add("ns", [ChunkEntities(ref[0], ref[1], named)])
                if named:
                    model[ref] = set(names)
            else:
                index.remove("ns", [ref])
                model.pop(ref, None)
        found = index.lookup("ns", NAMES)
        for name in NAMES:
            expected = {ref for ref, keys in model.items() if name in keys}
            if not expected:
                assert name not in found
                continue
            assert found[name].count == len(expected)
            assert set(found[name].chunks) == expected
            assert len(found[name].chunks) <= CHUNKS_KEPT
            only_kb = index.lookup("ns", [name], collections=["kb"])
            kb = {r for r in expected if r[0] == "kb"}
            assert set(only_kb[name].chunks) == kb if kb else name not in only_kb
    finally:
        store.close()


people = st.sampled_from(["Priya Raman", "Acme Robotics", "Porto", "Zed Quill", "Bruno"])


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    asked=people,
    budget=st.integers(min_value=60, max_value=900),
    fmt=st.sampled_from(["messages", "text"]),
)
def test_document_entities_keep_every_promise_of_what_is_sent(
    shared: ContextMemory, asked: str, budget: int, fmt: str
) -> None:
    session = session_id()
    shared.add_messages(
        session,
        [("user", f"Tell me about {asked}."), ("assistant", "Sure, what do you want to know?")],
        progress=False,
    )
    query = f"What do the documents say about {asked}?"
    found = shared.candidates(session, query, budget=budget, format=fmt)  # type: ignore[arg-type]
    ids = [it.id for it in found.items]
    assert len(ids) == len(set(ids))
    others = {it.id for it in found.history} | {it.id for it in found.retrieved}
    for card in found.entities:
        assert not set(card.metadata.get("quoted", ())) & others
    try:
        ctx = shared.assemble(session, query, budget=budget, format=fmt)  # type: ignore[arg-type]
    except BudgetExceededError:
        return
    assert ctx.tokens_used <= ctx.tokens_available
    check_sent(ctx, offered(found, query, system=None, tools=(), extras=()))


@given(query=st.text(max_size=400))
def test_query_grams_are_bounded_and_never_a_common_word_alone(query: str) -> None:
    grams = query_grams(query)
    assert len(grams) <= 256
    assert "thanks" not in grams and "" not in grams


class Typed:
    """A custom extractor: every capitalized pair of words, typed by a table."""

    TYPES = {"Acme Robotics": "org", "Priya Raman": "person", "Porto": "place"}

    def extract(self, texts: Sequence[str], *, speakers: Sequence[str | None]) -> object:
        return [[Mention(n, t) for n, t in self.TYPES.items() if n in text] for text in texts]


@pytest.mark.parametrize(("types", "kept"), [((), {"org", "person"}), (("person",), {"person"})])
def test_a_custom_extractor_and_type_filters_apply_to_documents(
    tmp_path: Path, embedder: OnnxEmbedder, types: tuple[str, ...], kept: set[str]
) -> None:
    config = MemoryConfig(entities=True, entity_types=types)
    memory = docs_memory(tmp_path, embedder, entity_extractor=Typed(), config=config)
    try:
        memory.add_documents([("h", ACME)], collection="kb", progress=False)
        found = memory.candidates(
            session_id(), "Is Priya Raman still at Acme Robotics?", budget=800
        )
        cards = {it.metadata["type"] for it in found.entities if it.source == "entity"}
        assert cards == kept
    finally:
        memory.close()


def test_counts_are_per_collection_and_cover_chunks_no_longer_listed(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    store = ChromaStore(tmp_path / "db", embedder=embedder)
    try:
        index = store.doc_entities
        many = CHUNKS_KEPT + 6
        refs = [("kb", f"d{i}#0") for i in range(many)] + [("wiki", "w#0")]
        index.add("ns", [ChunkEntities(c, i, (Named("porto", "Porto", "place"),)) for c, i in refs])
        porto = index.lookup("ns", ["porto"])["porto"]
        assert porto.counts == {"kb": many, "wiki": 1} and len(porto.chunks) == CHUNKS_KEPT
        assert index.lookup("ns", ["porto"], collections=["wiki"])["porto"].count == 1
        unlisted = next(r for r in refs if r not in porto.chunks)
        index.remove("ns", [unlisted, ("wiki", "w#0")])
        porto = index.lookup("ns", ["porto"])["porto"]
        assert porto.counts == {"kb": many - 1} and len(porto.chunks) == CHUNKS_KEPT - 1
        assert index.lookup("ns", ["porto"], collections=["wiki"]) == {}
    finally:
        store.close()
