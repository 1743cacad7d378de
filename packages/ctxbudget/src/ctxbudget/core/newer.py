"""The newer statement wins: an item is never sent without the later items that restate it.

An item may name later items that restate what it says (`ContextItem.newer`: "I live in
Lisbon", then "we moved to Porto"). Packing keeps each pair coherent: when such an item is
included, every newer item named (and offered) is included too, or the earlier item is left out
with `PruneReason.SUPERSEDED` and the room it held goes to the newer ones. The rule holds for
the items packing may leave out on its own (not history, not never-pruned items: for those
``newer`` only marks the row). Rendering marks each earlier item's row ``[earlier; see newer]``
(in the knowledge and summary sections, under its date line), so a model can tell which
statement is newer (`ctxbudget.core.render`); history keeps its conversation order.

`link` keeps only the ids that name an item offered in the same call, `keep_newer` enforces
the rule on a packed state. Both cost a look at each item when none names a newer one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

from ctxbudget.core.accounting import PackState
from ctxbudget.core.items import NEVER_PRUNED_TIERS, ContextItem, Shrink, Tier
from ctxbudget.core.report import PrunedItem, PruneReason

__all__ = ["keep_newer", "link"]

_RECENT = int(Tier.RECENT)


def link(groups: Mapping[int | None, list[ContextItem]]) -> None:
    """Cut each ``newer`` to the ids offered in this call (``groups``: items by tier), in place.

    Only items of the packed tiers are replaced (history and never-pruned items keep their
    identity, which packing relies on; the rule does not apply to them). The usual call, with no
    ``newer`` anywhere, only looks.
    """
    bound = [
        (t, i)
        for t, members in groups.items()
        if t is not None and t != _RECENT
        for i, it in enumerate(members)
        if it.newer
    ]
    if not bound:
        return
    ids = {it.id for members in groups.values() for it in members}
    for tier, index in bound:
        item = groups[tier][index]
        kept = tuple(dict.fromkeys(i for i in item.newer if i in ids and i != item.id))
        if kept != item.newer:
            groups[tier][index] = dataclasses.replace(item, newer=kept)


def _bound(item: ContextItem) -> bool:
    """Whether the rule applies: an item packing may leave out on its own, naming newer ones."""
    return bool(item.newer) and item.tier != _RECENT and not _kept_anyway(item)


def _kept_anyway(item: ContextItem) -> bool:
    return item.shrink is Shrink.NEVER or int(item.tier) in NEVER_PRUNED_TIERS


def keep_newer(
    state: PackState,
    candidates: Mapping[int, Sequence[ContextItem]],
    section_of: Callable[[ContextItem], str],
) -> None:
    """Make every included item's newer items included too, or leave the item out.

    ``candidates``: the items of the packed tiers (not history) that may still be added, by
    tier;
    ``section_of``: the section an item renders in. A newer item is added when it fits what
    is left (the budget and its tier's cap); else the earlier item is left out
    (``SUPERSEDED``) and the newer ones are tried again in the room it gave back, with the date
    line and section header only it had opened.
    """
    if not any(_bound(it) for it in state.included):
        return
    by_id = {it.id: it for members in candidates.values() for it in members}
    changed = True
    while changed:
        changed = False
        for item in list(state.included):
            if not _bound(item) or item.id not in state.included_ids:
                continue
            missing = _missing(item, state, by_id)
            if not missing:
                continue
            addable = [by_id[i] for i in missing if i in by_id]
            if len(addable) == len(missing) and (
                _add_all(state, addable, section_of) or _make_room(state, item, addable, section_of)
            ):
                changed = True
                continue
            _leave_out(state, item, missing)
            by_id.pop(item.id, None)  # never taken back: each item is left out at most once
            if len(addable) == len(missing) and not _add_all(state, addable, section_of):
                # Items worth less than the statement it replaces still give way to it.
                _make_room(state, item, addable, section_of)
            changed = True


def _missing(item: ContextItem, state: PackState, by_id: dict[str, ContextItem]) -> list[str]:
    """The newer ids (and theirs, transitively) not included, in order."""
    seen: dict[str, None] = {}
    todo = list(item.newer)
    while todo:
        newer = todo.pop(0)
        if newer in seen or newer == item.id:
            continue
        seen[newer] = None
        follow = by_id.get(newer)
        if follow is not None:
            todo.extend(follow.newer)
    return [i for i in seen if i not in state.included_ids]


def _add_all(
    state: PackState, items: list[ContextItem], section_of: Callable[[ContextItem], str]
) -> bool:
    """Add ``items`` if all of them fit what is left (budget and caps); else add none."""
    layout = state.layout
    budget = state.budget
    total = 0
    per_tier: dict[int, int] = {}
    opened: set[str] = set()
    dates: set[tuple[str, str]] = set()
    for item in items:
        section = section_of(item)
        cost = layout.cost(item, section)
        if section not in opened:
            cost += state.open_cost(section)
            opened.add(section)
        date = layout.date_of(item, section)
        if date and (section, date) not in dates:
            cost += state.date_cost(item, section)
            dates.add((section, date))
        total += cost
        per_tier[int(item.tier)] = per_tier.get(int(item.tier), 0) + cost
    if state.used + total > budget.available:
        return False
    for tier, tokens in per_tier.items():
        cap = budget.cap_tokens(tier)
        if cap is not None and state.capped_tokens.get(tier, 0) + tokens > cap:
            return False
    for item in items:
        section = section_of(item)
        state.add(item, section, layout.cost(item, section))
    return True


def _make_room(
    state: PackState,
    item: ContextItem,
    addable: list[ContextItem],
    section_of: Callable[[ContextItem], str],
) -> bool:
    """Keep ``item`` and add its newer ones by leaving out included items worth less than it.

    Those left out score less, together, than ``item`` (the least score per token first), are
    of ``item``'s tier or a later one, and are no one's newer item.
    """
    layout = state.layout
    named = {i for it in state.included for i in it.newer}
    spare: list[tuple[float, ContextItem]] = []
    for other in state.included:
        section = state.section[other.id]
        if (
            other is item
            or other.id in named
            or section == "history"
            or _kept_anyway(other)
            or int(other.tier) < int(item.tier)
        ):
            continue
        spare.append((max(other.score, 0.0) / max(layout.cost(other, section), 1), other))
    spare.sort(key=lambda entry: (entry[0], entry[1].id))
    evicted: list[tuple[ContextItem, str]] = []
    worth = 0.0
    added = False
    for _, other in spare:  # one at a time: what each frees is exact (its date line, a header)
        score = max(other.score, 0.0)
        if worth + score >= item.score:
            break
        worth += score
        evicted.append((other, _take_out(state, other)))
        added = _add_all(state, addable, section_of)
        if added:
            break
    if added:
        detail = f"room given to a newer statement restating {item.label}"
        state.pruned.extend(PrunedItem(o, PruneReason.OVER_BUDGET, detail) for o, _ in evicted)
        return True
    for other, section in reversed(evicted):  # no room even so: put them back
        state.add(other, section, layout.cost(other, section))
    return False


def _take_out(state: PackState, item: ContextItem) -> str:
    """Remove an included item from the accounts, with a date line or header only it opened."""
    return state.take_out(item)


def _leave_out(state: PackState, item: ContextItem, missing: list[str]) -> None:
    _take_out(state, item)
    shown = ", ".join(missing[:3]) + (" ..." if len(missing) > 3 else "")
    detail = f"a newer statement ({shown}) restates it and both did not fit"
    state.pruned.append(PrunedItem(item, PruneReason.SUPERSEDED, detail))
