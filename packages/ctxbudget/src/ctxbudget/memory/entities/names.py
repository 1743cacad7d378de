"""What an entity extractor returns (`Mention`), the `EntityExtractor` seam, and entity keys.

An extractor reads message texts and returns, for each, the entities it mentions. The built-in
one is `ctxbudget.memory.entities.rules.RuleExtractor` (rules, no model, deterministic); any
object with the same ``extract`` method can replace it (``ContextMemory(entity_extractor=...)``):
an LLM (the adapters' ``LLMEntityExtractor``), spaCy, a lookup table. It may return plain names
(``"Caroline"``) or `Mention` s.

Every name is compared by its `entity_key`: case-folded, NFKC-normalized, a trailing possessive
and leading titles removed (``"Dr. Caroline Smith's"`` -> ``"caroline smith"``). Names shown to
a model go through `clean_name` first, so an extractor cannot smuggle markup or line breaks into
a card.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ctxbudget.errors import ConfigurationError
from ctxbudget.memory.entities.lexicon import TITLES

if TYPE_CHECKING:
    from ctxbudget.memory.policy.config import MemoryConfig

__all__ = [
    "ENTITY_TYPES",
    "MAX_MENTIONS",
    "MAX_NAME_CHARS",
    "WORD",
    "EntityExtractor",
    "Mention",
    "as_mentions",
    "check_entity_settings",
    "clean_name",
    "entity_key",
    "query_words",
]

ENTITY_TYPES = ("person", "place", "org", "other")
"""The types an entity may have; ``"other"`` also stands for "not known"."""

MAX_NAME_CHARS = 80
"""Longer names are not names (an extractor's runaway output): they are dropped."""

MAX_MENTIONS = 48
"""At most this many mentions are kept per text (the first ones), whatever the extractor."""

WORD = re.compile(r"[^\W\d_][\w'\u2019\-]*", re.UNICODE)
"""A word as names are read: a letter, then letters, digits, apostrophes and hyphens."""

_KEY_WORD = re.compile(r"[^\W_][\w'\-]*", re.UNICODE)
_UNSAFE = re.compile(r"[^\w '\-.&]", re.UNICODE)
_SPACE = re.compile(r"\s+")
_TAG = re.compile(r"<[^<>]{0,200}>")


@dataclass(frozen=True, slots=True)
class Mention:
    """An entity one text mentions.

    Attributes:
        name: the name as written (``"Caroline"``, ``"Dr. Lee"``), or a phrase that names
            someone by their relation to a named one (``"Caroline's sister"``; a speaker's
            ``"my sister"`` is written with the speaker's name).
        type: ``"person"``, ``"place"``, ``"org"`` or ``"other"`` (not known).
        alias: another name of the same entity said with it (``"my sister Caroline"``:
            ``name="Caroline", alias="Ana's sister"``); merged when that alias names no one else.
        weak: only evidence is a capitalized word at the start of a sentence: kept, and found
            when a query names it, but never offered as a salient entity on its own.

    >>> Mention("Caroline", "person").type
    'person'
    """

    name: str
    type: str = "other"
    alias: str | None = None
    weak: bool = False


@runtime_checkable
class EntityExtractor(Protocol):
    """Finds the entities texts mention: the seam `ContextMemory(entity_extractor=...)` takes.

    ``extract`` gets several texts at once (a model can take them in one call) and the speaker
    of each (a name, a role such as ``"user"``, or None), and returns one list per text, in
    order: `Mention` s or plain names. It must not raise on any text (empty, huge, markup):
    return no mentions instead.
    """

    def extract(
        self, texts: Sequence[str], *, speakers: Sequence[str | None]
    ) -> Sequence[Sequence[Mention | str]]:
        """The mentions of each text, in the order of ``texts``."""
        ...


def clean_name(name: object) -> str | None:
    r"""A name safe to show and compare, or None when it is not a usable name.

    Markup tags and characters other than letters, digits, spaces and ``'-.&`` become spaces
    (no markup, no line breaks), whitespace is collapsed; None when nothing with a letter is
    left or it is longer than `MAX_NAME_CHARS`.

    >>> clean_name("  <b>Caroline</b>\n")
    'Caroline'
    >>> clean_name("Dr. Lee"), clean_name("123")
    ('Dr. Lee', None)
    """
    if not isinstance(name, str):
        return None
    text = unicodedata.normalize("NFKC", name[: 4 * MAX_NAME_CHARS]).replace("\u2019", "'")
    text = _UNSAFE.sub(" ", _TAG.sub(" ", text))
    text = _SPACE.sub(" ", text).strip(" '-.&")
    if not text or len(text) > MAX_NAME_CHARS or not any(c.isalpha() for c in text):
        return None
    return text


def entity_key(name: str) -> str:
    """The key names are compared by: case-folded words, no trailing possessive, no title.

    >>> entity_key("Dr. Caroline  Smith's")
    'caroline smith'
    >>> entity_key("Ana's sister")
    "ana's sister"
    """
    text = unicodedata.normalize("NFKC", name).replace("\u2019", "'").casefold()
    words = _KEY_WORD.findall(text)
    if words:
        last = words[-1]
        if last.endswith("'s") and len(last) > 2:
            words[-1] = last[:-2]
        words[-1] = words[-1].rstrip("'")
    words = [w for w in words if w]
    while len(words) > 1 and words[0].rstrip(".") in TITLES:
        words = words[1:]
    return " ".join(words)


def as_mentions(found: object, count: int, where: str) -> list[list[Mention]]:
    """An extractor's answer as ``count`` lists of clean `Mention` s (at most `MAX_MENTIONS`).

    Raises:
        ConfigurationError: the answer is not one list per text.
    """
    if isinstance(found, str | bytes) or not isinstance(found, Sequence) or len(found) != count:
        got = len(found) if isinstance(found, Sequence) else type(found).__name__
        msg = (
            f"{where}.extract must return one list of mentions per text: {count} lists, got "
            f"{got!r:.40}; return [] for a text that mentions no one"
        )
        raise ConfigurationError(msg)
    out: list[list[Mention]] = []
    for mentions in found:
        clean: list[Mention] = []
        if isinstance(mentions, Sequence) and not isinstance(mentions, str | bytes):
            for mention in mentions:
                if isinstance(mention, str):
                    mention = Mention(mention)
                if not isinstance(mention, Mention):
                    continue
                name = clean_name(mention.name)
                if name is None or not entity_key(name):
                    continue
                alias = clean_name(mention.alias) if mention.alias is not None else None
                kind = mention.type if mention.type in ENTITY_TYPES else "other"
                clean.append(Mention(name, kind, alias, bool(mention.weak)))
                if len(clean) >= MAX_MENTIONS:
                    break
        out.append(clean)
    return out


def check_entity_settings(config: MemoryConfig) -> None:
    """Check `MemoryConfig`'s entity settings (``entity_types`` becomes a sorted tuple).

    Raises:
        ConfigurationError: a negative count or an unknown type.
    """
    for name in ("entity_depth", "entity_cards", "entity_turns"):
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            msg = f"MemoryConfig.{name} must be an int >= 0, got {value!r}"
            raise ConfigurationError(msg)
    types: object = config.entity_types
    if isinstance(types, str):
        types = (types,)
    if not isinstance(types, Sequence | set | frozenset):
        msg = f"MemoryConfig.entity_types must be a list of types, got {types!r:.80}"
        raise ConfigurationError(msg)
    unknown = [t for t in types if t not in ENTITY_TYPES]
    if unknown:
        msg = (
            f"MemoryConfig.entity_types: unknown types {unknown!r:.80}; use some of "
            f"{list(ENTITY_TYPES)} (empty: every type)"
        )
        raise ConfigurationError(msg)
    object.__setattr__(config, "entity_types", tuple(sorted(set(types))))


def query_words(query: str) -> list[str]:
    """The words of a query (its first 2,000 characters) as names are looked up in it."""
    return [m.group().replace("\u2019", "'") for m in WORD.finditer(query[:2_000])]
