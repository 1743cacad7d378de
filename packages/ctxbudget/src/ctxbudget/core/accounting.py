"""`PackState`: the running accounts of one packing pass.

What is included and in which section, the tokens spent in total and per tier (with and without
what counts against a tier's cap), the sections, groups and date lines already opened, and what
was left out and why. Packing (`tiers`), shrinking (`summaries`) and the assembler all write here;
an item's cost is the layout's, plus the header of a section it opens and a date line it starts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ctxbudget.core.budget import Budget
from ctxbudget.core.items import ContextItem
from ctxbudget.core.packing import SolverReport
from ctxbudget.core.render import Layout
from ctxbudget.core.report import PrunedItem, PruneReason
from ctxbudget.core.trimming import TrimReport

__all__ = ["PackState"]


@dataclass(slots=True)
class PackState:
    """Mutable bookkeeping of one packing pass.

    ``lazy`` holds what was left out as ``(items, reason, detail)`` groups, turned into
    `PrunedItem` entries only when a report asks; ``originals`` maps the id of a summary standing
    in for what it covers to the summary as offered (its own tier); ``sent`` the ``id()`` of the
    history items added before packing (sent whatever happens).
    """

    layout: Layout
    budget: Budget
    used: int = 0
    sections: set[str] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)
    included: list[ContextItem] = field(default_factory=list)
    included_ids: set[str] = field(default_factory=set)
    section: dict[str, str] = field(default_factory=dict)
    tier_tokens: dict[int, int] = field(default_factory=dict)
    capped_tokens: dict[int, int] = field(default_factory=dict)
    pruned: list[PrunedItem] = field(default_factory=list)
    lazy: list[tuple[Sequence[ContextItem], PruneReason, str]] = field(default_factory=list)
    solvers: dict[int, SolverReport] = field(default_factory=dict)
    truncated: list[str] = field(default_factory=list)
    history: list[ContextItem] = field(default_factory=list)
    dates: set[tuple[str, str]] = field(default_factory=set)
    originals: dict[str, ContextItem] = field(default_factory=dict)
    sent: set[int] = field(default_factory=set)  # history items added before packing (by id())
    trim: TrimReport | None = None  # how history was cut in step mode
    # What each header, group and date line cost and which tiers paid (tier, capped as).
    opened: dict[tuple[str, ...], tuple[int, tuple[int, int | None]]] = field(default_factory=dict)

    def date_cost(self, item: ContextItem, section: str) -> int:
        """The date line ``item`` would open in a section sorted by date (history: 0 here)."""
        if section == "history" or item.timestamp is None:
            return 0
        date = self.layout.date_of(item, section)
        if not date or (section, date) in self.dates:
            return 0
        return self.layout.date_line_cost(date)

    def charge(self, tier: int, tokens: int) -> None:
        """Tokens spent for a tier outside any one item (the date lines of history)."""
        self.used += tokens
        self.tier_tokens[tier] = self.tier_tokens.get(tier, 0) + tokens
        self.capped_tokens[tier] = self.capped_tokens.get(tier, 0) + tokens

    def open_cost(self, section: str) -> int:
        """The headers ``section`` would open: its own and those of its groups (0 when open)."""
        if section in self.sections:
            return 0
        cost = self.layout.open_cost(section)
        for group in self.layout.groups_of(section):
            if group not in self.groups:
                cost += self.layout.group_open_cost(group)
        return cost

    def add(self, item: ContextItem, section: str, cost: int, *, capped: bool = True) -> None:
        """Include ``item`` in ``section`` at ``cost``, plus any header or date line it opens.

        ``capped=False``: the tokens do not count against the cap of the tier it is packed in
        (never-pruned items).
        """
        packed_as = int(item.tier)
        tier = int(self.originals.get(item.id, item).tier)  # a summary standing in: its own
        payer = (tier, packed_as if capped else None)
        opening = 0
        if section not in self.sections:
            opening = self.layout.open_cost(section)
            self.sections.add(section)
            self.opened[("section", section)] = (opening, payer)
            for group in self.layout.groups_of(section):
                if group not in self.groups:
                    paid = self.layout.group_open_cost(group)
                    opening += paid
                    self.groups.add(group)
                    self.opened[("group", group)] = (paid, payer)
        if section != "history":
            date = self.layout.date_of(item, section)
            if date and (section, date) not in self.dates:
                paid = self.layout.date_line_cost(date)
                opening += paid
                self.dates.add((section, date))
                self.opened[("date", section, date)] = (paid, payer)
        self.used += cost + opening
        self.tier_tokens[tier] = self.tier_tokens.get(tier, 0) + cost + opening
        if capped:
            self.capped_tokens[packed_as] = self.capped_tokens.get(packed_as, 0) + cost + opening
        item = self.originals.get(item.id, item)
        self.included.append(item)
        self.included_ids.add(item.id)
        self.section[item.id] = section

    def take_out(self, item: ContextItem) -> str:
        """Remove an included item (not history) and what only it opened; returns its section.

        Its cost goes back to its tier, and a date line or header no other included item sits
        under goes back to the tier that paid for it: the accounts stay those of what is sent.
        """
        section = self.section.pop(item.id)
        cost = self.layout.cost(item, section)
        self.included = [it for it in self.included if it is not item]
        self.included_ids.discard(item.id)
        self._refund((int(item.tier), int(item.tier)), cost)
        rest = [it for it in self.included if self.section[it.id] == section]
        date = self.layout.date_of(item, section)
        if date and not any(self.layout.date_of(it, section) == date for it in rest):
            self.dates.discard((section, date))
            self._refund_opened(("date", section, date))
        if not rest and section != "history":
            self.sections.discard(section)
            self._refund_opened(("section", section))
            for group in self.layout.groups_of(section):
                if not any(group in self.layout.groups_of(s) for s in self.sections):
                    self.groups.discard(group)
                    self._refund_opened(("group", group))
        return section

    def _refund_opened(self, key: tuple[str, ...]) -> None:
        paid, payer = self.opened.pop(key, (0, None))
        if payer is not None:
            self._refund(payer, paid)

    def _refund(self, payer: tuple[int, int | None], tokens: int) -> None:
        tier, capped_as = payer
        self.used -= tokens
        self.tier_tokens[tier] = self.tier_tokens.get(tier, 0) - tokens
        if capped_as is not None:
            self.capped_tokens[capped_as] = self.capped_tokens.get(capped_as, 0) - tokens
