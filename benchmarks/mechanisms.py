"""The speed mechanisms of `ContextMemory`, each turned off in the benchmark's process only.

Issue 26 (item 6): each mechanism pays for itself (10% or more of a call) or goes. The
benchmarks (`bench_middleware.py --mechanisms`, `bench_scale.py --mechanisms`) run memories
with one mechanism off beside the default ones, interleaved, and print `on_off_table`. Nothing
here changes the product: each switch replaces a part of ONE memory object (an attribute of the
instance), or, for the module-level ``_grams`` cache, patches it only around the calls of the
variant that turns it off (`grams_cache_off`).

- session copy (`SessionIndexes`): off = every call reads all the session's messages with their
  vectors and builds its index again (`FreshIndexes`).
- incremental reads (``read_session(held=...)``): off = the recent window is read whole on every
  call; the copy is still kept and extended from it (`WholeWindow`).
- write-behind: ``ContextMemory(write_behind=False)``.
- query caches: `QueryVectors` (off: `NoQueryVectors`, every text embedded each call) and the
  ``_grams`` lru_cache of entity lookups (entities only; off: `grams_cache_off`).
- access counts: read fresh from the session's stored log on each use (now) against the copy
  kept in process before issue 26 (`keep_access_copy`, the removed `AccessCounts`, restored on
  one memory's log); used only when ``MemoryConfig.access_salience > 0``.
- `Collections.register`: reads the partitions' entries by id on every write of records
  without a session (now) against the set of partitions seen registered (`old_register`, the
  code of HEAD before issue 26 restored on one store).
"""

from __future__ import annotations

import statistics
import types
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ctxbudget.memory.analytics import access_counts, is_memory_tier
from ctxbudget.memory.entities import documents as entity_documents
from ctxbudget.memory.retrieval import QueryVectors
from ctxbudget.memory.session_index import Query, SessionIndex, SessionIndexes
from ctxbudget.store.records import json_key

__all__ = [
    "FreshIndexes",
    "NoQueryVectors",
    "WholeWindow",
    "grams_cache_off",
    "keep_access_copy",
    "old_register",
    "on_off_table",
]


# -- session copy and incremental reads --------------------------------------------------------
class FreshIndexes(SessionIndexes):
    """No session copy: no index is held, each call reads the session whole and indexes it."""

    def held(self, session_id: str, episode_gap: float) -> SessionIndex | None:
        return None

    def current(self, store: Any, namespace: str, session_id: str, *args: Any, **kw: Any) -> Any:
        self.forget(session_id)
        return super().current(store, namespace, session_id, *args, **kw)


class WholeWindow(SessionIndexes):
    """No incremental reads: the window is read whole (held=None); the copy is still kept."""

    def held(self, session_id: str, episode_gap: float) -> SessionIndex | None:
        return None


# -- query caches --------------------------------------------------------------------------------
class NoQueryVectors(QueryVectors):
    """A `QueryVectors` that never hits: every query and earlier turn is embedded each call."""

    def embed(self, queries: Sequence[Query], embedder: Any) -> list[list[float]]:
        texts = list(dict.fromkeys(q.text for q in queries))
        vectors = dict(zip(texts, embedder.embed_documents(texts), strict=True))
        return [vectors[q.text] for q in queries]


@contextmanager
def grams_cache_off() -> Iterator[None]:
    """Entity lookups' ``_grams`` computed on every use in the block (its lru_cache bypassed)."""
    cached = entity_documents._grams
    entity_documents._grams = cached.__wrapped__  # type: ignore[assignment]
    try:
        yield
    finally:
        entity_documents._grams = cached


# -- access counts: the copy removed by issue 26, restored on one memory ----------------------
@dataclass(slots=True)
class _Copy:
    included: deque[frozenset[str]]
    counts: Counter[str]


class _AccessCounts:
    """HEAD's ``ctxbudget.memory.access.AccessCounts`` (before issue 26), unchanged."""

    def __init__(self, retain: int) -> None:
        self._retain = retain
        self._copies: OrderedDict[str, _Copy] = OrderedDict()

    def get(self, session_id: str, read: Callable[[], Sequence[Any]]) -> Mapping[str, int]:
        copy = self._copies.get(session_id)
        if copy is None:
            records = list(read())[: self._retain]
            included = deque(
                (frozenset(access_counts([r])) for r in reversed(records)), maxlen=self._retain
            )
            copy = _Copy(included, Counter(access_counts(records)))
            self._copies[session_id] = copy
            while len(self._copies) > 128:
                self._copies.popitem(last=False)
        self._copies.move_to_end(session_id)
        return copy.counts

    def held(self, session_id: str) -> bool:
        return session_id in self._copies

    def add(self, session_id: str, included: Iterable[tuple[str, int]]) -> None:
        copy = self._copies.get(session_id)
        if copy is None:
            return
        if len(copy.included) == copy.included.maxlen:
            copy.counts.subtract(copy.included[0])
            copy.counts += Counter()
        ids = frozenset(i for i, tier in included if is_memory_tier(tier))
        copy.included.append(ids)
        copy.counts.update(ids)


def keep_access_copy(memory: Any) -> None:
    """``memory``'s access counts kept in process as before issue 26 (read once, then added to)."""
    log = memory._log
    copy = _AccessCounts(log.config.retain)
    logged = log.log

    def log_and_count(result: Any, *, session_id: str, **kw: Any) -> None:
        if copy.held(session_id):
            copy.add(session_id, ((item.id, int(item.tier)) for item in result.included))
        logged(result, session_id=session_id, **kw)

    def counts(session_id: str) -> dict[str, int]:
        return dict(copy.get(session_id, lambda: log.records(session_id)))

    log.log = log_and_count
    log.access_counts = counts


# -- Collections.register: the set of partitions seen registered (HEAD, before issue 26) -------
def _register_before(self: Any, partitions: dict[str, dict[str, str]]) -> None:
    new = {p: owner for p, owner in partitions.items() if p not in self.registered}
    if not new:
        return
    for partition in new:
        self.handle(partition, create=True)
    entries = {json_key("part", p): {"type": "part", "part": p, **o} for p, o in new.items()}
    self.upsert_meta(entries, action="register partitions", wrote="; nothing was written")
    self.registered.update(new)


def old_register(store: Any) -> None:
    """``store`` registers partitions as before issue 26: once per process, from a set."""
    cols = store._collections
    cols.registered = set()
    cols.register = types.MethodType(_register_before, cols)


# -- the table -----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Pair:
    """One row: a mechanism, and the variants that have it on and off (sample lists' keys)."""

    mechanism: str
    on: str
    off: str


def on_off_table(pairs: Sequence[Pair], samples: Mapping[str, list[float]], load: str) -> str:
    """mechanism | on p50 | off p50 | off / on | benefit (1 - on / off) | verdict | load."""
    out = [
        "| mechanism | on: variant | on p50 ms | off: variant | off p50 ms | off / on "
        "| benefit | verdict | load |",
        "|---|---|--:|---|--:|--:|--:|---|---|",
    ]
    for pair in pairs:
        if pair.on not in samples or pair.off not in samples:
            continue
        on = statistics.median(samples[pair.on])
        off = statistics.median(samples[pair.off])
        benefit = 1.0 - on / off if off > 0 else 0.0
        verdict = "keep" if benefit >= 0.10 else "under 10%"
        out.append(
            f"| {pair.mechanism} | {pair.on} | {on:.1f} | {pair.off} | {off:.1f} | "
            f"{off / on:.2f} | {100 * benefit:+.0f}% | {verdict} | {load} |"
        )
    return "\n".join(out)
