"""Cutting documents into chunks of a few hundred tokens, with overlap, at sentence ends."""

from __future__ import annotations

from collections.abc import Callable

from ctxbudget.summaries import split_sentences

__all__ = ["chunk_text"]


def chunk_text(
    text: str, *, max_tokens: int, overlap: int, count: Callable[[str], int]
) -> list[str]:
    """Chunks of at most ``max_tokens`` tokens, overlapping by up to ``overlap`` tokens.

    Each chunk starts with the last sentences (up to ``overlap`` tokens) of the one before, so
    a fact cut at a boundary is whole in one of them.

    Sentences longer than a chunk are cut at word boundaries.

    >>> from ctxbudget import TokenCounter
    >>> c = TokenCounter.for_model("gpt-4o")
    >>> len(chunk_text("One. Two. Three. Four.", max_tokens=4, overlap=0, count=c.count))
    2
    """
    if max_tokens <= 0:
        msg = f"max_tokens must be positive, got {max_tokens}"
        raise ValueError(msg)
    if not 0 <= overlap < max_tokens:
        msg = f"overlap must be at least 0 and below max_tokens ({max_tokens}), got {overlap}"
        raise ValueError(msg)
    pieces: list[str] = []
    for sentence in split_sentences(text):
        if count(sentence) <= max_tokens:
            pieces.append(sentence)
            continue
        words: list[str] = []
        for word in sentence.split():
            if words and count(" ".join([*words, word])) > max_tokens:
                pieces.append(" ".join(words))
                words = []
            words.append(word)
        if words:
            pieces.append(" ".join(words))
    chunks: list[str] = []
    current: list[str] = []
    for piece in pieces:
        if current and count(" ".join([*current, piece])) > max_tokens:
            chunks.append(" ".join(current))
            carry: list[str] = []
            for previous in reversed(current):
                if count(" ".join([previous, *carry])) > overlap:
                    break
                carry.insert(0, previous)
            current = carry if count(" ".join([*carry, piece])) <= max_tokens else []
        current.append(piece)
    if current:
        chunks.append(" ".join(current))
    return chunks
