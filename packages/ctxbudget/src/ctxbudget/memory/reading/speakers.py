"""Who said a message, however the app recorded it: in ``name``, or as a ``Name: `` prefix.

Apps record the speaker of a turn in one of three ways: in the message's ``name`` field, as a
prefix of its text (``"Caroline: I went to the support group"``, as in transcripts and
multi-party logs), or not at all (the role is all there is). Retrieval asks `find_speaker`
rather than reading ``name``, wherever it uses the speaker: the session's authors
(`ctxbudget.memory.reading.session_index`: the author weighting of
`ctxbudget.memory.policy.scoring`, step 3, and the query's named speakers), the author as a
BM25 term (added to the words of a turn whose speaker is in ``name``; a prefixed turn holds it
already), and the dense side, which sees what was said (`spoken`; the store embeds the same,
`ctxbudget.store.records.embedding_text`). So the same turns score the same whichever of the
first two ways they were stored.

The rule, per message (no other message is needed, so it is the same in every session):

1. the ``name`` field, when it holds more than white space;
2. else a speaker prefix at the very start of the text (after leading white space): one to four
   *name-like* words, a colon (``:`` followed by white space, or a full-width ``：``) and some
   text after it. A word is name-like when it starts with a capital letter (or a letter of a
   script without case) and holds only letters, digits, apostrophes, hyphens and periods
   (``Dr.``, ``O'Brien``, ``Jean-Luc``, ``R2D2``, ``CAROLINE``); a short lower-case particle may
   sit inside a longer name (``Ludwig van Beethoven``). The prefix holds at least two letters
   (``Q:`` and ``A:`` are question and answer marks, not people), and none of its words is one
   of the `HEADINGS`: the common words that open a note rather than name a person
   (``Note:``, ``Warning:``, ``Update:``, ``Step:``...). A name is a proper noun; without a
   lexicon the only way to tell ``Note`` from ``Nora`` is to list the few common nouns that
   are used as headings, and that list is the same for every app and data set (the text
   rule itself is `ctxbudget.core.speaker_prefix`, which the store shares);
3. else None: the role is all that is known, and no author weighting applies (a query's names
   still match the words of the turns).

Texts that merely contain a colon are not speakers: a URL (``http://``: lower case, and no
space after the colon), a time (``10:30``: digits), code (``a: int``: lower case;
``std::vector``: no space), a heading (``Note: ...``).

What the model sees does not change: a prefixed text keeps its prefix and gets no ``name``, so
its row reads ``user|Caroline: I went...`` (one label, never ``user (Caroline)|Caroline: ...``).

>>> speaker_of({"role": "user", "text": "Caroline: I went to the support group."})
'Caroline'
>>> speaker_of({"role": "user", "name": "Caroline", "text": "I went to the support group."})
'Caroline'
>>> speaker_of({"role": "user", "text": "Note: the meeting moved to 10:30."}) is None
True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ctxbudget.core.items import ContextItem
from ctxbudget.core.speaker_prefix import HEADINGS, SpeakerPrefix, speaker_prefix, without_speaker
from ctxbudget.store.records import Record

__all__ = [
    "HEADINGS",
    "Speaker",
    "SpeakerPrefix",
    "find_speaker",
    "speaker_of",
    "speaker_prefix",
    "spoken",
]


_SPEAKING = ("user", "assistant")


@dataclass(frozen=True, slots=True)
class Speaker:
    """Who said a message, and where that was recorded.

    Attributes:
        name: the speaker.
        prefixed: True when the text starts with it (a ``Name: `` prefix), False when it came
            from the message's ``name`` field. A prefixed text already holds the name, so
            nothing should add it again (to the words the lexical index matches, or to a row).
    """

    name: str
    prefixed: bool


def _fields(message: object) -> tuple[object, object]:
    """``(name, text)`` of a message dict, a stored `Record` or a `ContextItem`."""
    if isinstance(message, Record):
        return message.metadata.get("_name"), message.text
    if isinstance(message, ContextItem):
        return message.name, message.text
    if isinstance(message, Mapping):
        return message.get("name"), message.get("text", message.get("content"))
    return None, None


def _spoken_turn(message: object) -> bool:
    """A user or assistant turn (or a message without a role), not a tool result or document."""
    if isinstance(message, Record):
        return message.kind == "message" and message.role in _SPEAKING
    role = message.role if isinstance(message, ContextItem) else None
    if isinstance(message, Mapping):
        role = message.get("role")
    return role is None or role in _SPEAKING


def find_speaker(message: object) -> Speaker | None:
    """Who said ``message`` (a message dict, a `Record` or a `ContextItem`) and how it was kept.

    >>> find_speaker({"text": "Mel: hi"})
    Speaker(name='Mel', prefixed=True)
    """
    name, text = _fields(message)
    if name is not None and not isinstance(name, bool):
        given = " ".join(str(name).split())
        if given:
            return Speaker(given, prefixed=False)
    prefix = speaker_prefix(text)
    return Speaker(prefix.name, prefixed=True) if prefix is not None else None


def speaker_of(message: object) -> str | None:
    """The speaker of ``message``: its ``name``, else its text's speaker prefix, else None.

    ``message`` is a message dict (``name``, ``text`` or ``content``), a stored `Record`
    (``metadata["_name"]``, ``text``) or a `ContextItem` (``name``, ``text``).

    >>> speaker_of({"text": "CAROLINE: Hey Mel!"})
    'CAROLINE'
    >>> speaker_of({"text": "a: int = 3"}) is None
    True
    """
    found = find_speaker(message)
    return found.name if found is not None else None


def spoken(message: object) -> str:
    """What ``message`` says: its text without the speaker prefix that names who said it.

    The text as it is when the speaker came from ``name`` (or is unknown), and for what is not
    a user or assistant turn (a tool result, a document, a pinned fact). Dense matching uses
    it (the store embeds it, earlier turns are searched with it): who said a turn is matched by
    words and by the author weighting, the same way in every form.

    >>> spoken({"text": "Caroline: I went to the support group."})
    'I went to the support group.'
    >>> spoken({"name": "Caroline", "text": "Mel: hi"})
    'Mel: hi'
    """
    text = _fields(message)[1]
    if not isinstance(text, str):
        return ""
    if not _spoken_turn(message):
        return text
    found = find_speaker(message)
    if found is None or not found.prefixed:
        return text
    return without_speaker(text)
