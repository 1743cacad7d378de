"""Trimming history in steps, so that the following turns append to a byte-identical prefix.

Providers cache the longest prefix a request shares with an earlier one (OpenAI and Gemini on
their own, Anthropic up to its ``cache_control`` breakpoints). Trimming history to the newest
exchanges that fit (``history_trim="message"``) drops the oldest exchange on almost every turn
once a conversation outgrows its budget: each call's history starts somewhere new, and it shares
no more than the system prompt with the call before it.

``history_trim="step"`` cuts history only at *anchors*: the exchange boundaries where the tokens
counted from the start of the offered history cross a multiple of a step ``S`` (`step_tokens`:
``trim_step`` of the room history could have). Anchors depend on the conversation, not on how
full this call's budget is, so as turns are appended the cut (the first kept exchange, the
earliest anchor whose history fits) stays where it is until history outgrows its room, then
moves on by about one step. Kept history is then between ``room - S - one exchange`` and
``room``, and every call in between appends to the same prefix. When not even the newest
anchor's history fits, history is trimmed by message as in the other mode.

Given the previous call's context (``previous=``), history also stays where that call started
it when this call has a little more room (a shorter query) and moving back would gain less
than a step: the cached prefix is worth more than those tokens.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, TypedDict

from ctxbudget.core.budget import Budget
from ctxbudget.core.history import Exchange, HistoryPacker
from ctxbudget.core.items import ContextItem
from ctxbudget.core.markup import DATED
from ctxbudget.core.render import Layout
from ctxbudget.errors import ConfigurationError, ConfigurationTypeError

__all__ = [
    "DEFAULT_TRIM_STEP",
    "TRIM_MODES",
    "StepPlan",
    "TrimMode",
    "TrimOptions",
    "TrimReport",
    "anchor_heads",
    "check_trim",
    "plan_steps",
    "step_anchors",
    "step_tokens",
    "trim_options",
]

TrimMode = Literal["step", "message"]
TRIM_MODES: tuple[TrimMode, ...] = ("step", "message")

DEFAULT_TRIM_STEP = 0.15
"""The share of history's room one step drops (see docs/caching.md for how it was chosen)."""


def check_trim(history_trim: object, trim_step: object) -> tuple[TrimMode, float]:
    """The trimming options, checked.

    Raises:
        ConfigurationError: a mode other than ``"step"`` or ``"message"``, or a step outside
            (0, 1).
        ConfigurationTypeError: a step that is not a float.

    >>> check_trim("step", 0.2)
    ('step', 0.2)
    """
    if history_trim not in TRIM_MODES:
        msg = (
            f"history_trim must be 'step' (cut history at stable anchors, so the next calls "
            f"share a cached prefix) or 'message' (keep the newest exchanges that fit), got "
            f"{history_trim!r}"
        )
        raise ConfigurationError(msg)
    if isinstance(trim_step, bool) or not isinstance(trim_step, float) or not 0 < trim_step < 1:
        msg = (
            f"trim_step is the share of history's room one step drops, a float in (0, 1) "
            f"such as {DEFAULT_TRIM_STEP}; got {trim_step!r}"
        )
        if isinstance(trim_step, float):
            raise ConfigurationError(msg)
        raise ConfigurationTypeError(msg)
    mode: TrimMode = "step" if history_trim == "step" else "message"
    return mode, trim_step


class TrimOptions(TypedDict):
    """`ContextAssembler`'s trimming options, as an adapter passes them on."""

    history_trim: TrimMode
    trim_step: float


def trim_options(
    history_trim: TrimMode | None, trim_step: float, *, memories: bool = False
) -> TrimOptions:
    """The trimming options an adapter passes on, checked (`check_trim`).

    ``history_trim=None`` is ``"step"``, or ``"message"`` with ``memories``: memories recalled
    for each query are rendered before history, so no prefix past them survives from one call
    to the next, and steps would only cost history.

    >>> trim_options(None, 0.2, memories=True)
    {'history_trim': 'message', 'trim_step': 0.2}
    """
    default: TrimMode = "message" if memories else "step"
    mode, step = check_trim(default if history_trim is None else history_trim, trim_step)
    return {"history_trim": mode, "trim_step": step}


def step_tokens(share: float, budget: Budget, *, fixed: int, history_tier: int) -> int:
    """``S``: ``share`` of the room history could have (0: no room to step in).

    That room is the budget available less ``fixed`` (what is sent whatever happens, but the
    query and history: stable across a session's calls) and the floors kept for other tiers,
    at most history's cap. The query is left out on purpose: it changes on every call, and
    anchors must not move with it.
    """
    room = budget.available - fixed
    room -= sum(budget.floor_tokens(tier) for tier in budget.floors if tier != history_tier)
    cap = budget.cap_tokens(history_tier)
    if cap is not None:
        room = min(room, cap)
    return max(0, int(room * share))


def step_anchors(costs: Sequence[int], step: int) -> list[int]:
    """The exchanges history may start with: 0, and where the tokens before cross a new step.

    ``costs`` are the exchanges' tokens, oldest first; an exchange that crosses several
    multiples of ``step`` at once makes one anchor.

    >>> step_anchors([40, 40, 40, 40, 40], 100)
    [0, 3]
    """
    anchors = [0]
    total = 0
    threshold = step
    for index in range(1, len(costs)):
        total += costs[index - 1]
        if total >= threshold:
            anchors.append(index)
            threshold = (total // step + 1) * step
    return anchors


@dataclass(frozen=True, slots=True)
class TrimReport:
    """How history was trimmed in step mode (`AssembledContext.trim`).

    Attributes:
        step_tokens: ``S``, the tokens of one step.
        exchanges: the exchanges offered (a user turn and what answers it).
        first_kept: the index of the oldest exchange kept (``exchanges`` when none was).
        anchored: history starts at an anchor (False: not even the newest anchor's history
            fit, and it was trimmed by message).
        held: history starts where the previous call's did (``previous=``), not at the
            earliest anchor that fits.
    """

    step_tokens: int
    exchanges: int
    first_kept: int
    anchored: bool
    held: bool = False

    def describe(self) -> str:
        """One line for `AssembledContext.explain`."""
        line = f"history trimmed in steps of {self.step_tokens:,} tokens (history_trim='step')"
        if self.first_kept == 0 and self.anchored:
            return f"{line}: all {self.exchanges} exchanges kept"
        line += f": kept from exchange {self.first_kept + 1} of {self.exchanges}"
        if self.held:
            line += ", where the previous call started"
        elif not self.anchored:
            line += " (the newest step did not fit: trimmed by message)"
        return line


@dataclass(frozen=True, slots=True)
class StepPlan:
    """Where step trimming starts history.

    ``limit``: the exchanges to pack, newest first (None: not even a step fits, trim by
    message); ``exchanges``: how many were offered; ``anchored``: history starts at an anchor;
    ``held``: where the previous call started it.
    """

    limit: int | None
    exchanges: int
    anchored: bool
    held: bool


def anchor_heads(history: Sequence[ContextItem], layout: Layout, step: int) -> tuple[set[int], int]:
    """The ``id()`` of the user turns history may start with, and how many exchanges there are.

    One pass over the history, oldest first, counting each message as packing does (date lines
    of the text formats included): the tokens from one user turn to the next are an
    exchange's, and `step_anchors` picks among them. What is never sent (an orphan tool result)
    counts too: the anchors depend on the conversation only.
    """
    dated = "history" in DATED[layout.format]
    cost = layout.cost  # the hot loop of long histories: one cached count per message
    segments: list[int] = []
    heads: list[ContextItem | None] = []
    head: ContextItem | None = None
    tokens = 0
    last = ""
    system = False
    for item in history:
        role = item.role
        if not role or role == "user":
            if head is not None or tokens:
                segments.append(tokens)
                heads.append(head)
            head, tokens = item, 0
        elif head is None and role == "system":
            system = True
        if dated:
            date = layout.date_of(item, "history")
            if date and date != last:
                tokens += layout.date_line_cost(date)
                last = date
        tokens += cost(item, "history")
    if head is not None or tokens:
        segments.append(tokens)
        heads.append(head)
    chosen = step_anchors(segments, step) if step > 0 else []
    found = {id(heads[i]) for i in chosen if heads[i] is not None}
    count = len(heads) - (heads[0] is None if heads else 0) + (1 if system else 0)
    return found, count


def plan_steps(
    packer: HistoryPacker,
    layout: Layout,
    history: Sequence[ContextItem],
    *,
    step: int,
    room: int,
    previous_start: str | None,
) -> StepPlan:
    """Choose the first kept exchange: the earliest anchor whose history fits in ``room``.

    Reads the exchanges ``packer`` has not packed yet, newest first, only as far as ``room``
    goes (they are handed back to it); ``room`` is what the rest of the history may use.
    """
    anchors, count = anchor_heads(history, layout, step)
    if packer.done or step <= 0:
        return StepPlan(None, count, anchored=False, held=False)
    oldest_kept = packer.blocks[-1] if packer.blocks else None
    # Newest exchanges packed already (``min_exchanges``): history may stop there.
    chosen: int | None = 0 if oldest_kept and id(oldest_kept[0]) in anchors else None
    walked: list[Exchange] = []
    costs: list[int] = []
    used = 0
    newer = oldest_kept
    oldest = False
    while True:
        exchange = next(packer.exchanges, None)
        if exchange is None:  # the oldest exchange was read: starting there keeps everything
            if walked and used <= room:
                chosen, oldest = len(walked), True
            break
        items = exchange.items()
        cost = packer.cost(items)
        if newer is not None and packer.refund is not None:
            cost -= packer.refund(items, newer)
        walked.append(exchange)
        costs.append(cost)
        newer = items
        used += cost
        if used > room:
            break
        if exchange.head is not None and id(exchange.head) in anchors:
            chosen = len(walked)
    packer.exchanges = itertools.chain(walked, packer.exchanges)
    if chosen is None:
        return StepPlan(None, count, anchored=False, held=False)
    held = False
    if previous_start is not None and chosen > 1:
        heads = [ex.head.id if ex.head is not None else None for ex in walked[:chosen]]
        if previous_start in heads[: chosen - 1]:
            # Staying where the previous call started keeps its prefix: worth it while it
            # loses less than the step (and the exchange before it) that anchoring allows.
            kept = heads.index(previous_start) + 1
            if sum(costs[:kept]) + step + costs[kept] >= room:
                chosen, held = kept, True
    first = walked[chosen - 1].head if chosen else oldest_kept[0] if oldest_kept else None
    anchored = (oldest and chosen == len(walked)) or (first is not None and id(first) in anchors)
    return StepPlan(packer.exchanges_kept + chosen, count, anchored=anchored, held=held)
