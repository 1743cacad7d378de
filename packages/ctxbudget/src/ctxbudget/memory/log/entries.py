"""What the inclusion log keeps of one assembly: `ContextRecord`, and how it is stored.

A record names what an assembly offered and what became of it, by id, never by content: the
items included (with their tier, tokens and score), the items pruned (with their tier, score,
the `PruneReason` and its detail), each tier's figures with its floor and cap, the budget, the
model and format, or the `BudgetExceededError` that stopped it. Only when asked
(`InclusionLogConfig.keep_context`) does it also hold content: the query's text and the
rendered context as sent. `ContextMemory.contexts` reads them back;
`ctxbudget.memory.log.analytics` sums them up.

The tokens of an included item are those of its text (the item's own ``tokens`` hint, or the
model's counter): the row it is rendered in adds a label, a date line or a message overhead,
which the tier's ``tokens`` (the figure the assembly reports) include.

Stored as compact JSON (``"v": 1``); `decode_record` refuses anything else with a `StoreError`,
so a reader can skip a record it cannot read instead of failing. Scores, details, query and
context are keys of their own (``isc``, ``csc``, ``cdet``, ``q``, ``ctx``): an older record
reads with None there ("not logged"), and an older reader ignores them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxbudget.core.budget import Budget
from ctxbudget.core.ids import ItemRef, is_internal, ref_of_id
from ctxbudget.core.items import ContextItem, tier_name
from ctxbudget.core.report import PrunedItem, TierUsage
from ctxbudget.errors import StoreError
from ctxbudget.tokens.counter import TokenCounter

__all__ = [
    "DETAIL_LIMIT",
    "LOG_VERSION",
    "ContextRecord",
    "IncludedEntry",
    "PrunedEntry",
    "TierEntry",
    "decode_record",
    "encode_record",
    "error_record",
    "success_record",
]

LOG_VERSION = 1
"""The version of the stored JSON document of a `ContextRecord`."""

DETAIL_LIMIT = 200
"""The most characters of a prune detail kept (a longer one is cut, ending with "...")."""


@dataclass(frozen=True, slots=True)
class IncludedEntry:
    """An item an assembly included: its id, tier, tokens of its text, score (None: not logged)."""

    id: str
    tier: int
    tokens: int
    score: float | None = None


@dataclass(frozen=True, slots=True)
class PrunedEntry:
    """An item an assembly left out: its id, tier, why (a `PruneReason` value) and score.

    ``detail``: the reason's detail, at most `DETAIL_LIMIT` characters. ``score`` and
    ``detail`` are None in a record written before they were logged.
    """

    id: str
    tier: int
    reason: str
    score: float | None = None
    detail: str | None = None


@dataclass(frozen=True, slots=True)
class TierEntry:
    """One tier of an assembly: items offered, kept and pruned, tokens used, floor and cap.

    ``floor`` and ``cap`` are in tokens, as the assembly's budget resolved them (``floor`` 0:
    none; ``cap`` None: none).
    """

    tier: int
    offered: int
    kept: int
    pruned: int
    tokens: int
    floor: int = 0
    cap: int | None = None

    @property
    def name(self) -> str:
        """The tier's display name (``"RECENT"``, ``"tier 45"``)."""
        return tier_name(self.tier)


@dataclass(frozen=True, slots=True)
class ContextRecord:
    """One logged assembly (see the module docstring).

    Attributes:
        id: the record's id: unique, and it sorts by time.
        session_id: the session assembled for.
        user_id: the user it was for (given, or the session's; None: none known).
        time: when, in seconds since the epoch.
        model: the model whose tokenizer counted.
        format: ``"messages"``, ``"text"`` or ``"compact"``.
        window: the budget's window, ``reserve`` and ``safety`` its parts kept free.
        tokens_available: ``window - reserve - safety``.
        tokens_used: tokens of the output as sent (0 for an error).
        included: the included items, in render order.
        pruned: the pruned items, each once, with its reason.
        tiers: per-tier figures, by tier.
        error: the `BudgetExceededError` message when the assembly failed (None: it did not).
        required: for such an error, the tokens the never-pruned items needed.
        query: the query's text, kept only with `InclusionLogConfig.keep_context`.
        context: the rendered context as sent, kept only with
            `InclusionLogConfig.keep_context`: the chat messages (``messages`` format, as
            ``to_messages()`` gave them) or the text (``text``, ``compact``); None: not kept.
    """

    id: str
    session_id: str
    user_id: str | None
    time: float
    model: str
    format: str
    window: int
    reserve: int
    safety: int
    tokens_available: int
    tokens_used: int
    included: tuple[IncludedEntry, ...] = ()
    pruned: tuple[PrunedEntry, ...] = ()
    tiers: tuple[TierEntry, ...] = ()
    error: str | None = None
    required: int | None = None
    query: str | None = None
    context: str | tuple[dict[str, Any], ...] | None = None

    @property
    def included_ids(self) -> list[str]:
        """The ids of the included items, in render order (see `included_refs`)."""
        return [entry.id for entry in self.included]

    @property
    def included_refs(self) -> list[ItemRef]:
        """The included items as their callers know them: own id and scope (`ref`)."""
        return [ref for ref in map(self.ref, self.included_ids) if ref is not None]

    @property
    def pruned_refs(self) -> list[ItemRef]:
        """The pruned items as their callers know them, in `pruned`'s order (`ref`)."""
        return [ref for ref in (self.ref(entry.id) for entry in self.pruned) if ref is not None]

    def ref(self, item_id: str) -> ItemRef | None:
        """An item id of this record as the caller knows it; None for ctxbudget's own items.

        A record of another scope has an id qualified with it (``ctxbudget:session:["s3",
        "m4"]`` is ``m4`` of session ``s3``); any other id is one of the session's own
        records (or an item passed with ``extra=``).

        >>> record = ContextRecord("r", "s1", None, 0.0, "gpt-4o", "messages", 9, 0, 0, 9, 0)
        >>> record.ref('ctxbudget:session:["s3","m4"]'), record.ref("m1")
        (ItemRef(id='m4', scope=('session', 's3')), ItemRef(id='m1', scope=('session', 's1')))
        """
        ref = ref_of_id(item_id)
        if ref is not None or is_internal(item_id):
            return ref
        return ItemRef(item_id, ("session", self.session_id))

    @property
    def over_budget(self) -> bool:
        """Whether the assembly failed: its never-pruned items did not fit."""
        return self.error is not None


def success_record(
    *,
    key: str,
    session_id: str,
    user_id: str | None,
    time: float,
    model: str,
    format: str,  # noqa: A002 - the public name
    budget: Budget,
    tokens_used: int,
    included: Sequence[ContextItem],
    pruned: Sequence[PrunedItem],
    tiers: Mapping[int, TierUsage],
    counter: TokenCounter,
    query: str | None = None,
    context: str | Sequence[Mapping[str, Any]] | None = None,
) -> ContextRecord:
    """The record of an assembly that succeeded (what `AssembledContext` reported).

    ``query`` and ``context``: kept only when given (`InclusionLogConfig.keep_context`).
    """
    counts = counter.count_many([item.text for item in included if item.tokens is None])
    texts = iter(counts)
    kept = tuple(
        IncludedEntry(
            item.id,
            int(item.tier),
            item.tokens if item.tokens is not None else next(texts),
            _score(item.score),
        )
        for item in included
    )
    cut = tuple(
        PrunedEntry(
            p.item.id, int(p.item.tier), p.reason.value, _score(p.item.score), _short(p.detail)
        )
        for p in pruned
    )
    sent = context if context is None or isinstance(context, str) else tuple(map(dict, context))
    return ContextRecord(
        id=key,
        session_id=session_id,
        user_id=user_id,
        time=time,
        model=model,
        format=format,
        window=budget.window,
        reserve=budget.reserve,
        safety=budget.safety,
        tokens_available=budget.available,
        tokens_used=tokens_used,
        included=kept,
        pruned=cut,
        tiers=tuple(_tier_entry(usage, budget) for _, usage in sorted(tiers.items())),
        query=query,
        context=sent,
    )


def _score(score: float) -> float:
    """A score as logged: 6 significant digits are plenty to rank by, and keep records short."""
    return float(f"{float(score):.6g}")


def _short(detail: str) -> str:
    text = str(detail)
    return text if len(text) <= DETAIL_LIMIT else text[: DETAIL_LIMIT - 3] + "..."


def error_record(
    *,
    key: str,
    session_id: str,
    user_id: str | None,
    time: float,
    model: str,
    format: str,  # noqa: A002 - the public name
    budget: Budget,
    error: str,
    required: int | None,
) -> ContextRecord:
    """The record of an assembly that failed with a `BudgetExceededError`."""
    return ContextRecord(
        id=key,
        session_id=session_id,
        user_id=user_id,
        time=time,
        model=model,
        format=format,
        window=budget.window,
        reserve=budget.reserve,
        safety=budget.safety,
        tokens_available=budget.available,
        tokens_used=0,
        error=error,
        required=required,
    )


def _tier_entry(usage: TierUsage, budget: Budget) -> TierEntry:
    cap = budget.caps.get(usage.tier)
    return TierEntry(
        tier=usage.tier,
        offered=usage.offered,
        kept=usage.kept,
        pruned=usage.pruned,
        tokens=usage.tokens,
        floor=budget.floor_tokens(usage.tier),
        cap=None if cap is None else budget.share_tokens(cap),
    )


def encode_record(record: ContextRecord) -> str:
    """The stored JSON document of ``record`` (compact; `decode_record` reads it back)."""
    document: dict[str, Any] = {
        "v": LOG_VERSION,
        "id": record.id,
        "sid": record.session_id,
        "uid": record.user_id,
        "t": record.time,
        "model": record.model,
        "fmt": record.format,
        "budget": [record.window, record.reserve, record.safety, record.tokens_available],
        "used": record.tokens_used,
        "inc": [[e.id, e.tier, e.tokens] for e in record.included],
        "cut": [[e.id, e.tier, e.reason] for e in record.pruned],
        "tiers": [
            [t.tier, t.offered, t.kept, t.pruned, t.tokens, t.floor, t.cap] for t in record.tiers
        ],
        "err": record.error,
        "req": record.required,
    }
    if any(e.score is not None for e in record.included):
        document["isc"] = [e.score for e in record.included]
    if any(e.score is not None or e.detail is not None for e in record.pruned):
        document["csc"] = [e.score for e in record.pruned]
        document["cdet"] = [e.detail for e in record.pruned]
    if record.query is not None:
        document["q"] = record.query
    if record.context is not None:
        document["ctx"] = (
            record.context if isinstance(record.context, str) else list(record.context)
        )
    return json.dumps(document, ensure_ascii=False, separators=(",", ":"))


def decode_record(document: str) -> ContextRecord:
    """The `ContextRecord` of a stored document.

    Raises:
        StoreError: not a record of this version, or a malformed one.
    """
    try:
        data: Any = json.loads(document)
        if not isinstance(data, dict) or data.get("v") != LOG_VERSION:
            version = data.get("v") if isinstance(data, dict) else None
            msg = f"not a context record of version {LOG_VERSION} (version {version!r})"
            raise StoreError(msg)
        window, reserve, safety, available = (int(v) for v in data["budget"])
        inc, cut = data["inc"], data["cut"]
        scores = _column(data, "isc", len(inc), float)
        cut_scores = _column(data, "csc", len(cut), float)
        details = _column(data, "cdet", len(cut), str)
        return ContextRecord(
            id=str(data["id"]),
            session_id=str(data["sid"]),
            user_id=None if data["uid"] is None else str(data["uid"]),
            time=float(data["t"]),
            model=str(data["model"]),
            format=str(data["fmt"]),
            window=window,
            reserve=reserve,
            safety=safety,
            tokens_available=available,
            tokens_used=int(data["used"]),
            included=tuple(
                IncludedEntry(str(i), int(t), int(n), s)
                for (i, t, n), s in zip(inc, scores, strict=True)
            ),
            pruned=tuple(
                PrunedEntry(str(i), int(t), str(r), s, d)
                for (i, t, r), s, d in zip(cut, cut_scores, details, strict=True)
            ),
            tiers=tuple(_decode_tier(row) for row in data["tiers"]),
            error=None if data["err"] is None else str(data["err"]),
            required=None if data["req"] is None else int(data["req"]),
            query=None if data.get("q") is None else str(data["q"]),
            context=_decode_context(data.get("ctx")),
        )
    except (KeyError, TypeError, ValueError, OverflowError) as exc:  # JSONDecodeError: ValueError
        msg = f"malformed context record ({exc!r}): {document[:80]!r}"
        raise StoreError(msg) from exc


def _column(data: dict[str, Any], key: str, size: int, kind: type[Any]) -> list[Any]:
    """A per-item column of a record (None for each item when the record predates it)."""
    values = data.get(key)
    if values is None:
        return [None] * size
    if not isinstance(values, list) or len(values) != size:
        msg = f"malformed context record: {key!r} does not match its {size} items"
        raise StoreError(msg)
    return [None if v is None else kind(v) for v in values]


def _decode_context(value: Any) -> str | tuple[dict[str, Any], ...] | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(m, dict) for m in value):
        return tuple(value)
    msg = f"malformed context record: its context is a {type(value).__name__}"
    raise StoreError(msg)


def _decode_tier(row: Sequence[Any]) -> TierEntry:
    tier, offered, kept, pruned, tokens, floor, cap = row
    cap = None if cap is None else int(cap)
    return TierEntry(int(tier), int(offered), int(kept), int(pruned), int(tokens), int(floor), cap)
