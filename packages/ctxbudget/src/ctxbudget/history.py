"""Chat history as whole exchanges, newest first, with tool calls kept beside their results.

An *exchange* is a user message and everything that answers it; a *step* inside it is one
assistant message with the results of the tool calls it made (or a single other message). Kept
history is always a suffix of whole exchanges, except that the oldest kept exchange may lose
its middle steps (never its user message) when it does not fit whole. So kept history never
starts with a tool result, and never with an assistant reply whose user turn was cut.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from ctxbudget.items import ContextItem

__all__ = ["Exchange", "HistoryPacker", "iter_exchanges"]


@dataclass(frozen=True, slots=True)
class Exchange:
    """A user turn (``head``; None when the history starts mid-exchange) and its steps."""

    head: ContextItem | None
    steps: tuple[tuple[ContextItem, ...], ...]

    def items(self) -> list[ContextItem]:
        """All messages of the exchange in chronological order."""
        out = [] if self.head is None else [self.head]
        for step in self.steps:
            out.extend(step)
        return out


def iter_exchanges(
    history: Sequence[ContextItem], orphans: list[ContextItem]
) -> Iterator[Exchange]:
    """Yield exchanges newest first, reading ``history`` (chronological) from the end.

    Tool results whose call is not in the same exchange are appended to ``orphans``: they can
    never be sent without their call. Reading from the end means a long history is only walked
    as far as packing goes.
    """
    steps: list[tuple[ContextItem, ...]] = []
    pending: list[ContextItem] = []  # tool results waiting for the assistant message that called
    for index in range(len(history) - 1, -1, -1):
        item = history[index]
        role = item.role or "user"
        if role == "tool":
            pending.append(item)
        elif role == "assistant" and item.tool_calls:
            calls = set(item.tool_calls)
            results = [r for r in reversed(pending) if r.tool_call_id in calls]
            pending = [r for r in pending if r.tool_call_id not in calls]
            steps.append((item, *results))
        elif role == "user":
            orphans.extend(reversed(pending))
            pending = []
            steps.reverse()
            yield Exchange(item, tuple(steps))
            steps = []
        else:
            steps.append((item,))
    orphans.extend(reversed(pending))
    if steps:
        steps.reverse()
        yield Exchange(None, tuple(steps))


@dataclass(slots=True)
class HistoryPacker:
    """Packs exchanges newest first into successive allowances; remembers where it stopped.

    ``cost`` gives the tokens of consecutive messages (with any date lines among them);
    ``refund(older, newer)`` the tokens saved when ``older`` is placed right before ``newer``
    (a date line ``newer`` no longer needs). ``block_costs`` holds what each kept block adds.
    """

    exchanges: Iterator[Exchange]
    cost: Callable[[Sequence[ContextItem]], int]
    kept: list[ContextItem]
    cut: list[ContextItem]
    exchanges_kept: int = 0
    done: bool = False
    blocks: list[list[ContextItem]] = field(default_factory=list)
    block_costs: list[int] = field(default_factory=list)
    refund: Callable[[Sequence[ContextItem], Sequence[ContextItem]], int] | None = None

    def _joined(self, block: Sequence[ContextItem], cost: int) -> int:
        if self.refund is not None and self.blocks:
            return cost - self.refund(block, self.blocks[-1])
        return cost

    def take(self, allowance: int, *, max_exchanges: int | None = None) -> int:
        """Add exchanges while they fit in ``allowance``; return the tokens used.

        The first exchange that does not fit whole is kept in part (its user message and as
        many of its newest steps as fit) and packing stops there for good: history stays
        contiguous.
        """
        used = 0
        while not self.done and (max_exchanges is None or self.exchanges_kept < max_exchanges):
            exchange = next(self.exchanges, None)
            if exchange is None:
                self.done = True
                break
            items = exchange.items()
            total = self._joined(items, self.cost(items))
            if used + total <= allowance:
                self.kept.extend(items)
                self.blocks.append(items)
                self.block_costs.append(total)
                used += total
                self.exchanges_kept += 1
                continue
            used += self._take_part(exchange, allowance - used)
            self.done = True
        return used

    def _take_part(self, exchange: Exchange, room: int) -> int:
        used = 0
        kept: list[ContextItem] = []
        if exchange.head is not None:
            head_cost = self.cost([exchange.head])
            if head_cost > room:
                self.cut.extend(exchange.items())
                return 0
            used = head_cost
        taken_steps: list[tuple[ContextItem, ...]] = []
        steps = list(exchange.steps)
        split = len(steps)
        for position in range(len(steps) - 1, -1, -1):
            step_cost = self.cost(steps[position])
            if used + step_cost > room:
                break
            used += step_cost
            taken_steps.append(steps[position])
            split = position
        if not taken_steps and exchange.head is not None and exchange.steps:
            # A user message alone whose whole answer was cut would read as unanswered; only the
            # newest exchange (the one still going on) may be reduced to its question.
            if self.exchanges_kept > 0:
                self.cut.extend(exchange.items())
                return 0
        if exchange.head is not None:
            kept.append(exchange.head)
        for step in reversed(taken_steps):
            kept.extend(step)
        for step in steps[:split]:
            self.cut.extend(step)
        if kept:
            cost = self._joined(kept, self.cost(kept))
            self.kept.extend(kept)
            self.blocks.append(kept)
            self.block_costs.append(cost)
            self.exchanges_kept += 1
            return cost
        return used

    def chronological(self) -> list[ContextItem]:
        """Kept history in conversation order (exchanges were packed newest first)."""
        return [item for block in reversed(self.blocks) for item in block]

    def remaining(self) -> list[ContextItem]:
        """Everything not yet packed (call once packing is over)."""
        rest: list[ContextItem] = []
        for exchange in self.exchanges:
            rest.extend(exchange.items())
        return rest
