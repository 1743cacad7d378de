"""Chat history as whole exchanges, newest first, with tool calls kept beside their results.

An *exchange* is a user message and everything that answers it; a *step* inside it is one
assistant message with the results of all the tool calls it made (or a single other message).
Kept history is always a suffix of whole exchanges, except that the oldest kept exchange may
lose its middle steps (never its user message) when it does not fit whole. So kept history
starts with a user turn, and every tool call in it is sent with all its results and every
result with its call; `sendable` checks the same of any history as it will be sent, and
`with_partners` finds what a never-pruned message cannot be sent without.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from ctxbudget.core.items import ContextItem, Shrink
from ctxbudget.errors import InvalidItemError

__all__ = [
    "Exchange",
    "HistoryPacker",
    "RemainingHistory",
    "Unsendable",
    "conversation_order",
    "iter_exchanges",
    "sendable",
    "with_partners",
]

_NEVER = Shrink.NEVER


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


@dataclass(slots=True)
class Unsendable:
    """History that no provider accepts as it stands, found while reading it.

    ``orphan_results``: tool results whose call is not sent right before them;
    ``unanswered_calls``: assistant turns whose tool calls are not all answered;
    ``before_first_user``: messages before the first user turn (a conversation starts with one).
    """

    orphan_results: list[ContextItem] = field(default_factory=list)
    unanswered_calls: list[ContextItem] = field(default_factory=list)
    before_first_user: list[ContextItem] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.orphan_results or self.unanswered_calls or self.before_first_user)

    def items(self) -> list[ContextItem]:
        """Everything found, in no particular order."""
        return [*self.orphan_results, *self.unanswered_calls, *self.before_first_user]


def _step(
    item: ContextItem, pending: list[ContextItem], unsendable: Unsendable
) -> tuple[ContextItem, ...] | None:
    """An assistant turn with the results of all its calls (taken from ``pending``), or None."""
    calls = item.tool_calls
    wanted = set(calls)
    results: dict[str, ContextItem] = {}
    for result in reversed(pending):  # oldest first: the first answer to a call is its result
        if result.tool_call_id in wanted and result.tool_call_id not in results:
            results[result.tool_call_id] = result
    taken = {id(r) for r in results.values()}
    pending[:] = [r for r in pending if id(r) not in taken]
    if len(results) < len(wanted):
        unsendable.unanswered_calls.append(item)
        unsendable.orphan_results.extend(results.values())
        return None
    return (item, *(results[c] for c in dict.fromkeys(calls)))


def iter_exchanges(history: Sequence[ContextItem], unsendable: Unsendable) -> Iterator[Exchange]:
    """Yield exchanges newest first, reading ``history`` (chronological) from the end.

    What can never be sent goes to ``unsendable`` instead: tool results whose call is not in
    the same exchange, assistant turns whose calls are not all answered there (with the
    results they do have), and whatever precedes the first user turn but system messages.
    Each step is an assistant turn followed by the results of its calls, in the order of the
    calls. Reading from the end means a long history is only walked as far as packing goes.
    """
    steps: list[tuple[ContextItem, ...]] = []
    pending: list[ContextItem] = []  # tool results waiting for the assistant message that called
    for index in range(len(history) - 1, -1, -1):
        item = history[index]
        role = item.role or "user"
        if role == "tool":
            pending.append(item)
        elif role == "assistant" and item.tool_calls:
            step = _step(item, pending, unsendable)
            if step is not None:
                steps.append(step)
        elif role == "user":
            unsendable.orphan_results.extend(reversed(pending))
            pending = []
            steps.reverse()
            yield Exchange(item, tuple(steps))
            steps = []
        else:
            steps.append((item,))
    unsendable.orphan_results.extend(reversed(pending))
    # Before the first user turn only system messages may be sent (an app's instructions kept
    # in the history); they form an exchange without a user turn.
    steps.reverse()
    system = [step for step in steps if len(step) == 1 and step[0].role == "system"]
    for step in steps:
        if len(step) != 1 or step[0].role != "system":
            unsendable.before_first_user.extend(step)
    if system:
        yield Exchange(None, tuple(system))


def with_partners(history: list[ContextItem]) -> list[ContextItem]:
    """The history items sent whatever happens, with what they cannot be sent without.

    A ``shrink="never"`` message comes with the results of its calls (or the call it answers
    and that call's other results) and the user turn of its exchange.

    Raises:
        InvalidItemError: a never-pruned message that cannot be sent with its partners.
    """
    unsendable = Unsendable()
    keep: set[int] = set()
    for exchange in iter_exchanges(history, unsendable):
        head = [] if exchange.head is None else [exchange.head]
        for step in [tuple(head), *exchange.steps]:
            if any(it.shrink is _NEVER for it in step):
                keep.update(id(it) for it in (*head, *step))
    stuck = [it for it in unsendable.items() if it.shrink is _NEVER]
    if stuck:
        item = stuck[0]
        if any(it is item for it in unsendable.before_first_user):
            why = "it comes before the first user turn, and a conversation starts with one"
        elif item.role == "tool":
            why = f"the call it answers ({item.tool_call_id!r}) is not in its exchange"
        else:
            why = "not every tool call it makes has a result in its exchange"
        msg = (
            f"history item {item.id!r} is never pruned (shrink='never'), but it cannot be sent: "
            f"{why}; give it its partners or let it be pruned"
        )
        raise InvalidItemError(msg)
    return [it for it in history if id(it) in keep]


def conversation_order(history: list[ContextItem]) -> dict[int, int]:
    """Position of each history item as sent: exchanges in order, results after their call."""
    exchanges = list(iter_exchanges(history, Unsendable()))
    ordered = [it for exchange in reversed(exchanges) for it in exchange.items()]
    return {id(it): index for index, it in enumerate(ordered)}


def sendable(history: Sequence[ContextItem]) -> tuple[list[ContextItem], Unsendable]:
    """Split history as it will be sent into what a provider accepts and what it does not.

    The kept part starts with a user turn (system messages aside), and every assistant turn
    that calls tools is followed at once by one result for each call; anything else is
    returned in `Unsendable`. Cheap (one pass): run on every assembled history.
    """
    kept: list[ContextItem] = []
    unsendable = Unsendable()
    started = False
    index = 0
    while index < len(history):
        item = history[index]
        index += 1
        role = item.role or "user"
        if role == "user":
            started = True
        elif not started and role != "system":
            unsendable.before_first_user.append(item)
            continue
        if role == "tool":
            unsendable.orphan_results.append(item)
            continue
        if role != "assistant" or not item.tool_calls:
            kept.append(item)
            continue
        results: list[ContextItem] = []
        while index < len(history) and history[index].role == "tool":
            results.append(history[index])
            index += 1
        wanted = set(item.tool_calls)
        answers: dict[str, ContextItem] = {}
        extra: list[ContextItem] = []
        for result in results:
            call = result.tool_call_id
            if call in wanted and call not in answers:
                answers[call] = result
            else:
                extra.append(result)
        if len(answers) == len(wanted):
            kept.append(item)
            kept.extend(answers.values())
        else:
            unsendable.unanswered_calls.append(item)
            extra = results
        unsendable.orphan_results.extend(extra)
    return kept, unsendable


@dataclass(slots=True)
class HistoryPacker:
    """Packs exchanges newest first into successive allowances; remembers where it stopped.

    ``cost`` gives the tokens of consecutive messages (with any date lines among them);
    ``refund(older, newer)`` the tokens saved when ``older`` is placed right before ``newer``
    (a date line ``newer`` no longer needs). ``block_costs`` holds what each kept block adds.
    ``going_on``: the newest exchange is still going on (the question is its user message, as
    in an agent's turn), so it may be reduced to its question; with the question sent apart
    (a query), every exchange of history is answered, and one is kept whole or not at all.
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
    going_on: bool = True

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
            if self.exchanges_kept > 0 or not self.going_on:
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


class RemainingHistory(Sequence[ContextItem]):
    """History never reached by packing, materialized only when a report asks for it."""

    def __init__(self, packer: HistoryPacker) -> None:
        self._packer = packer
        self._items: list[ContextItem] | None = None

    def _all(self) -> list[ContextItem]:
        if self._items is None:
            self._items = self._packer.remaining()
        return self._items

    def __len__(self) -> int:
        return len(self._all())

    def __getitem__(self, index: int) -> ContextItem:  # type: ignore[override]
        return self._all()[index]

    def __iter__(self) -> Iterator[ContextItem]:
        return iter(self._all())
