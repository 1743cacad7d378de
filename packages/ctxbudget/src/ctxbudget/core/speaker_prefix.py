"""A speaker prefix at the start of a text: ``Caroline: I went...``, ``Dr. Ana Lima: ...``.

Transcripts and multi-party logs write who said a turn at the start of its text. This is the
text rule alone (pure, no I/O), shared by the store (`ctxbudget.store.records.embedding_text`
embeds what was said, not who said it) and by memory (`ctxbudget.memory.reading.speakers`, where a
message's ``name`` comes first and the rule is explained).

A prefix is one to four *name-like* words at the very start of the text (after leading white
space), a colon (``:`` followed by white space, or a full-width ``：``) and some text after it.
A word is name-like when it starts with a capital letter (or a letter of a script without case)
and holds only letters, digits, apostrophes, hyphens and periods; a short lower-case particle
may sit inside a longer name. The prefix holds at least two letters, and none of its words is
one of the `HEADINGS`.

>>> speaker_prefix("Caroline: I went to the support group.")
SpeakerPrefix(name='Caroline', end=10)
>>> without_speaker("Caroline: I went to the support group.")
'I went to the support group.'
>>> speaker_prefix("Note: the meeting moved to 10:30.") is None
True
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["HEADINGS", "SpeakerPrefix", "speaker_prefix", "without_speaker"]

HEADINGS = frozenset(
    """
    agenda alert also and announcement answer answers attention background breaking bug but
    caution conclusion cons context correction cost danger date dear definition disclaimer edit
    edited email error errors example examples exception fact faq finally first fix fixme fw
    fwd fyi goal goals hello hey hi hint hints important info information ingredients input
    instructions issue key location meanwhile name nb news next no note notes now ok okay
    option options output p.s plan pps price problem pros ps question questions re recap
    reference references reminder reply request result results second source sources spoiler
    status step steps subject summary task tasks then third tip tips title tldr today todo
    tomorrow tonight topic total translation update updated updates usage warning welcome
    yes yesterday
    """.split()
)
"""Words that open a note rather than name its speaker (compared case-insensitively)."""

_COLONS = (":", "\uff1a")  # ASCII and full-width
_LONGEST = 64  # characters before the colon that may still be a speaker prefix
_MOST_WORDS = 4
_PARTICLE = 3  # the longest lower-case word inside a name (van, von, de, da, bin, al)
_WORD_MARKS = frozenset("'\u2019-.")


@dataclass(frozen=True, slots=True)
class SpeakerPrefix:
    """A speaker prefix at the start of a text.

    Attributes:
        name: the speaker, its words joined by single spaces.
        end: where the text after the prefix (and the white space after the colon) starts.
    """

    name: str
    end: int


def _name_like(word: str, *, inner: bool) -> bool:
    if inner and word.isalpha() and word.islower() and len(word) <= _PARTICLE:
        return True  # van, de, bin: inside a name, never first or last
    first = word[0]
    if not first.isalpha() or first.islower():
        return False
    return all(c.isalnum() or c in _WORD_MARKS for c in word)


def speaker_prefix(text: object) -> SpeakerPrefix | None:
    """The speaker prefix at the very start of ``text`` (see the module docstring), if any.

    >>> speaker_prefix("Dr. Ana Lima: the results are in")
    SpeakerPrefix(name='Dr. Ana Lima', end=14)
    >>> speaker_prefix("see http://example.com") is None
    True
    """
    if not isinstance(text, str):
        return None
    head = text[: _LONGEST + 8]
    start = len(head) - len(head.lstrip())
    window = text[start : start + _LONGEST + 1]
    cut = min((i for i in (window.find(c) for c in _COLONS) if i > 0), default=-1)
    if cut < 0 or "\n" in window[:cut]:
        return None
    colon = start + cut
    after = colon + 1
    if text[colon] == ":" and not text[after : after + 1].isspace():
        return None  # http://, 10:30, std::vector, a:b
    rest = text[after : after + _LONGEST]
    body = len(rest) - len(rest.lstrip())
    if not rest[body : body + 1]:
        return None  # nothing said right after the prefix
    words = text[start:colon].split()
    if not 0 < len(words) <= _MOST_WORDS:
        return None
    last = len(words) - 1
    for position, word in enumerate(words):
        if not _name_like(word, inner=0 < position < last):
            return None
        if word.casefold().rstrip(".") in HEADINGS or word.casefold() in HEADINGS:
            return None
    if sum(c.isalpha() for c in "".join(words)) < 2:
        return None
    return SpeakerPrefix(" ".join(words), after + body)


def without_speaker(text: str) -> str:
    """``text`` without its speaker prefix (as it is when it has none).

    >>> without_speaker("see http://example.com")
    'see http://example.com'
    """
    found = speaker_prefix(text)
    return text[found.end :] if found is not None else text
