"""`RuleExtractor`: the built-in entity extractor, rules over words (no model, deterministic).

What it finds in a text:

- **names**: runs of capitalized words (``Caroline``, ``Caroline Smith``, ``Bank of America``),
  without the common words that start sentences and greetings (``Hey Mel`` -> ``Mel``;
  `lexicon.COMMON`). A lone capitalized word that only starts a sentence is *weak* evidence
  (kept, never offered on its own as salient) and dropped when it ends like a common noun
  (``Painting``, ``Camping``);
- **titles**: ``Dr. Lee``, ``Aunt May``: a person;
- **possessives**: ``Caroline's dog`` (an entity of its own beside ``Caroline``); ``Caroline's
  been`` is not one;
- **kin and roles**: ``my sister``, ``our dog``, ``my best friend``, named after the speaker
  (``Ana's sister``, or ``user's sister`` for an unnamed user), and tied to a name said with
  them: ``my sister Caroline``, ``Caroline, my sister``, ``my dog named Max``;
- **types** from the words around: ``moved to Lisbon`` and ``Crater Lake`` are places,
  ``works at Acme`` and ``Acme Inc`` organizations, titled and kin names people.

Cost: linear in the text; only the first `MAX_CHARS` characters are read and at most
`MAX_MENTIONS` mentions kept, so hostile input (a megabyte of capitals) costs a bounded time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ctxbudget.memory.entities.lexicon import (
    AUTHORED,
    COMMON,
    CONNECTORS,
    GREETINGS,
    GROUPS,
    KIN,
    MODIFIERS,
    NOT_POSSESSED,
    ORG_CUES,
    ORG_WORDS,
    PERSON_CUES,
    PETS,
    PLACE_CUES,
    PLACE_WORDS,
    ROLES,
    TALKED,
    TITLES,
    WEAK_SUFFIXES,
)
from ctxbudget.memory.entities.names import (
    MAX_MENTIONS,
    WORD,
    Mention,
    clean_name,
    entity_key,
)

__all__ = ["MAX_CHARS", "MAX_MENTIONS", "RuleExtractor"]

MAX_CHARS = 20_000
"""Only this many characters of a text are read for entities."""


_BREAKS = frozenset('.!?\n\r;:"\u201c\u201d()[]{}<>|*#`\u2026\u2022=/\\')
_MOVES = frozenset(
    "moved move moving trip flew fly flying travel traveled travelled went going go back "
    "drove drive driving relocated headed".split()
)
_WORKS = frozenset(
    "work works worked working job intern internship employed volunteer volunteering".split()
)
_NAMING = frozenset({"named", "called"})
_OWNERS = frozenset({"my", "our"})


@dataclass(slots=True)
class _Token:
    start: int
    end: int
    word: str  # without a possessive
    possessive: bool
    boundary: bool  # starts a sentence (or follows a break)
    gap: str  # the text between the previous token and this one

    @property
    def capital(self) -> bool:
        return self.word[:1].isupper()

    @property
    def folded(self) -> str:
        return self.word.casefold().rstrip(".")

    @property
    def common(self) -> bool:
        # "How're", "Don't": a common word with a contraction is still a common word.
        folded = self.folded
        return folded in COMMON or folded.split("'", 1)[0] in COMMON


def _tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    previous = 0
    for match in WORD.finditer(text):
        word = match.group().replace("\u2019", "'")
        possessive = False
        if word.endswith("'s") and len(word) > 2:
            word, possessive = word[:-2], True
        elif word.endswith("'"):
            word = word.rstrip("'")
            possessive = word[-1:].lower() == "s"  # "the Smiths'"
        word = word.rstrip("-")
        if not word:
            previous = match.end()
            continue
        gap = text[previous : match.start()]
        boundary = not out or any(c in _BREAKS for c in gap)
        if boundary and out and out[-1].folded in TITLES and gap.strip() in ("", "."):
            boundary = False  # "Dr. Lee": the dot ends a title, not a sentence
        out.append(_Token(match.start(), match.end(), word, possessive, boundary, gap))
        previous = match.end()
    return out


def _joins(token: _Token, before: _Token) -> bool:
    """Whether ``token`` continues a name that ``before`` is part of."""
    if before.possessive:
        # "St. Mary's Hospital": a possessive inside a name, before a place or an org word.
        return token.gap == " " and (token.folded in PLACE_WORDS or token.folded in ORG_WORDS)
    if before.folded in TITLES and token.gap.strip() in ("", "."):
        return "\n" not in token.gap
    return token.gap in (" ", "\u00a0")


class RuleExtractor:
    """The built-in `EntityExtractor`: names, titles, possessives and kin by rules.

    Deterministic: the same text and speaker always give the same mentions. Speakers name the
    owner of ``my``/``our`` phrases (``"user"`` when None).

    >>> found = RuleExtractor().mentions("My sister Caroline moved to Lisbon.", "Ana")
    >>> found[1].name, found[1].type, found[1].alias
    ('Caroline', 'person', "Ana's sister")
    >>> found[2].name, found[2].type
    ('Lisbon', 'place')
    """

    def extract(
        self, texts: Sequence[str], *, speakers: Sequence[str | None]
    ) -> list[list[Mention]]:
        """The mentions of each text (see the module docstring), in the order of ``texts``."""
        return [
            self.mentions(text, speaker)
            for text, speaker in zip(texts, list(speakers) + [None] * len(texts), strict=False)
        ]

    def mentions(self, text: str, speaker: str | None = None) -> list[Mention]:
        """The mentions of one text, in the order they occur (each entity once)."""
        if not isinstance(text, str) or not text.strip():
            return []
        text = text[:MAX_CHARS]
        tokens = _tokens(text)
        letters = [c for c in text if c.isalpha()]
        shouting = len(letters) > 20 and sum(c.isupper() for c in letters) > 0.6 * len(letters)
        owner = clean_name(speaker) if speaker else None
        owner = owner or "user"
        found: list[Mention] = []
        roles = _role_phrases(tokens, owner)
        position = 0
        while position < len(tokens) and len(found) < MAX_MENTIONS:
            if position in roles:
                phrase, kind, after = roles[position]
                found.append(Mention(phrase, kind))
                named = None
                if (
                    after < len(tokens)
                    and tokens[after].gap in (" ", ", ")
                    and phrase.rsplit(" ", 1)[-1] not in GROUPS
                ):
                    named = _name_at(tokens, after, text, shouting)
                if named is not None:  # "my sister Caroline", "my dog named Max"
                    name, _, _, end = named
                    found.append(Mention(name, kind, alias=phrase))
                    position = end
                    continue
                position = after
                continue
            named = _name_at(tokens, position, text, shouting)
            if named is None:
                position += 1
                continue
            name, kind, last, end = named
            alias = None
            ahead = roles.get(end)
            if ahead is not None and _apposition(tokens, end, ahead):  # "Caroline, my sister,"
                alias, kind = ahead[0], ahead[1]
            found.append(Mention(name, kind, alias=alias, weak=_weak(tokens, position, end)))
            if tokens[last - 1].possessive:
                weak = found[-1].weak
                found.extend(
                    Mention(m.name, m.type, m.alias, weak) for m in _possessed(tokens, last, name)
                )
            position = end
        return _unique(found)[:MAX_MENTIONS]


def _role_phrases(tokens: list[_Token], owner: str) -> dict[int, tuple[str, str, int]]:
    """``my sister`` phrases by the position of ``my``: (phrase, type, the position after)."""
    out: dict[int, tuple[str, str, int]] = {}
    for position, token in enumerate(tokens):
        if token.folded not in _OWNERS:
            continue
        at = position + 1
        if at < len(tokens) and tokens[at].folded in MODIFIERS and at + 1 < len(tokens):
            at += 1
        if at >= len(tokens) or tokens[at].boundary:
            continue
        noun = tokens[at].word.casefold()
        if noun in KIN or noun in ROLES:
            kind = "person"
        elif noun in PETS:
            kind = "other"
        else:
            continue
        out[position] = (f"{owner}'s {noun}", kind, at + 1)
    return out


def _apposition(tokens: list[_Token], at: int, role: tuple[str, str, int]) -> bool:
    """``Caroline, my sister, ...``: a role set off by commas after a name (not a group)."""
    phrase, _, after = role
    if tokens[at].gap.strip() != "," or phrase.rsplit(" ", 1)[-1] in GROUPS:
        return False
    return after >= len(tokens) or tokens[after].gap.strip()[:1] in (",", ".", ";", "!", "?")


def _name_at(
    tokens: list[_Token], start: int, text: str, shouting: bool
) -> tuple[str, str, int, int] | None:
    """The name at ``start`` (``named``/``called`` may come first).

    Returns its name, its type, where it ends and where the capitalized run it was cut from
    ends; None when no name starts there.
    """
    if start < len(tokens) and tokens[start].folded in _NAMING and start + 1 < len(tokens):
        start += 1
    if start >= len(tokens) or not tokens[start].capital:
        return None
    end = start + 1
    while end < len(tokens):
        token = tokens[end]
        if token.capital and _joins(token, tokens[end - 1]):
            end += 1
        elif token.word in CONNECTORS and _joins(token, tokens[end - 1]):
            # "Bank of America", "Lord of the Rings": connectors, then a capitalized word.
            after = end + 1
            if after < len(tokens) and tokens[after].word in CONNECTORS:
                after += 1
            if (
                after < len(tokens)
                and tokens[after].capital
                and all(_joins(tokens[p], tokens[p - 1]) for p in range(end + 1, after + 1))
            ):
                end = after + 1
            else:
                break
        else:
            break
    first, last = start, end
    if shouting and all(t.word.isupper() for t in tokens[start:end]):
        return None  # shouted words, not names
    # Drop what starts a sentence or greets ("Hey Mel", "Thanks, Caroline"), not "The Who".
    while first < last and tokens[first].common:
        if not (tokens[first].boundary or first > start or tokens[first].folded in GREETINGS):
            break
        first += 1
    titled = first < last and tokens[first].folded in TITLES and last - first > 1
    if not titled and all(t.common for t in tokens[first:last]):
        return None
    while last > first and (tokens[last - 1].common or tokens[last - 1].word in CONNECTORS):
        if titled and last - first <= 2:
            break
        last -= 1
    if first == last:
        return None
    words = tokens[first:last]
    if len(words) == 1 and words[0].word.isupper() and (shouting or len(words[0].word) > 6):
        return None  # shouting, not an acronym
    if len(words) == 1 and words[0].boundary and words[0].word.casefold().endswith(WEAK_SUFFIXES):
        return None  # "Painting's a fun way": a noun that starts a sentence
    name = clean_name(text[words[0].start : words[-1].start] + words[-1].word)
    if name is None or not entity_key(name):
        return None
    return name, _type_of(tokens, first, last, titled), last, end


def _type_of(tokens: list[_Token], first: int, last: int, titled: bool) -> str:
    tail = tokens[last - 1].folded
    if tail in PLACE_WORDS and last - first > 1:
        return "place"
    if tail in ORG_WORDS and last - first > 1:
        return "org"
    if titled:
        return "person"
    # Only a word right before the name is a cue ("in 2019 Caroline moved" has none).
    adjacent = first > 0 and not tokens[first].boundary and not tokens[first].gap.strip()
    cue = tokens[first - 1].folded if adjacent else ""
    joined = cue and first > 1 and not tokens[first - 1].gap.strip()
    before = tokens[first - 2].folded if joined else ""
    if cue in PLACE_CUES or (cue == "to" and before in _MOVES):
        return "place"
    if cue in ORG_CUES or (cue in ("at", "for") and before in _WORKS):
        return "org"
    if cue in PERSON_CUES or (cue == "by" and before in AUTHORED):
        return "person"
    if cue in ("with", "to") and before in TALKED:
        return "person"
    return "other"


def _weak(tokens: list[_Token], start: int, end: int) -> bool:
    """A single word at a sentence start (after the common words dropped before it)."""
    words = [t for t in tokens[start:end] if not t.common]
    return len(words) == 1 and words[0].boundary


def _possessed(tokens: list[_Token], at: int, owner: str) -> list[Mention]:
    """``Caroline's dog``: the entity a possessive names (and ``Caroline's dog Max``)."""
    if at < len(tokens) and tokens[at].folded in MODIFIERS and at + 1 < len(tokens):
        at += 1
    if at >= len(tokens) or tokens[at].capital or tokens[at].boundary:
        return []
    noun = tokens[at].word.casefold()
    if noun in NOT_POSSESSED or noun in COMMON or noun.endswith("ly") or len(noun) < 3:
        return []
    kind = "person" if noun in KIN or noun in ROLES else "other"
    phrase = f"{owner}'s {noun}"
    out = [Mention(phrase, kind)]
    after = at + 1
    if (
        noun not in GROUPS
        and after < len(tokens)
        and tokens[after].capital
        and tokens[after].gap in (" ", ", ")
    ):
        name = clean_name(tokens[after].word)
        if name is not None and not tokens[after].common:
            out.append(Mention(name, kind, alias=phrase))
    return out


def _unique(found: list[Mention]) -> list[Mention]:
    """Each entity once: the first mention, with the best type and any alias seen."""
    by_key: dict[str, Mention] = {}
    for mention in found:
        key = entity_key(mention.name)
        if not key:
            continue
        known = by_key.get(key)
        if known is None:
            by_key[key] = mention
            continue
        by_key[key] = Mention(
            known.name,
            known.type if known.type != "other" else mention.type,
            known.alias or mention.alias,
            known.weak and mention.weak,
        )
    return list(by_key.values())
