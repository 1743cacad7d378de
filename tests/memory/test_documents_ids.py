"""Documents: one word for the collection, and documents without ids stored once (issue 39).

``add_documents(collection=...)`` names a document collection; ``namespace=`` (the tenant
everywhere else) is its old name, kept for a release with a `DeprecationWarning`. A document
given without an id gets one from what it holds, so adding the same text again (running the
quickstart twice) stores it once, with the same chunk ids.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_doc_snippets import ROOT, blocks

from ctxbudget import ConfigurationError, ContextMemory
from ctxbudget.embed.onnx import OnnxEmbedder

NS = "default"
TEXTS = ["Alfama has many small restaurants.", "The tram 28 climbs to the castle."]


@pytest.fixture
def memory(tmp_path: Path, embedder: OnnxEmbedder) -> Iterator[ContextMemory]:
    mem = ContextMemory(path=tmp_path / "mem", embedder=embedder, write_behind=False)
    yield mem
    mem.close()


def stored_texts(memory: ContextMemory, collection: str) -> list[str]:
    """Every chunk text stored in ``collection`` (one search that asks for more than exist)."""
    hits = memory.search("anything", k=50, kinds=["document"], collections=[collection])
    return sorted(found.hit.record.text for found in hits)


def test_plain_string_documents_added_twice_are_stored_once(memory: ContextMemory) -> None:
    first = memory.add_documents(TEXTS)
    assert memory.add_documents(TEXTS) == first  # the same ids: the same chunks
    assert memory.add_documents(list(reversed(TEXTS))) == list(reversed(first))
    assert stored_texts(memory, "kb") == sorted(TEXTS)  # used to be each text three times
    hits = memory.search("restaurants in Alfama", k=10, kinds=["document"])
    assert [h.hit.record.text for h in hits].count(TEXTS[0]) == 1
    assert all(chunk.startswith("doc:") and chunk.endswith("#0") for chunk in first)


def test_ids_come_from_the_collection_and_the_text(memory: ContextMemory) -> None:
    kb = memory.add_documents([TEXTS[0]], collection="kb")
    wiki = memory.add_documents([TEXTS[0]], collection="wiki")
    other = memory.add_documents([TEXTS[1]], collection="kb")
    assert len({*kb, *wiki, *other}) == 3
    assert stored_texts(memory, "kb") == sorted(TEXTS)
    assert stored_texts(memory, "wiki") == [TEXTS[0]]
    # Dicts without an id too; ids given are kept as given.
    assert memory.add_documents([{"text": TEXTS[0]}], collection="kb") == kb
    assert memory.add_documents([("mine", TEXTS[0])], collection="kb") == ["mine#0"]
    # A long document: deterministic chunk ids, stored once.
    long = " ".join(f"Sentence {i} about the old town." for i in range(80))
    chunks = memory.add_documents([long], chunk_tokens=60, overlap=10)
    assert len(chunks) > 1 and memory.add_documents([long], chunk_tokens=60, overlap=10) == chunks
    assert [c.rsplit("#", 1)[1] for c in chunks] == [str(i) for i in range(len(chunks))]


def test_collection_is_the_name_and_namespace_its_deprecated_alias(
    memory: ContextMemory,
) -> None:
    with pytest.warns(DeprecationWarning, match=r"namespace= is now collection=") as warned:
        old = memory.add_documents([TEXTS[0]], namespace="travel")
    assert warned[0].filename == __file__  # the caller's line (Python shows it in __main__)
    assert memory.add_documents([TEXTS[0]], collection="travel") == old
    assert stored_texts(memory, "travel") == [TEXTS[0]]
    assert memory.namespace == NS  # the tenant is untouched
    with pytest.raises(ConfigurationError, match="pass collection= only"):
        memory.add_documents([TEXTS[0]], collection="a", namespace="b")


def test_the_quickstart_run_twice_stores_each_document_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The quickstart's own "Keep a memory" block, run twice in one folder (a reader running
    # the script again): its document used to be stored once per run.
    [block] = [
        b
        for b in blocks(ROOT / "docs" / "quickstart.md")
        if not b.skip and not b.shell and "add_documents" in b.code
    ]
    monkeypatch.chdir(tmp_path)
    code = compile(block.code, "docs/quickstart.md", "exec")
    for _ in range(2):
        names: dict[str, object] = {"__name__": "quickstart"}
        with contextlib.redirect_stdout(io.StringIO()):
            exec(code, names)  # noqa: S102 - the documentation's own code
        mem = names["mem"]
        assert isinstance(mem, ContextMemory)
        mem.close()
    mem = ContextMemory(path=tmp_path / "data" / "mem")
    try:
        assert stored_texts(mem, "kb") == ["Alfama has many small restaurants..."]
    finally:
        mem.close()


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    texts=st.lists(
        st.one_of(
            st.sampled_from([*TEXTS, "x", "ÿ ü ñ — 🍞.", "Same text."]),
            st.text(st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]), min_size=1),
        ).filter(str.strip),
        min_size=1,
        max_size=6,
    ),
    collection=st.sampled_from(["kb", "wiki", "ñ"]),
)
def test_property_the_same_text_is_stored_once(
    memory: ContextMemory, texts: list[str], collection: str
) -> None:
    first = memory.add_documents(texts, collection=collection)  # repeats within one call too
    stored = memory.store.count(namespace=NS)
    assert memory.add_documents(texts, collection=collection) == first
    assert memory.store.count(namespace=NS) == stored
    ids = {text: memory.add_documents([text], collection=collection) for text in texts}
    assert memory.store.count(namespace=NS) == stored
    assert [i for text in texts for i in ids[text]] == first
    assert len({i for chunk_ids in ids.values() for i in chunk_ids}) == sum(map(len, ids.values()))
