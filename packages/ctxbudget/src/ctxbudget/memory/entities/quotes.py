"""How an entity card quotes: the sentence that names the entity, and where it comes from.

Shared by the cards of a session's entities (`ctxbudget.memory.entities.cards`) and the lines
about documents (`ctxbudget.memory.entities.documents`): a quote is one short line, and a turn
or chunk is labelled by its id as it is when plain, else quoted, so no id can carry markup or a
line break into a card.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

__all__ = ["QUOTE_CHARS", "label", "sentence"]

QUOTE_CHARS = 160
"""The longest quote, in characters (a longer sentence is cut with ``...``)."""

_PLAIN_ID = re.compile(r"[\w:.#/\-]{1,64}", re.UNICODE)
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*", re.UNICODE)


def label(ref: str) -> str:
    """A turn or chunk id as a card shows it: as it is when plain, else quoted (cut to 64).

    >>> label("kb/guide#3"), label("a<b>")
    ('kb/guide#3', '"a<b>"')
    """
    return ref if _PLAIN_ID.fullmatch(ref) else json.dumps(ref[:64])


def sentence(text: str, names: Sequence[str]) -> str:
    """The sentence of ``text`` that names the entity (else its first), on one short line.

    >>> sentence("Hi. Ana moved to Lisbon. Bye.", ["Ana"])
    'Ana moved to Lisbon.'
    """
    sentences = [s.strip() for s in _SENTENCE.findall(text[:4_000]) if s.strip()] or [text]
    folded = [n.casefold() for n in names if n]
    chosen = next((s for s in sentences if any(n in s.casefold() for n in folded)), sentences[0])
    chosen = " ".join(chosen.split())
    return chosen if len(chosen) <= QUOTE_CHARS else chosen[: QUOTE_CHARS - 3].rstrip() + "..."
