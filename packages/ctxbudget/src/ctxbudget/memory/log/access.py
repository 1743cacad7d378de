"""Access salience: memories a session's assemblies keep including may weigh more (an option).

With `MemoryConfig.access_salience` above 0 (it is 0, off, by default), a candidate that the
session's inclusion log shows included in ``n`` of its retained assemblies gets its salience
multiplied by ``1 + access_salience * ln(1 + n)``: its score is multiplied by that factor to the
power of `Scoring.salience_weight` (see `ctxbudget.memory.policy.scoring`). It applies to retrieved
candidates (re-ordered best first) and stored summaries; pinned facts, tasks and recent history
are offered whatever their score. Counts are per item id as assembled (`access_counts`), so a
record of another session or user counts under its scoped id.

It is a feedback loop (what was included is more likely to be included again), so it is off
until measured on the application's own questions; docs/operations.md says how.

Scoring uses this object's copy of each session's counts (`AccessCounts`): read from the log
once (after what is queued is written), then kept up to date as this memory logs its
assemblies. A copy is keyed by the session's generation (`ctxbudget.store.sessions.Stamp`):
when a message is deleted or replaced, the session cleared, or deleted and started again (by
any object or process), it is read again; assemblies other objects log meanwhile count once it
is. Reading the log on every call instead cost 10x a turn with 200 logged assemblies
(docs/benchmarks.md, "Caches on and off"). `ContextMemory.access_counts` always reads the log.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from ctxbudget.core.items import ContextItem
from ctxbudget.memory.log.analytics import access_counts, is_memory_tier
from ctxbudget.memory.log.entries import ContextRecord
from ctxbudget.memory.reading.candidates import Candidates

__all__ = ["AccessCounts", "boosted"]

_SESSIONS = 128


@dataclass(slots=True)
class _Copy:
    generation: str
    included: deque[frozenset[str]]
    counts: Counter[str]


class AccessCounts:
    """Per session and generation: how many retained assemblies included each item (above).

    Args:
        retain: the log's retention limit per session (the oldest assemblies stop counting).
    """

    def __init__(self, retain: int) -> None:
        self._retain = retain
        self._copies: OrderedDict[str, _Copy] = OrderedDict()
        self._lock = threading.Lock()

    def get(
        self, session_id: str, generation: str, read: Callable[[], Sequence[ContextRecord]]
    ) -> Mapping[str, int]:
        """The counts of a session; ``read`` gives its stored records, newest first.

        ``generation``: the session's, as the call read it ("" : no records, nothing kept).
        """
        with self._lock:
            copy = self._copies.get(session_id)
        if copy is None or not generation or copy.generation != generation:
            records = list(read())[: self._retain]
            included = deque(
                (frozenset(access_counts([r])) for r in reversed(records)), maxlen=self._retain
            )
            copy = _Copy(generation, included, Counter(access_counts(records)))
            if not generation:
                return copy.counts
        with self._lock:
            self._copies[session_id] = copy
            self._copies.move_to_end(session_id)
            while len(self._copies) > _SESSIONS:
                self._copies.popitem(last=False)
        return copy.counts

    def add(self, session_id: str, generation: str, included: Iterable[tuple[str, int]]) -> None:
        """Count one more assembly of a held session of this generation: (id, tier) included."""
        with self._lock:
            copy = self._copies.get(session_id)
            if copy is None or copy.generation != generation:
                return
            if len(copy.included) == copy.included.maxlen:
                copy.counts.subtract(copy.included[0])
                copy.counts += Counter()  # drop the ids no retained assembly includes
            ids = frozenset(i for i, tier in included if is_memory_tier(tier))
            copy.included.append(ids)
            copy.counts.update(ids)

    def forget(self, session_id: str | None = None) -> None:
        """Drop the copy of one session (None: of every session); it is read again when used."""
        with self._lock:
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
