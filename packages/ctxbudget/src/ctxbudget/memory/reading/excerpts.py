"""Retrieved turns as the sentences that match the query (`MemoryConfig.excerpts`, off by default).

A small budget holds more distinct evidence when a long retrieved turn is offered as the
sentences that say something about the query rather than whole. A sentence *matches* when it
holds one of the query's terms (stemmed content words, `lexical_terms`, without the names of the
participants the query names: who said a turn is not what it says). What is cut shows as
`MARKER`; a ``Name: `` speaker prefix stays; the item keeps its id, role, name, date and score,
and its metadata says it is an excerpt (``excerpt``: the tokens of the whole turn).

A turn stays whole when nothing in it matches (it was found by meaning or through a neighbour:
its words cannot tell which sentence counts), when it has fewer than two sentences, when the cut
would save less than a quarter of it, and when it is among the best candidates that fill the
first quarter of the room (`excerpted`): the strongest matches are read whole.

>>> excerpt("We went camping. It rained all week. The kids loved the tent!", {"kid"})
'… The kids loved the tent!'
>>> excerpt("Short one.", {"short"}) is None
True
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence, Set

from ctxbudget.core.items import ContextItem, Tier
from ctxbudget.core.speaker_prefix import speaker_prefix
from ctxbudget.memory.reading.lexical import lexical_terms
from ctxbudget.tokens.counter import TokenCounter

__all__ = [
    "MARKER",
    "WHOLE_SHARE",
    "Pieces",
    "excerpt",
    "excerpt_terms",
    "excerpted",
    "pieces",
    "sentences",
]

MARKER = "\u2026"
"""What stands for the sentences cut."""

WHOLE_SHARE = 0.25
"""The share of the room the best candidates fill whole before the others are excerpted."""

# A sentence ends at . ! ? (and closing quotes or brackets after them) before white space; an
# attached "[shares ...]" caption or a line break starts a piece of its own.
_BOUNDARY = re.compile(r"(?<=[.!?])[\"'\u201d\u2019)\]]*\s+|\s*\n+\s*|\s+(?=\[)")
_LEAST_SAVED = 0.25  # a cut that saves less than this share of the text is not made


def sentences(text: str) -> list[str]:
    """The sentences of ``text`` (split at ``.!?`` before white space, line breaks, ``[``).

    >>> sentences("Hi! I went. [shares a photo]")
    ['Hi!', 'I went.', '[shares a photo]']
    """
    parts: list[str] = []
    start = 0
    for found in _BOUNDARY.finditer(text):
        end = found.start()
        closing = found.group(0).rstrip()
        if closing and not closing[0].isspace():  # quotes or brackets closing the sentence
            end += len(closing)
        piece = text[start:end].strip()
        if piece:
            parts.append(piece)
        start = found.end()
    tail = text[start:].strip()
    if tail:
        parts.append(tail)
    return parts


Pieces = tuple[str, list[str], list[frozenset[str]]]
"""A text cut for excerpts: its speaker prefix (or ``""``), its sentences, and their terms."""


def pieces(text: str) -> Pieces:
    """``text`` cut for `excerpt` (`SessionIndex.pieces` keeps those of a session's messages).

    >>> pieces("Mel: We went camping. The kids loved it!")[:2]
    ('Mel: ', ['We went camping.', 'The kids loved it!'])
    """
    prefix = speaker_prefix(text)
    head, body = ("", text) if prefix is None else (text[: prefix.end], text[prefix.end :])
    parts = sentences(body)
    return head, parts, [frozenset(lexical_terms(p)) for p in parts]


def excerpt(text: str, terms: Set[str], cut: Pieces | None = None) -> str | None:
    """The sentences of ``text`` that hold one of ``terms``, the rest as `MARKER` (None: whole).

    A ``Name: `` speaker prefix is kept. None when nothing matches, the text has fewer than two
    sentences, or the cut would save less than a quarter of it. ``cut``: ``pieces(text)``,
    when the caller keeps it.
    """
    if not terms:
        return None
    head, parts, words = pieces(text) if cut is None else cut
    body = text[len(head) :]
    if len(parts) < 2:
        return None
    keep = [not held.isdisjoint(terms) for held in words]
    if not any(keep):
        return None
    out: list[str] = []
    for part, kept in zip(parts, keep, strict=True):
        if kept:
            out.append(part)
        elif not out or out[-1] != MARKER:
            out.append(MARKER)
    short = " ".join(out)
    if len(short) > (1.0 - _LEAST_SAVED) * len(body):
        return None
    return head + short


def excerpt_terms(query: str, named: Set[str]) -> frozenset[str]:
    """The query's terms an excerpt keeps sentences for: not the names of whom it asks about.

    >>> sorted(excerpt_terms("What did Mel paint last week?", {"Mel"}))
    ['last', 'paint', 'week']
    """
    names = {t for n in named for t in lexical_terms(n)}
    return frozenset(t for t in lexical_terms(query) if t not in names and len(t) > 1)


def excerpted(
    items: Sequence[ContextItem],
    terms: Set[str],
    room: float,
    counter: TokenCounter,
    pieces_of: Callable[[ContextItem], Pieces | None] | None = None,
) -> list[ContextItem]:
    """``items`` (best first) with retrieved turns past the best as their excerpts.

    The best fill `WHOLE_SHARE` of ``room`` tokens whole; after them, each retrieved message
    (not a document chunk, a summary, a turn with tool calls or content parts) is offered as
    its `excerpt`, with the tokens of its whole text in ``metadata["excerpt"]``.
    ``pieces_of``: an item's `pieces` where the caller keeps them (None: cut here).
    """
    if not terms:
        return list(items)
    whole = WHOLE_SHARE * room
    used = 0
    out: list[ContextItem] = []
    for item in items:
        if used < whole:
            used += counter.count(item.text)
        elif (
            item.tier == Tier.RETRIEVED
            and item.role is not None
            and not item.tool_calls
            and not item.parts
        ):
            cut = pieces_of(item) if pieces_of is not None else None
            short = excerpt(item.text, terms, cut)
            if short is not None:
                metadata = {**item.metadata, "excerpt": counter.count(item.text)}
                item = dataclasses.replace(item, text=short, metadata=metadata)
        out.append(item)
    return out
