"""The newer statement wins: a retrieved message comes with the later one that restates it.

"I live in Lisbon" in March, "we moved to Porto" in June: asked "where do I live?", a search
finds the March turn (it shares the question's words) and may miss the June one (it shares
little with either). So when the memory offers one of the session's messages M, it also looks
for its *successor*: a later message by the same author, said at a later time, that reads as an
update (a statement that says "moved to", "no longer", "instead", "renamed"... and does not
deny it: `says_update`), with M and it each among the other's `NEAREST` closest messages of
that author in meaning (cosine of the vectors already in memory in `SessionIndex`, at least
`CLOSE`). On LoCoMo's dev conversations no pair passes all of these (0 links over 999
questions at 1k), so its recall does not move; the updates of
tests/memory/test_newer_statements.py do. The successor is offered with a score at least M's,
and M names it in `ContextItem.newer`: the core then never sends M without it, and marks M's
row as earlier (`ctxbudget.core.newer`). No model runs at write time: the words that announce
an update and the vectors the search already holds are enough.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING

import numpy as np

from ctxbudget.core.items import ContextItem, Tier
from ctxbudget.store.records import Record

if TYPE_CHECKING:
    from ctxbudget.memory.reading.session_index import SessionIndex

__all__ = ["CLOSE", "NEAREST", "TOP", "says_update", "with_successors"]

NEAREST = 2
"""A successor is one of the later messages of its author closest to the earlier one: an update
restates its subject, a message that merely shares a word with it is further away."""

TOP = 8
"""How many of the best retrieved turns have their successors looked for: a question about a
fact finds the earlier statement among its best matches; further down, a link costs room that
evidence of other questions needs."""

CLOSE = 0.25
"""Least cosine between a message and a later one that restates it (all-MiniLM-L6-v2: the
updates of tests/memory/test_newer_statements.py score 0.28-0.70 with what they update)."""

# Words that announce a change of a fact said before (English): a move, a new job, a plan or a
# meeting changed, something renamed, sold, given up, a new job or home.
_UPDATE = re.compile(
    r"\b(?:no longer|anymore|instead|these days|nowadays|change of plans?|changed my mind|"
    r"moved (?:to|out|in|away|back|house)|relocated|switched|quit|resigned|"
    r"retired|renamed|rescheduled|postponed|pushed (?:back|to)|cancell?ed|called off|"
    r"sold|gave up|given up|stopped|started (?:a|my) new|now (?:live|work)s?|"
    r"(?:live|living|work|working|based|staying) (?:\w+ ){0,4}now|"
    r"(?:my|our) new (?:job|home|house|place|flat|apartment|address|car|number|phone|role|"
    r"position|boss|team|city|school|name))\b",
    re.IGNORECASE,
)
_SENTENCES = re.compile(r"[^.!?]+[.!?]*")
# "Don't quit", "I won't ever quit", "anyone else would quit": a change denied or imagined.
_NOT = re.compile(
    r"(?:n['\u2019]t|\bnot|\bnever|\bwould|\bcould|\bshould|\bmight|['\u2019]d)\s+(?:\w+\s+)?$",
    re.IGNORECASE,
)


def says_update(text: str) -> bool:
    """Whether a message reads as an update of something said before.

    A statement (not a question) with words that announce a change of a fact said before,
    not denied or imagined ("don't quit", "I would quit").

    >>> says_update("We moved to Porto last week"), says_update("Made any more art?")
    (True, False)
    >>> says_update("Don't quit!"), says_update("I quit the hospital.")
    (False, True)
    """
    for sentence in _SENTENCES.findall(text):
        if sentence.rstrip().endswith("?"):
            continue
        for found in _UPDATE.finditer(sentence):
            denied = _NOT.search(sentence, 0, found.start()) is not None
            if not denied or found.group(0).lower() == "anymore":  # "not ... anymore" is one
                return True
    return False


def with_successors(
    items: list[ContextItem],
    index: SessionIndex,
    *,
    limit: int,
    history: Collection[str],
    skip: Collection[str],
    make: Callable[[Record, float], ContextItem],
) -> list[ContextItem]:
    """``items`` (best first) with each message's successor linked, and offered when new.

    Of the first ``limit`` items, each of the session's messages with a successor names it
    in ``newer``. A successor among ``items`` is scored at least as the message it restates;
    one in ``history`` (the recent turns offered) is only named; any other is added
    (``make(record, score)``) with the message's score. Ids in ``skip`` are never offered.
    Returns ``items`` itself when nothing is linked.
    """
    updates = index.updates()
    if not updates or not any(updates):
        return items
    later = [int(q) for q in np.flatnonzero(np.asarray(updates, dtype=bool))]
    position: dict[str, int] = {}
    for item in items[:limit]:
        p = index.position.get(item.id) if item.record_id == item.id else None
        if p is not None and p < later[-1] and item.tier == Tier.RETRIEVED:
            position[item.id] = p
    found = _successors(index, position, later) if position else {}
    if not found:
        return items
    by_id = {it.id: n for n, it in enumerate(items)}
    out = list(items)
    for earlier, successor in found.items():
        record = index.records[successor]
        if record.id in skip or not record.text.strip():
            continue
        n = by_id[earlier]
        score = out[n].score
        m = by_id.get(record.id)
        if m is not None:
            if out[m].score < score:
                out[m] = dataclasses.replace(out[m], score=score)
        elif record.id not in history:
            by_id[record.id] = len(out)
            out.append(make(record, score))
        out[n] = dataclasses.replace(out[n], newer=(*out[n].newer, record.id))
    out.sort(key=lambda it: (-it.score, it.id))
    return out


def _successors(
    index: SessionIndex, position: dict[str, int], later: Sequence[int]
) -> dict[str, int]:
    """Each message's successor, by id.

    The closest later update by its author, at least `CLOSE` to it, where each of the two is
    among the other's `NEAREST` closest messages of that author. Only the update messages are
    compared first (few): a whole row of the session is compared only once per message that
    has a candidate pair (`_Nearest`), whatever the number of updates.
    """
    ids = list(position)
    rows = [position[i] for i in ids]
    cues = np.asarray(later)
    vectors = index.vectors
    records = index.records
    near = np.einsum("ij,kj->ik", vectors[rows], vectors[cues])  # no BLAS threads
    nearest = _Nearest(index)
    codes = nearest.codes
    found: dict[str, int] = {}
    for n, item_id in enumerate(ids):
        p = rows[n]
        # Later updates by the same author, close enough: few, so the loop below is short.
        fit = np.flatnonzero((near[n] >= CLOSE) & (cues > p) & (codes[cues] == codes[p]))
        for k in fit[np.argsort(-near[n, fit], kind="stable")]:
            q = int(cues[k])
            if (
                _later(records, p, q)
                and q in nearest.of(p, later=True)
                and p in nearest.of(q, later=False)
            ):
                found[item_id] = q
                break
    return found


class _Nearest:
    """The `NEAREST` messages closest to a message, by its author, on one side of it (one call).

    Authors are coded once per session index (`SessionIndex.author_codes`); each message's
    row is compared once per call.
    """

    def __init__(self, index: SessionIndex) -> None:
        self._vectors = index.vectors
        self.codes = index.author_codes()
        self._found: dict[tuple[int, bool], set[int]] = {}

    def of(self, anchor: int, *, later: bool) -> set[int]:
        """The `NEAREST` messages by ``anchor``'s author closest to it, later or earlier."""
        key = (anchor, later)
        known = self._found.get(key)
        if known is None:
            start = anchor + 1 if later else 0
            side = self.codes[start:] if later else self.codes[:anchor]
            same = np.flatnonzero(side == self.codes[anchor]) + start
            similarity = np.einsum("ij,j->i", self._vectors[same], self._vectors[anchor])
            best = np.argsort(-similarity, kind="stable")[:NEAREST]
            known = {int(same[int(b)]) for b in best}
            self._found[key] = known
        return known


def _later(records: Sequence[Record], earlier: int, later: int) -> bool:
    """Said at a later time, when both are dated.

    A fact restated in the same breath (or turns stored with one date) is not an update.
    """
    then, now = records[earlier].timestamp, records[later].timestamp
    return then is None or now is None or now > then
