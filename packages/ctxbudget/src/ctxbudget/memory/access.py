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

The counts are read from the session's stored log on each use (after the records this process
queued are written), never kept: a copy would need its own consistency protocol (another
object's or process's assemblies, a deleted session or user), and it bought nothing in the
default configuration, where access salience is off (docs/benchmarks.md, "Caches on and off").
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping

from ctxbudget.core.items import ContextItem
from ctxbudget.memory.candidates import Candidates

__all__ = ["boosted"]


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
