"""Document chunking: every chunk fits, nothing is lost, lines survive."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget import TokenCounter
from ctxbudget.memory.writing.chunking import chunk_text

COUNTER = TokenCounter.from_encoding("o200k_base")
words = st.sampled_from(
    ["alpha", "beta", "Lisbon", "3.5", "é", "日本", "x" * 30, "end.", "z9" * 60]
)
separators = st.sampled_from([" ", " ", ". ", "\n", "\n\n", "! ", "\n- "])
documents = st.lists(st.tuples(words, separators), max_size=80).map(
    lambda parts: "".join(w + s for w, s in parts)
)


@settings(max_examples=150, deadline=None)
@given(text=documents, size=st.integers(8, 80), overlap=st.integers(0, 7))
def test_chunks_fit_and_keep_every_word(text: str, size: int, overlap: int) -> None:
    chunks = chunk_text(text, max_tokens=size, overlap=overlap, count=COUNTER.count)
    assert all(COUNTER.count(chunk) <= size for chunk in chunks)
    joined = "".join("".join(chunks).split())
    for word in text.split():
        assert word in joined  # long words may be cut across chunks, never lost


def test_markdown_lines_are_kept() -> None:
    text = "# Title\n\nFirst line.\n- item one\n- item two"
    assert chunk_text(text, max_tokens=200, overlap=30, count=COUNTER.count) == [text]


def test_overlap_repeats_the_last_sentence() -> None:
    text = " ".join(f"Sentence {i} is here." for i in range(40))
    chunks = chunk_text(text, max_tokens=30, overlap=8, count=COUNTER.count)
    assert len(chunks) > 1
    assert chunks[1].startswith(chunks[0].split(". ")[-1].rstrip("."))
