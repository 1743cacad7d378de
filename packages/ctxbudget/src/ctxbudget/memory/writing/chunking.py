"""Cutting documents into chunks of a few hundred tokens, with overlap, at sentence ends.

`document_id` names a document given without an id by what it holds, so adding it again
stores nothing new (its chunks are ``<document id>#<n>``, deterministic too).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence

from ctxbudget.core.numbers import shown
from ctxbudget.errors import ConfigurationError

__all__ = ["chunk_text", "document_id"]

# A piece ends at a sentence end (followed by spaces) or at a line break; the separator it had
# is kept, so a chunk of Markdown keeps its lines, headings and list items.
_PIECE = re.compile(r".*?(?:[.!?。！？](?=\s)|(?=\n)|$)", re.DOTALL)
_SEPARATOR = re.compile(r"\s*")


def document_id(collection: str, text: str, how: Sequence[object] = ()) -> str:
    """The id of a document given without one: ``doc:`` and a digest of what it holds.

    The digest (SHA-256, 24 hex digits) covers the collection, the text and ``how`` it is
    stored (source, metadata, chunking, tokenizer: whatever makes its chunks what they are), so
    the same document added the same way again has the same id and chunk ids, and is stored
    once; the same text in another collection is another document.

    >>> document_id("kb", "Alfama has many small restaurants.") == document_id(
    ...     "kb", "Alfama has many small restaurants.")
    True
    >>> document_id("kb", "x") == document_id("wiki", "x")
    False
    """
    try:
        # ensure_ascii: any str (a lone surrogate too) has one encoding; checked later.
        key = json.dumps(_canonical([collection, text, *how]), default=repr)
    except (TypeError, ValueError, RecursionError):  # odd metadata, refused by the store's check
        key = repr([collection, text]) + shown(how)  # bounded: a huge or deep value too
    return "doc:" + hashlib.sha256(key.encode("ascii", "backslashreplace")).hexdigest()[:24]


def _canonical(value: object) -> object:
    # Mappings as pairs sorted by key (keys of any type): equal metadata, one digest.
    if isinstance(value, Mapping):
        pairs = [[repr(key), _canonical(item)] for key, item in value.items()]
        return sorted(pairs, key=lambda pair: str(pair[0]))
    if isinstance(value, list | tuple):
        return [_canonical(item) for item in value]
    return value


def _pieces(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    position = 0
    while position < len(text):
        match = _PIECE.match(text, position)
        end = match.end() if match and match.end() > position else len(text)
        piece = text[position:end].strip()
        gap = _SEPARATOR.match(text, end)
        separator_end = gap.end() if gap else end
        separator = "\n" * min(2, text.count("\n", end, separator_end)) or " "
        if piece:
            out.append((piece, separator))
        position = max(separator_end, end + 1 if end == position else separator_end)
    return out


def _fit_word(word: str, max_tokens: int, count: Callable[[str], int]) -> list[str]:
    """A word cut into parts of at most ``max_tokens`` tokens (most words: one part).

    Each part is the longest prefix that fits, found by doubling a prefix then bisecting, so
    only prefixes up to twice a part long are counted: a huge word (base64, minified JSON) costs
    time in proportion to its length, not to its square.
    """
    parts: list[str] = []
    while True:
        fit, probe = 0, min(len(word), max(1, max_tokens))
        while count(word[:probe]) <= max_tokens:
            fit = probe
            if probe == len(word):
                return [*parts, word]
            probe = min(len(word), 2 * probe)
        low, high = fit, probe - 1
        while low < high:  # the longest prefix that fits
            middle = (low + high + 1) // 2
            if count(word[:middle]) <= max_tokens:
                low = middle
            else:
                high = middle - 1
        low = max(low, 1)  # a character over the limit on its own still moves on
        parts.append(word[:low])
        word = word[low:]


def _join(pieces: list[tuple[str, str]]) -> str:
    return "".join(text + separator for text, separator in pieces).strip()


def chunk_text(
    text: str, *, max_tokens: int, overlap: int, count: Callable[[str], int]
) -> list[str]:
    r"""Chunks of at most ``max_tokens`` tokens, overlapping by up to ``overlap`` tokens.

    Chunks end at sentence ends or line breaks, and keep the line breaks of the text. Each chunk
    starts with the last sentences (up to ``overlap`` tokens) of the one before, so a fact cut
    at a boundary is whole in one of them. A sentence longer than a chunk is cut at words.

    >>> from ctxbudget import TokenCounter
    >>> c = TokenCounter.for_model("gpt-4o")
    >>> chunk_text("# Title\n\nFirst line.\n- item", max_tokens=50, overlap=0, count=c.count)
    ['# Title\n\nFirst line.\n- item']
    """
    if max_tokens <= 0:
        msg = f"max_tokens must be positive, got {max_tokens}"
        raise ConfigurationError(msg)
    if not 0 <= overlap < max_tokens:
        msg = f"overlap must be at least 0 and below max_tokens ({max_tokens}), got {overlap}"
        raise ConfigurationError(msg)
    pieces: list[tuple[str, str]] = []
    for piece, separator in _pieces(text):
        if count(piece) <= max_tokens:
            pieces.append((piece, separator))
            continue
        words: list[str] = []
        for long_word in piece.split():
            for word in _fit_word(long_word, max_tokens, count):
                if words and count(" ".join([*words, word])) > max_tokens:
                    pieces.append((" ".join(words), " "))
                    words = []
                words.append(word)
        if words:
            pieces.append((" ".join(words), separator))
    chunks: list[str] = []
    current: list[tuple[str, str]] = []
    for entry in pieces:
        if current and count(_join([*current, entry])) > max_tokens:
            chunks.append(_join(current))
            carry: list[tuple[str, str]] = []
            for previous in reversed(current):
                if count(_join([previous, *carry])) > overlap:
                    break
                carry.insert(0, previous)
            current = carry if count(_join([*carry, entry])) <= max_tokens else []
        current.append(entry)
    if current:
        chunks.append(_join(current))
    return chunks
