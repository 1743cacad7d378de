"""A door's report read as one explanation: what it included, what it pruned and why.

Doors report in three shapes: the core's `AssembledContext` (the memory, the adapters), the
JSON document of ``ctxbudget assemble --json`` and the MCP ``context`` tool (``included`` and
``pruned`` lists of entries), and the inspect page's assembly (``items`` with a ``status``).
`explained` reads each into one `Explained`, so the promise is written once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ctxbudget import AssembledContext

__all__ = ["Explained", "Pruned", "explained"]


@dataclass(frozen=True)
class Pruned:
    """One pruned item: its id, its reason, its caller's id and, for a duplicate, the id of
    the item kept in its place (None where the report does not say)."""

    id: str
    reason: str
    caller_id: str | None
    duplicate_of: str | None


@dataclass(frozen=True)
class Explained:
    """``included``: item ids in order; ``pruned``: each pruned item; ``offered``: the items
    the report says were offered (None where it does not say)."""

    included: list[str]
    pruned: list[Pruned]
    offered: int | None


def _offered(tiers: Any) -> int | None:
    if isinstance(tiers, Mapping):
        tiers = list(tiers.values())
    if not isinstance(tiers, list) or not all(isinstance(t, Mapping) for t in tiers):
        return None
    return sum(int(t["offered"]) for t in tiers)


def _caller_id(entry: Mapping[str, Any]) -> str | None:
    ref = entry.get("ref")
    if isinstance(ref, Mapping) and ref.get("id") is not None:
        return str(ref["id"])
    record = entry.get("record_id")
    return None if record is None else str(record)


def explained(report: Any) -> Explained:
    """The explanation in ``report`` (any of the three shapes); AssertionError if none."""
    if isinstance(report, AssembledContext):
        return Explained(
            included=list(report.included_ids),
            pruned=[
                Pruned(
                    p.item.id,
                    p.reason.value,
                    None if p.item.ref is None else p.item.ref.id,
                    None if p.duplicate_of is None else p.duplicate_of.id,
                )
                for p in report.pruned
            ],
            offered=sum(u.offered for u in report.tiers.values()),
        )
    assert isinstance(report, Mapping), f"a report of an unknown shape: {type(report)}"
    if "items" in report:  # the inspect page's assembly
        items = report["items"]
        return Explained(
            included=[str(i["id"]) for i in items if i["status"] == "included"],
            pruned=[
                Pruned(str(i["id"]), str(i["reason"]), _caller_id(i), None)
                for i in items
                if i["status"] == "pruned"
            ],
            offered=_offered(report.get("summary", {}).get("tiers")),
        )
    included = [e if isinstance(e, str) else str(e["id"]) for e in report["included"]]
    pruned = [
        Pruned(str(e["id"]), str(e["reason"]), _caller_id(e), e.get("duplicate_of"))
        for e in report["pruned"]
    ]
    return Explained(included=included, pruned=pruned, offered=_offered(report.get("tiers")))
