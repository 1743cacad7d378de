"""What entity memory stores: declared relations and patterns, as records of their scope.

Entities themselves are never stored: they are read from the session's messages again whenever
the session is (`ctxbudget.memory.entities.index`), so deleting a message, a session or a user
deletes them too. What only the API says is stored: a relation (``ContextMemory.relate``) and a
pattern (``ContextMemory.remember_pattern``, its outcomes by ``pattern_result``). Both are
pinned records of their session or user marked ``metadata["_entity"]`` (``"relation"`` or
``"pattern"``), so they live in the partition of their scope, arrive with the session's pins
in the one read a call makes (`ctxbudget.memory.reading.session_state`), go with
`delete_session` and `delete_user`, and are never offered as pinned facts (`split_pins`).

A pattern's success rate is Laplace-smoothed: ``(successes + 1) / (successes + failures + 2)``,
so an untried pattern rates 0.5 and one bad outcome does not bury it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ctxbudget.errors import StoreInputError
from ctxbudget.memory.entities.names import clean_name, entity_key
from ctxbudget.memory.reading.lexical import lexical_terms
from ctxbudget.store.records import Record

__all__ = [
    "ENTITY_MARK",
    "Pattern",
    "Relation",
    "declared_aliases",
    "match_patterns",
    "new_pattern",
    "pattern_of",
    "pattern_record",
    "relation_of",
    "relation_record",
    "split_pins",
]

ENTITY_MARK = "_entity"
"""The metadata key that marks a pinned record as a relation or a pattern."""

_KIND = re.compile(r"^[\w][\w \-]{0,39}$", re.UNICODE)
_MAX_PATTERN_CHARS = 4_000


@dataclass(frozen=True, slots=True)
class Relation:
    """A declared relation: ``a`` is ``kind`` of ``b`` (``kind="alias"``: the same entity)."""

    a: str
    b: str
    kind: str
    id: str


@dataclass(frozen=True, slots=True)
class Pattern:
    """A procedure that worked (or not) when a trigger came up.

    Attributes:
        id: its id in its scope.
        trigger: what the query must be about (matched by its content words).
        procedure: what to do.
        successes: outcomes reported as successes (`ContextMemory.pattern_result`).
        failures: outcomes reported as failures.
    """

    id: str
    trigger: str
    procedure: str
    successes: int = 0
    failures: int = 0

    @property
    def rate(self) -> float:
        """The Laplace-smoothed success rate: ``(successes + 1) / (tries + 2)``.

        >>> Pattern("p", "refund", "check the date", successes=3, failures=1).rate
        0.6666666666666666
        """
        return (self.successes + 1) / (self.successes + self.failures + 2)


def _digest(*parts: str) -> str:
    return hashlib.sha256(json.dumps(parts).encode(errors="surrogatepass")).hexdigest()[:16]


def _scope_meta(session_id: str | None) -> dict[str, str]:
    # "_scope" is what the session's read tells a user-wide pin by (session_state).
    return {"_scope": "session" if session_id is not None else "user"}


def relation_record(
    a: str,
    b: str,
    kind: str,
    *,
    namespace: str,
    session_id: str | None,
    user_id: str | None,
) -> Record:
    """The record of a declared relation (checked; its id follows from its names and kind).

    Raises:
        StoreInputError: a name that is not a name, or a kind that is not a short label.
    """
    names = []
    for label, value in (("a", a), ("b", b)):
        name = clean_name(value)
        if name is None or not entity_key(name):
            msg = (
                f"relate: {label} must be an entity's name (letters, at most 80 characters), "
                f"got {value!r:.80}"
            )
            raise StoreInputError(msg)
        names.append(name)
    if not isinstance(kind, str) or not _KIND.match(kind):
        msg = (
            f"relate: kind must be a short label (a word, up to 40 letters, digits, spaces or "
            f"-), e.g. 'sister of', 'works at' or 'alias'; got {kind!r:.80}"
        )
        raise StoreInputError(msg)
    first, second = names
    ends = sorted((entity_key(first), entity_key(second))) if kind == "alias" else None
    key = ends or [entity_key(first), entity_key(second)]
    return Record(
        id=f"relation:{_digest(*key, kind.casefold())}",
        kind="pinned",
        text=f"{first} ({kind}) {second}",
        namespace=namespace,
        session_id=session_id,
        user_id=user_id,
        metadata={
            **_scope_meta(session_id),
            ENTITY_MARK: "relation",
            "_a": first,
            "_b": second,
            "_kind": kind,
        },
    )


def pattern_record(
    pattern: Pattern, *, namespace: str, session_id: str | None, user_id: str | None
) -> Record:
    """The record of a pattern, with its outcomes so far."""
    return Record(
        id=pattern.id,
        kind="pinned",
        text=f"When {pattern.trigger}: {pattern.procedure}",
        namespace=namespace,
        session_id=session_id,
        user_id=user_id,
        metadata={
            **_scope_meta(session_id),
            ENTITY_MARK: "pattern",
            "_trigger": pattern.trigger,
            "_procedure": pattern.procedure,
            "_ok": pattern.successes,
            "_failed": pattern.failures,
        },
    )


def new_pattern(trigger: object, procedure: object, given_id: str | None) -> Pattern:
    """A new pattern from what `ContextMemory.remember_pattern` got (checked).

    Raises:
        StoreInputError: an empty or overlong trigger or procedure, or a trigger without
            content words.
    """
    when = _pattern_text("trigger", trigger)
    then = _pattern_text("procedure", procedure)
    if not lexical_terms(when):
        msg = (
            f"remember_pattern: trigger {when!r:.80} has no content words to match a query "
            "by; say what the query must be about, e.g. 'refund request'"
        )
        raise StoreInputError(msg)
    return Pattern(given_id or f"pattern:{_digest(when, then)}", when, then)


def _pattern_text(label: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        msg = f"remember_pattern: {label} must be a non-empty str, got {value!r:.80}"
        raise StoreInputError(msg)
    if len(value) > _MAX_PATTERN_CHARS:
        msg = (
            f"remember_pattern: {label} is {len(value):,} characters; the limit is "
            f"{_MAX_PATTERN_CHARS:,}: state it shortly (store long text as a document)"
        )
        raise StoreInputError(msg)
    return value.strip()


def relation_of(record: Record) -> Relation | None:
    """The relation a record holds (None: not a relation record, or unreadable)."""
    meta = record.metadata
    if meta.get(ENTITY_MARK) != "relation":
        return None
    a, b, kind = meta.get("_a"), meta.get("_b"), meta.get("_kind")
    if not (isinstance(a, str) and isinstance(b, str) and isinstance(kind, str)):
        return None
    return Relation(a, b, kind, record.id)


def pattern_of(record: Record) -> Pattern | None:
    """The pattern a record holds (None: not a pattern record, or unreadable)."""
    meta = record.metadata
    if meta.get(ENTITY_MARK) != "pattern":
        return None
    trigger, procedure = meta.get("_trigger"), meta.get("_procedure")
    ok, failed = meta.get("_ok", 0), meta.get("_failed", 0)
    if not (isinstance(trigger, str) and isinstance(procedure, str)):
        return None
    if not (isinstance(ok, int) and isinstance(failed, int)):
        return None
    return Pattern(record.id, trigger, procedure, max(0, ok), max(0, failed))


def declared_aliases(relations: Sequence[Relation]) -> frozenset[tuple[str, str]]:
    """The ``kind="alias"`` relations: pairs of names declared to be one entity."""
    return frozenset(
        (r.a, r.b) for r in relations if r.kind == "alias" and entity_key(r.a) and entity_key(r.b)
    )


def split_pins(
    records: Sequence[Record],
) -> tuple[list[Record], list[Relation], list[tuple[Record, Pattern]]]:
    """A session's pinned records as pinned facts and tasks, relations, and patterns."""
    pins: list[Record] = []
    relations: list[Relation] = []
    patterns: list[tuple[Record, Pattern]] = []
    for record in records:
        mark = record.metadata.get(ENTITY_MARK)
        if mark is None:
            pins.append(record)
        elif (relation := relation_of(record)) is not None:
            relations.append(relation)
        elif (pattern := pattern_of(record)) is not None:
            patterns.append((record, pattern))
    return pins, relations, patterns


def match_patterns(
    patterns: Sequence[tuple[Record, Pattern]], query: str, *, limit: int
) -> list[tuple[Record, Pattern, float]]:
    """The patterns whose trigger the query is about, best first: (record, pattern, score).

    A pattern matches when the query holds at least half of its trigger's content words (the
    share is its match); its score is match x `Pattern.rate`. Ties by id.
    """
    words = set(lexical_terms(query))
    found: list[tuple[Record, Pattern, float]] = []
    for record, pattern in patterns:
        trigger = set(lexical_terms(pattern.trigger))
        if not trigger:
            continue
        share = len(trigger & words) / len(trigger)
        if share >= 0.5:
            found.append((record, pattern, share * pattern.rate))
    found.sort(key=lambda f: (-f[2], f[1].id))
    return found[: max(0, limit)]
