"""What the assembler packs: `ContextItem`, its `Tier` and how it may `Shrink`."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum
from numbers import Real
from typing import Any

from ctxbudget.core.ids import SCOPE_KINDS, ItemRef, is_internal
from ctxbudget.core.numbers import count, real
from ctxbudget.errors import InvalidItemError
from ctxbudget.tokens.images import IMAGE_PARTS, TEXT_PARTS

__all__ = [
    "CUTTING_SHRINKS",
    "NEVER_PRUNED_TIERS",
    "ROLES",
    "ContextItem",
    "Shrink",
    "Tier",
    "is_plain",
    "tier_name",
]

ROLES = frozenset({"system", "user", "assistant", "tool"})


class Tier(IntEnum):
    """Priority tiers, highest first: a lower number is more important.

    Any integer is a valid tier too (``tier=55`` sits between ``RETRIEVED`` and ``ENTITY``).
    ``SYSTEM`` and ``QUERY`` are never pruned. ``FILES`` holds the files and folder trees a
    user put in front of the assistant (`ctxbudget.sources`): just below the query, above
    pinned facts, rendered in a section of their own under each file's path. ``SAVED`` holds
    the keyed values an app or agent saved (`ContextMemory.put_value`) offered for the query.

    >>> Tier.PINNED < Tier.RETRIEVED
    True
    """

    SYSTEM = 0
    QUERY = 10
    FILES = 15
    PINNED = 20
    TOOLS = 30
    RECENT = 40
    SAVED = 45
    RETRIEVED = 50
    ENTITY = 60
    SUMMARY = 70
    OLD = 80


NEVER_PRUNED_TIERS = frozenset({int(Tier.SYSTEM), int(Tier.QUERY)})


def tier_name(tier: int) -> str:
    """A tier's display name: ``"RECENT"`` for 40, ``"tier 55"`` for a custom one."""
    try:
        return Tier(tier).name
    except ValueError:
        return f"tier {tier}"


class Shrink(StrEnum):
    """How an item may shrink when it does not fit."""

    NEVER = "never"
    """Never pruned or shortened; if it cannot fit, assembly raises `BudgetExceededError`."""
    DROP = "drop"
    """Kept whole or dropped whole (the default)."""
    TRUNCATE = "truncate"
    """May be cut at a sentence boundary to use the space left."""
    SUMMARIZE = "summarize"
    """May be replaced by a summary (an existing one that covers it, or one made on the fly)."""
    LINES = "lines"
    """May be cut at line boundaries: its first whole lines, then a marker naming the lines
    left out (``… [142 lines elided: 88-229] …``); see `ctxbudget.core.lines`."""
    LINES_HEAD_TAIL = "lines_head_tail"
    """Like ``LINES``, keeping its last whole lines too: the marker stands for the middle."""

    @property
    def cuts(self) -> bool:
        """Whether an item may be cut to the room left (``TRUNCATE``, ``LINES``...)."""
        return self in CUTTING_SHRINKS


CUTTING_SHRINKS = frozenset({Shrink.TRUNCATE, Shrink.LINES, Shrink.LINES_HEAD_TAIL})
"""The shrink modes that cut an item's text to fit (rather than drop or summarize it)."""


@dataclass(frozen=True, slots=True)
class ContextItem:
    """One piece of context: a message, a fact, a tool schema, a document chunk, a summary.

    Args:
        id: unique identifier; it comes back in `AssembledContext.included`.
        text: the content as the model should see it.
        tier: priority tier (a `Tier` or any int; lower is more important).
        score: value within the tier (higher is better); packing maximizes the total.
        role: chat role for history items (``system``, ``user``, ``assistant``, ``tool``).
        timestamp: seconds since the epoch, shown in the compact format.
        cluster_id: groups items a single summary may replace.
        summary_of: for a summary, the ids of the items it covers.
        source: where the item came from (``"history"``, ``"memory"``, ``"kb"``...).
        metadata: anything else; not rendered.
        shrink: how the item may shrink when space is short.
        tool_calls: for an assistant message, the ids of the tool calls it makes.
        tool_call_id: for a tool result, the id of the call it answers.
        name: optional author name of a message (counted as the provider bills it); for an
            item of the ``FILES`` tier, the file's path, shown as the header of its content.
        embedding: optional vector, used to drop near duplicates.
        tokens: a known token count of ``text`` for the assembler's encoding (a hint that saves
            tokenizing; the rendered output is always counted exactly).
        parts: for a multimodal message, its content as sent: str or text parts
            (``{"type": "text", "text": ...}``, also ``input_text``/``output_text``) and images
            (``image_url``, ``image``, ``input_image``); ``text`` is then the text of its text
            parts. As a history message or the query of the ``messages`` format it is sent as
            these parts and counted part by part (images by `image_tokens`); elsewhere (and in
            the text formats) ``text`` is rendered with an ``[image]`` mark per image.
        record_id: for an item built from a stored record, the record's own id, as its caller
            gave it (``"guide#0"``); None for an item given directly, whose ``id`` is the
            caller's.
        scope: with ``record_id``, where that id is unique: ``("session", id)``,
            ``("user", id)`` or ``("collection", name)``. Record ids are unique per scope
            only, so an item built from another scope's record has an ``id`` of its own (see
            `ctxbudget.core.ids`); ``ref`` gives the caller's id and scope together.
        newer: ids of later items that restate what this one says (a fact that changed): when
            this item is included, they are too, or it is left out (`ctxbudget.core.newer`);
            its row is marked ``[earlier; see newer]``.

    >>> ContextItem(id="m1", text="I moved to Lisbon", tier=Tier.RECENT, role="user").tier.name
    'RECENT'
    """

    id: str
    text: str
    tier: int = Tier.RETRIEVED
    score: float = 1.0
    role: str | None = None
    timestamp: float | None = None
    cluster_id: str | None = None
    summary_of: tuple[str, ...] = ()
    source: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict, compare=False)
    shrink: Shrink = Shrink.DROP
    tool_calls: tuple[str, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    embedding: Sequence[float] | None = field(default=None, compare=False, repr=False)
    tokens: int | None = field(default=None, compare=False, repr=False)
    parts: tuple[Any, ...] | None = field(default=None, repr=False)
    record_id: str | None = None
    scope: tuple[str, str] | None = None
    newer: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if is_plain(self):  # the usual case (every item retrieval builds), at a tenth of the cost
            return
        if not isinstance(self.id, str) or not self.id:
            msg = f"ContextItem.id must be a non-empty string, got {self.id!r}"
            raise InvalidItemError(msg)
        if not isinstance(self.text, str):
            msg = (
                f"ContextItem {self.id!r}: text must be a str, got {type(self.text).__name__}; "
                "convert it (multimodal parts: join their text parts) before packing"
            )
            raise InvalidItemError(msg)
        # Numbers pass the one boundary (numpy's too: a reranker's float32 score, an int64 tier).
        where = f"ContextItem {self.id!r}:"
        if isinstance(self.tier, bool) or not isinstance(self.tier, int):
            tier = count(self.tier, f"{where} tier", least=None, error=InvalidItemError)
            object.__setattr__(self, "tier", tier)
        score = real(self.score, f"{where} score", error=InvalidItemError)
        if not isinstance(self.score, int | float):
            object.__setattr__(self, "score", score)
        timestamp: object = self.timestamp
        if isinstance(timestamp, Real) and not isinstance(timestamp, bool | int | float):
            # numpy's numbers (a float32 from a dataframe, an int64) as the float they hold
            timestamp = float(timestamp)
            object.__setattr__(self, "timestamp", timestamp)
        if timestamp is not None and (
            isinstance(timestamp, bool)
            or not isinstance(timestamp, (int, float))
            or not _finite(timestamp)
        ):
            msg = (
                f"ContextItem {self.id!r}: timestamp must be seconds since the epoch (a finite "
                f"number) or None, got {timestamp!r:.80}"
            )
            raise InvalidItemError(msg)
        if self.role is not None and (not isinstance(self.role, str) or self.role not in ROLES):
            msg = f"ContextItem {self.id!r}: role must be one of {sorted(ROLES)}, got {self.role!r}"
            raise InvalidItemError(msg)
        if self.tokens is not None and (type(self.tokens) is not int or self.tokens < 0):
            # A bool is not a count (True would be taken as 1 token); numpy's ints are.
            tokens = count(self.tokens, f"{where} tokens", least=0, error=InvalidItemError)
            object.__setattr__(self, "tokens", tokens)
        if not isinstance(self.shrink, Shrink):
            try:
                object.__setattr__(self, "shrink", Shrink(self.shrink))
            except ValueError as exc:
                allowed = [s.value for s in Shrink]
                msg = (
                    f"ContextItem {self.id!r}: shrink must be one of {allowed}, got {self.shrink!r}"
                )
                raise InvalidItemError(msg) from exc
        _check_fields(self)
        if self.tool_calls and self.role not in _CALLERS:  # no provider takes them elsewhere
            msg = (
                f"ContextItem {self.id!r}: only an assistant item calls tools, got tool_calls "
                f"on a {self.role} item; give the calls to the assistant's turn"
            )
            raise InvalidItemError(msg)
        if self.parts is not None:
            object.__setattr__(self, "parts", _checked_parts(self.id, self.parts))

    def __hash__(self) -> int:
        return hash((self.id, self.tier, self.text))

    @property
    def images(self) -> int:
        """How many images ``parts`` holds."""
        if self.parts is None:
            return 0
        return sum(1 for p in self.parts if isinstance(p, Mapping) and p["type"] in IMAGE_PARTS)

    @property
    def ref(self) -> ItemRef | None:
        """The item as its caller knows it (its own id and scope); None for ctxbudget's own.

        >>> ContextItem("x", "t", record_id="guide#0", scope=("collection", "kb")).ref
        ItemRef(id='guide#0', scope=('collection', 'kb'))
        """
        if self.record_id is not None:
            return ItemRef(self.record_id, self.scope)
        return None if is_internal(self.id) else ItemRef(self.id)

    @property
    def label(self) -> str:
        """How reports name the item: ``guide#0 (collection kb)``, else its id."""
        ref = self.ref
        return self.id if ref is None else str(ref)

    @property
    def never_pruned(self) -> bool:
        """Whether packing must keep this item (system, current query, or ``shrink="never"``)."""
        return self.shrink is Shrink.NEVER or self.tier in NEVER_PRUNED_TIERS


_OPTIONAL_STR = frozenset({str, type(None)})
_CALLERS = frozenset({"assistant", None})  # the roles an item with tool calls may have
_TIER = frozenset({int, Tier})


def _finite(number: float) -> bool:
    """Whether ``number`` is a finite float, or an int a float can hold (10**400 is not)."""
    try:
        return math.isfinite(number)
    except OverflowError:
        return False


def is_plain(item: ContextItem) -> bool:
    """Whether every field has its exact plain type and a valid value: nothing to convert.

    Anything else takes the full checks, which accept the same values (tests/reliability).
    """
    scope = item.scope
    timestamp = item.timestamp
    tokens = item.tokens
    return (
        type(item.id) is str
        and item.id != ""
        and type(item.text) is str
        and type(item.tier) in _TIER
        and type(item.score) is float  # an int may be too large for a float
        and math.isfinite(item.score)
        and (timestamp is None or (type(timestamp) is float and math.isfinite(timestamp)))
        and (item.role is None or (type(item.role) is str and item.role in ROLES))
        and (tokens is None or (type(tokens) is int and tokens >= 0))
        and type(item.shrink) is Shrink
        and item.parts is None
        and item.embedding is None
        and type(item.metadata) is dict
        and type(item.cluster_id) in _OPTIONAL_STR
        and type(item.source) in _OPTIONAL_STR
        and type(item.tool_call_id) in _OPTIONAL_STR
        and type(item.name) in _OPTIONAL_STR
        and type(item.summary_of) is tuple
        and type(item.tool_calls) is tuple
        and type(item.newer) is tuple
        and (not item.newer or all(type(v) is str for v in item.newer))
        and (not item.summary_of or all(type(v) is str for v in item.summary_of))
        and (
            not item.tool_calls
            or (item.role in _CALLERS and all(type(v) is str for v in item.tool_calls))
        )
        and (
            (item.record_id is None and scope is None)
            or (
                type(item.record_id) is str
                and type(scope) is tuple
                and len(scope) == 2
                and scope[0] in SCOPE_KINDS
                and type(scope[1]) is str
            )
        )
    )


def _check_fields(item: ContextItem) -> None:
    """The optional fields: ids and names are str, vectors numbers, metadata a mapping."""
    for name in ("cluster_id", "source", "tool_call_id", "name", "record_id"):
        value = getattr(item, name)
        if value is not None and not isinstance(value, str):
            msg = f"ContextItem {item.id!r}: {name} must be a str or None, got {value!r:.80}"
            raise InvalidItemError(msg)
    _check_scope(item)
    for name in ("summary_of", "tool_calls", "newer"):
        value = getattr(item, name)
        if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
            msg = f"ContextItem {item.id!r}: {name} must be a list of str ids, got {value!r:.80}"
            raise InvalidItemError(msg)
        ids = tuple(value)
        if not all(isinstance(v, str) for v in ids):
            msg = f"ContextItem {item.id!r}: {name} must be a list of str ids, got {ids!r:.80}"
            raise InvalidItemError(msg)
        object.__setattr__(item, name, ids)
    if type(item.metadata) is not dict and not isinstance(item.metadata, Mapping):
        msg = f"ContextItem {item.id!r}: metadata must be a mapping, got {item.metadata!r:.80}"
        raise InvalidItemError(msg)
    vector: object = item.embedding
    if vector is not None and (
        isinstance(vector, str | bytes | Mapping)
        or not isinstance(vector, Iterable)
        or not all(isinstance(x, Real) and not isinstance(x, bool) for x in vector)
    ):
        msg = f"ContextItem {item.id!r}: embedding must be a list of numbers, got {vector!r:.80}"
        raise InvalidItemError(msg)


def _check_scope(item: ContextItem) -> None:
    scope: object = item.scope
    if scope is None:
        return
    if (
        not isinstance(scope, tuple | list)
        or len(scope) != 2
        or scope[0] not in SCOPE_KINDS
        or not isinstance(scope[1], str)
        or item.record_id is None
    ):
        msg = (
            f"ContextItem {item.id!r}: scope must be (kind, name) with kind one of "
            f"{list(SCOPE_KINDS)}, given with record_id; got {scope!r:.80}"
        )
        raise InvalidItemError(msg)
    object.__setattr__(item, "scope", (scope[0], scope[1]))


def _checked_parts(item_id: str, parts: object) -> tuple[Any, ...]:
    """Content parts as a tuple, each a str, a text part or an image part."""
    if isinstance(parts, str | bytes | Mapping) or not isinstance(parts, Sequence):
        msg = f"ContextItem {item_id!r}: parts must be a list of content parts, got {parts!r:.80}"
        raise InvalidItemError(msg)
    for index, part in enumerate(parts):
        if isinstance(part, str):
            continue
        raw = part.get("type") if isinstance(part, Mapping) else None
        kind = raw if isinstance(raw, str) else None  # unhashable types stay out of the sets
        if kind in TEXT_PARTS and isinstance(part.get("text"), str):
            continue
        if kind in IMAGE_PARTS:
            continue
        got = f"type {raw!r:.40}" if isinstance(part, Mapping) else type(part).__name__
        msg = (
            f"ContextItem {item_id!r}: content part {index} ({got}) is neither text (a str or "
            f"{{'type': 'text', 'text': str}}) nor an image ({', '.join(sorted(IMAGE_PARTS))}); "
            "convert it to text or leave it out"
        )
        raise InvalidItemError(msg)
    return tuple(parts)
