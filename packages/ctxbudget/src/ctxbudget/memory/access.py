"""Access salience: memories a session's assemblies keep including may weigh more (an option).

With `MemoryConfig.access_salience` above 0 (it is 0, off, by default), a candidate that the
session's inclusion log shows included in ``n`` of its retained assemblies gets its salience
multiplied by ``1 + access_salience * ln(1 + n)``: its score is multiplied by that factor to the
power of `Scoring.salience_weight` (see `ctxbudget.memory.scoring`). It applies to retrieved
candidates (re-ordered best first) and stored summaries; pinned facts, tasks and recent history
are offered whatever their score. Counts are per item id as assembled (`access_counts`), so a
record of another session or user counts under its scoped id.

It is a feedback loop (what was included is more likely to be included again), so it is off
until measured on the application's own questions; docs/operations.md says how.

The counts come from this process's copy of each session's log (`AccessCounts`): read from the
store once (after what is queued is written), then kept up to date as this memory logs its
assemblies, within the same retention limit. Assemblies another process logs meanwhile count
once the copy is read again (`AccessCounts.forget`; a memory of 128 sessions drops the least
recently used).
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from ctxbudget.core.items import ContextItem
from ctxbudget.memory.analytics import access_counts, is_memory_tier
from ctxbudget.memory.candidates import Candidates
from ctxbudget.memory.inclusion import ContextRecord

__all__ = ["AccessCounts", "boosted"]

_SESSIONS = 128


@dataclass(slots=True)
class _Copy:
    included: deque[frozenset[str]]
    counts: Counter[str]


class AccessCounts:
    """Per session: how many of its retained assemblies included each item (see above).

    Args:
        retain: the log's retention limit per session (the oldest assemblies stop counting).
    """

    def __init__(self, retain: int) -> None:
        self._retain = retain
        self._copies: OrderedDict[str, _Copy] = OrderedDict()

    def get(
        self, session_id: str, read: Callable[[], Sequence[ContextRecord]]
    ) -> Mapping[str, int]:
        """The counts of a session; ``read`` gives its stored records, newest first."""
        copy = self._copies.get(session_id)
        if copy is None:
            records = list(read())[: self._retain]
            included = deque(
                (frozenset(access_counts([r])) for r in reversed(records)), maxlen=self._retain
            )
            copy = _Copy(included, Counter(access_counts(records)))
            self._copies[session_id] = copy
            while len(self._copies) > _SESSIONS:
                self._copies.popitem(last=False)
        self._copies.move_to_end(session_id)
        return copy.counts

    def held(self, session_id: str) -> bool:
        """Whether this process holds the counts of ``session_id`` (`add` keeps them current)."""
        return session_id in self._copies

    def add(self, session_id: str, included: Iterable[tuple[str, int]]) -> None:
        """Count one more assembly of a held session: its included items' (id, tier)."""
        copy = self._copies.get(session_id)
        if copy is None:
            return
        if len(copy.included) == copy.included.maxlen:
            copy.counts.subtract(copy.included[0])
            copy.counts += Counter()  # drop the ids no retained assembly includes
        ids = frozenset(i for i, tier in included if is_memory_tier(tier))
        copy.included.append(ids)
        copy.counts.update(ids)

    def forget(self, session_id: str | None = None) -> None:
        """Drop the copy of one session (None: of every session); it is read again when used."""
        if session_id is None:
            self._copies.clear()
        else:
            self._copies.pop(session_id, None)


def boosted(
    found: Candidates, counts: Mapping[str, int], *, weight: float, exponent: float
) -> Candidates:
    """``found`` with retrieved candidates and summaries scored up by their access counts.

    >>> boosted(found, {}, weight=0.5, exponent=1.0) == found  # doctest: +SKIP
    True
    """
    if weight <= 0 or not counts:
        return found

    def up(items: Iterable[ContextItem]) -> list[ContextItem]:
        out = []
        for item in items:
            n = counts.get(item.id, 0)
            if n > 0:
                factor = (1.0 + weight * math.log1p(n)) ** exponent
                item = dataclasses.replace(item, score=item.score * factor)
            out.append(item)
        return out

    retrieved = sorted(up(found.retrieved), key=lambda item: -item.score)  # stable
    return dataclasses.replace(
        found, retrieved=tuple(retrieved), summaries=tuple(up(found.summaries))
    )
