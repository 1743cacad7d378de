"""Shrinking content: summaries that replace what they cover, on-the-fly summaries, truncation.

- `substitutions`: offered summaries (``summary_of`` or ``cluster_id``) that stand in for what
  they cover when some of it was left out; `is_redundant`: one whose every item was kept.
- `shrink_rest`: what a tier left out, truncated (`truncate_to_tokens`; at line boundaries,
  `ctxbudget.core.lines.cut_lines`) or summarized by a `Summarizer` (`ExtractiveSummarizer`
  needs no model) into the room that is left.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from ctxbudget.core.accounting import PackState
from ctxbudget.core.history import RemainingHistory
from ctxbudget.core.ids import internal_id
from ctxbudget.core.items import ContextItem, Shrink, Tier
from ctxbudget.core.lines import cut_lines
from ctxbudget.core.report import PrunedItem, PruneReason
from ctxbudget.core.unicode import lone_surrogate
from ctxbudget.errors import ConfigurationTypeError, InvalidItemError

__all__ = [
    "ExtractiveSummarizer",
    "Summarizer",
    "is_redundant",
    "shrink_rest",
    "split_sentences",
    "substitutions",
    "truncate_to_tokens",
]

_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+|\n+")
_WORD = re.compile(r"\w+", re.UNICODE)
_STOP = frozenset(
    "a an and are as at be but by for from has have he her his i in is it its me my of on or "
    "our she so that the their them they this to was we were what when which who will with "
    "you your".split()
)


@runtime_checkable
class Summarizer(Protocol):
    """Makes one summary of several texts within a token limit.

    Any object with this method works: the extractive one here, or one backed by an LLM (the
    LangChain and LlamaIndex packages ship those).
    """

    def summarize(self, texts: Sequence[str], max_tokens: int) -> str:
        """Summarize ``texts`` (in order) in at most ``max_tokens`` tokens."""
        ...


def split_sentences(text: str) -> list[str]:
    """Split text at sentence ends and line breaks, dropping empty pieces.

    >>> split_sentences("One. Two!  Three?")
    ['One.', 'Two!', 'Three?']
    """
    return [piece.strip() for piece in _SENTENCE_END.split(text) if piece.strip()]


def truncate_to_tokens(
    text: str, max_tokens: int, count: Callable[[str], int], *, marker: str = " …"
) -> str | None:
    """The longest run of whole sentences from the start of ``text`` that fits ``max_tokens``.

    Falls back to whole words when not even the first sentence fits; returns None when nothing
    useful fits. A marker shows the text was cut (counted within the limit).
    """
    if count(text) <= max_tokens:
        return text
    best = _longest_fitting(split_sentences(text), max_tokens, count, marker)
    if best is not None:
        return best
    return _longest_fitting(text.split(), max_tokens, count, marker)


def _longest_fitting(
    parts: Sequence[str], max_tokens: int, count: Callable[[str], int], marker: str
) -> str | None:
    """The longest ``" ".join(parts[:n]) + marker`` (n < len(parts)) that fits ``max_tokens``."""
    # Counts grow with the prefix, so a binary search finds the longest that fits. Each part
    # costs at least one token, so no more than max_tokens parts can fit: prefixes are built
    # one at a time and never longer than that (a huge text costs no more than a short one).
    low, high, best = 1, min(len(parts) - 1, max_tokens), None
    while low <= high:
        middle = (low + high) // 2
        candidate = " ".join(parts[:middle]) + marker
        if count(candidate) <= max_tokens:
            best = candidate
            low = middle + 1
        else:
            high = middle - 1
    return best


class ExtractiveSummarizer:
    """A summarizer that needs no model: it keeps the most informative sentences.

    Sentences are scored by the frequency of their content words across all the texts (a
    classic frequency summary), the best are kept within the token limit, and they are shown in
    their original order.

    Args:
        count: the token counter used to respect ``max_tokens`` (``TokenCounter.count``).

    >>> from ctxbudget import TokenCounter
    >>> s = ExtractiveSummarizer(TokenCounter.for_model("gpt-4o").count)
    >>> s.summarize(["I moved to Lisbon in May.", "Lisbon is sunny. I like it."], 12)
    'I moved to Lisbon in May. Lisbon is sunny.'
    """

    def __init__(self, count: Callable[[str], int]) -> None:
        self._count = count

    def summarize(self, texts: Sequence[str], max_tokens: int) -> str:
        """Summarize ``texts`` in at most ``max_tokens`` tokens (empty when nothing fits)."""
        sentences = [s for text in texts for s in split_sentences(text)]
        if not sentences or max_tokens <= 0:
            return ""
        words = [[w.casefold() for w in _WORD.findall(s)] for s in sentences]
        frequency = Counter(w for ws in words for w in ws if w not in _STOP)
        top = max(frequency.values(), default=1)

        def score(i: int) -> float:
            content = [w for w in words[i] if w not in _STOP]
            if not content:
                return 0.0
            return sum(frequency[w] / top for w in content) / math.sqrt(len(content))

        ranked = sorted(range(len(sentences)), key=lambda i: (-score(i), i))
        chosen: list[int] = []
        for i in ranked:
            candidate = " ".join(sentences[j] for j in sorted([*chosen, i]))
            if self._count(candidate) <= max_tokens:
                chosen.append(i)
        if not chosen:
            first = truncate_to_tokens(sentences[ranked[0]], max_tokens, self._count)
            return first or ""
        return " ".join(sentences[j] for j in sorted(chosen))


# -- in an assembly ------------------------------------------------------------------------
_ROOM_REASONS = frozenset({PruneReason.OVER_BUDGET, PruneReason.TIER_CAP})


def is_redundant(summary: ContextItem, included: set[str]) -> bool:
    """Whether ``summary`` covers listed items (``summary_of``) that are all ``included``."""
    return bool(summary.summary_of) and all(i in included for i in summary.summary_of)


def substitutions(
    groups: dict[int | None, list[ContextItem]], state: PackState
) -> dict[str, ContextItem]:
    """Summaries to use in place of clusters that did not fully fit, costliest first.

    A summary covers the ids in its ``summary_of``, or, when that is empty, every item of
    its ``cluster_id``. It replaces them when at least one of them was left out for want of
    room; it then takes the highest tier and score of what it covers.

    Returns:
        The summary (so promoted) that stands in for each covered id.
    """
    summaries = [it for it in groups.get(int(Tier.SUMMARY), []) if it.summary_of or it.cluster_id]
    if not summaries:
        return {}
    items = [it for members in groups.values() for it in members]
    left_out = {p.item.id for p in state.pruned if p.reason in _ROOM_REASONS}
    for items_lazy, reason, _ in state.lazy:
        if reason in _ROOM_REASONS and not isinstance(items_lazy, RemainingHistory):
            left_out.update(it.id for it in items_lazy)
    remaining = next((s for s, _, _ in state.lazy if isinstance(s, RemainingHistory)), None)
    if remaining is not None:
        left_out.update(it.id for it in remaining)
    by_id = {it.id: it for it in items}
    required = {id(it) for it in groups.get(None, ())}
    layout = state.layout
    plans: list[tuple[int, str, ContextItem, list[ContextItem]]] = []
    for summary in summaries:
        if summary.summary_of:
            members = [by_id[i] for i in summary.summary_of if i in by_id]
        else:
            members = [
                it for it in items if it.cluster_id == summary.cluster_id and it is not summary
            ]
        members = [
            m
            for m in members
            if not m.never_pruned and m.tier != Tier.SUMMARY and id(m) not in required
        ]
        if not members or not any(m.id in left_out for m in members):
            continue
        cost = sum(layout.cost(m, layout.section_of(m)) for m in members)
        plans.append((cost, summary.id, summary, members))
    replaced: dict[str, ContextItem] = {}
    for _, _, summary, members in sorted(plans, key=lambda p: (-p[0], p[1])):
        members = [m for m in members if m.id not in replaced]
        if not members:
            continue
        promoted = dataclasses.replace(
            summary,
            tier=min(int(m.tier) for m in members),
            score=max(m.score for m in members),
        )
        for member in members:
            replaced[member.id] = promoted
    return replaced


def shrink_rest(
    items: list[ContextItem],
    sections: list[str],
    rest: list[int],
    state: PackState,
    left: int,
    *,
    summarizer: Summarizer | None,
    min_tokens: int,
) -> int:
    """Use what room is left for items that may be truncated or summarized.

    Args:
        items: a tier's candidates.
        sections: the section each of them is packed in.
        rest: the indices of those left out, best first.
        state: the pass they are added to.
        left: the tokens the tier may still use.
        summarizer: summarizes the ``shrink="summarize"`` items (None: they stay out).
        min_tokens: the shortest truncated text or summary worth keeping.

    Returns:
        The tokens the tier may still use afterwards.
    """
    layout = state.layout
    summarizable: list[int] = []
    for i in rest:
        item, section = items[i], sections[i]
        if item.shrink is Shrink.SUMMARIZE and summarizer is not None:
            summarizable.append(i)
            continue
        if not item.shrink.cuts:
            continue
        room = left - state.open_cost(section) - state.date_cost(item, section)
        if room < min_tokens:
            continue

        def cost(text: str, item: ContextItem = item, section: str = section) -> int:
            return layout.cost(dataclasses.replace(item, text=text, tokens=None), section)

        metadata: Mapping[str, Any] = item.metadata
        if item.shrink is Shrink.TRUNCATE:
            text = truncate_to_tokens(item.text, room, cost)
        else:
            cut = cut_lines(item.text, room, cost, tail=item.shrink is Shrink.LINES_HEAD_TAIL)
            text = None if cut is None else cut.text
            if cut is not None and cut.elided:  # how much was cut, for whoever reads the item
                metadata = {**item.metadata, "elided": cut.as_metadata()}
        if text is None or cost(text) < min_tokens:
            continue
        short = dataclasses.replace(item, text=text, tokens=None, metadata=metadata)
        before = state.used
        state.add(short, section, cost(text))
        left -= state.used - before
        if text != item.text:
            state.truncated.append(item.id)
    if summarizable and summarizer is not None:
        left = _summarize(summarizer, items, summarizable, state, left, min_tokens)
    return left


def _summarize(
    summarizer: Summarizer,
    items: list[ContextItem],
    indices: list[int],
    state: PackState,
    left: int,
    min_tokens: int,
) -> int:
    layout = state.layout
    group = [items[i] for i in indices]
    template = dataclasses.replace(
        group[0],
        id=internal_id("summary", _digest(sorted(it.id for it in group))),
        text="",
        summary_of=tuple(it.id for it in group),
        shrink=Shrink.DROP,
        role=None,
        name=None,
        tokens=None,
        tool_calls=(),
        tool_call_id=None,
        parts=None,
        metadata={},
    )
    section = "summaries"
    room = left - state.open_cost(section) - state.date_cost(template, section)
    overhead = layout.cost(dataclasses.replace(template, text="x"), section) - 1
    if room - overhead < min_tokens:
        return left
    made: object = summarizer.summarize([it.text for it in group], room - overhead)
    text = _summary_text(summarizer, made).strip()
    if not text:
        return left
    summary = dataclasses.replace(template, text=text)
    cost = layout.cost(summary, section)
    if cost > room:
        shorter = truncate_to_tokens(
            text, room, lambda t: layout.cost(dataclasses.replace(summary, text=t), section)
        )
        if shorter is None:
            return left
        summary = dataclasses.replace(summary, text=shorter)
        cost = layout.cost(summary, section)
    before = state.used
    state.add(summary, section, cost)
    for item in group:
        detail = f"summarized into {summary.id}"
        state.pruned.append(PrunedItem(item, PruneReason.REPLACED_BY_SUMMARY, detail))
        state.included_ids.add(item.id)  # handled: not reported again as over budget
    return left - (state.used - before)


def _summary_text(summarizer: Summarizer, made: object) -> str:
    """What ``summarizer`` made, if it is text a model can be sent; else an error naming it."""
    who = f"{type(summarizer).__name__}.summarize"
    if not isinstance(made, str):
        msg = (
            f"{who} returned {type(made).__name__}, not a str; a Summarizer returns the "
            "summary's text ('' when it has none)"
        )
        raise ConfigurationTypeError(msg)
    problem = lone_surrogate(made)
    if problem is not None:
        msg = f"the summary {who} made {problem}"
        raise InvalidItemError(msg)
    return made


def _digest(ids: Sequence[str]) -> str:
    return hashlib.sha1("\x1f".join(ids).encode("utf-8", "surrogatepass")).hexdigest()[:12]
