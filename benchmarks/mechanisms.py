"""The speed mechanisms of `ContextMemory`, each turned off in the benchmark's process only.

Issue 26 (item 6): each mechanism pays for itself (10% or more of a call) or goes. The
benchmarks (`bench_middleware.py --mechanisms`, `bench_scale.py --mechanisms`) run memories
with one mechanism off beside the default ones, interleaved, and print `on_off_table`. Nothing
here changes the product: each switch replaces a part of ONE memory object (an attribute of the
instance).

- session copy (`SessionIndexes`): off = every call reads all the session's messages with their
  vectors and builds its index again (`FreshIndexes`).
- incremental reads (``read_session(held=...)``): off = the recent window is read whole on every
  call; the copy is still kept and extended from it (`WholeWindow`).
- write-behind: ``ContextMemory(write_behind=False)``.
- query caches: `QueryVectors` (off: `NoQueryVectors`, every text embedded each call). The
  ``_grams`` cache of entity lookups measured under 10% (-23% to +6%) and went.
- access counts: the copy kept per session and generation (`AccessCounts`, the default) against
  reading the session's log on every scored call (`read_access_fresh`); used only when
  ``MemoryConfig.access_salience > 0``.
- shared layouts (`ContextMemory.layouts_for`): the rendered rows and token costs of items,
  cached by content and kept between calls; off = a fresh `Layout` on every call
  (`no_shared_layouts`; `bench_layouts.py`).
- excerpt pieces (`SessionIndex.pieces`, used only with `MemoryConfig.excerpts`): each message's
  sentences and their words kept in the session copy; off = every candidate cut again on every
  call (`pieces_cut_each_call`; `bench_excerpts.py`).
- `Collections.register`: reads the partitions' entries by id on every write of records
  without a session (now) against the set of partitions seen registered (`old_register`, the
  code of HEAD before issue 26 restored on one store).

Three changes of 2026-11-27 measured the same way (not mechanisms: the code before them,
restored around one variant's calls, ``Variant(around=...)``): the candidates offered, 4 times
what the budget holds (now 3, `search_pool`; the dense search still ranks 4 times); the
session's dense search as a BLAS product (now numpy's own loop, `blas_product`: BLAS's worker
threads spin for about 10 ms of CPU after each product); and the LangChain middleware's search
sized to the whole budget (now to the room its own messages leave,
`ctxbudget.memory.reading.candidates.room_left`; `whole_budget`).

Issue 40: writes to an embedded Chroma in calls of at most ``size`` records
(`write_batch`, setting `ctxbudget.store.writes.EMBEDDED_WRITE_BATCH`; None, the default: calls
as large as Chroma takes; `bench_async.py --ingest`).

Issue 40, reads on the call path: two bounds, not mechanisms (each drops a check, so only a
benchmark may run them): `id_check_unread`, the writer's id check answered with no read (what
answering it from the session copy could save at most), and `stamps_unread`, the middleware's
stamps read answered from the last one (what folding it into the session read could save at
most).

Issue 40, third slice (2026-11-29), the code before restored around one variant:
`ids_read_first` (the middleware's stores read the ids first), `entry_read_again` (the
session's view reads its entry again after the stamps read) and `constructor_items` (retrieved
items built by ``ContextItem(...)``, not `ctxbudget.core.stored`).
"""

from __future__ import annotations

import contextlib
import statistics
import sys
import types
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ctxbudget.core.items import ContextItem
from ctxbudget.core.stored import stored_item
from ctxbudget.memory.log.analytics import access_counts
from ctxbudget.memory.reading import candidates, lexical, record_items, retrieval
from ctxbudget.memory.reading.held_indexes import SessionIndexes
from ctxbudget.memory.reading.retrieval import QueryVectors, SearchScope
from ctxbudget.memory.reading.session_index import Query, SessionIndex
from ctxbudget.memory.writing import writer
from ctxbudget.store import writes
from ctxbudget.store.records import json_key

__all__ = [
    "FreshIndexes",
    "NoQueryVectors",
    "WholeWindow",
    "blas_product",
    "constructor_items",
    "entry_read_again",
    "id_check_unread",
    "ids_read_first",
    "no_shared_layouts",
    "read_access_fresh",
    "old_register",
    "on_off_table",
    "search_pool",
    "slice3_before",
    "stamps_unread",
    "whole_budget",
    "write_batch",
    "every_message_checked",
    "stored_after_packing",
    "documents_looked_up",
    "items_one_by_one",
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


# -- shared layouts ------------------------------------------------------------------------------
def no_shared_layouts(memory: Any) -> None:
    """``memory`` renders with fresh layouts on every call (every row rendered and counted)."""
    memory.layouts_for = lambda model: {}


# -- access counts: the copy kept per session and generation, and without it ------------------
def read_access_fresh(memory: Any) -> None:
    """``memory`` reads a session's access counts from its log on every scored call (no copy)."""
    log = memory._log
    log.access.get = lambda session_id, generation, read: access_counts(read())


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


# -- before 2026-11-27: 4 times the budget offered, the session's search as a BLAS product -----
@contextlib.contextmanager
def _swapped(owner: Any, name: str, value: Any) -> Iterator[None]:
    """``owner.name`` is ``value`` inside (a module's constant, a class's method), then again
    what it was."""
    was = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, was)


def search_pool(factor: int) -> contextlib.AbstractContextManager[None]:
    """Calls inside offer ``factor`` times what the budget holds (3 now, 4 before)."""
    return _swapped(retrieval, "_POOL_FACTOR", factor)


def _blas_nearest(self: SessionIndex, vector: Sequence[float], k: int) -> tuple[Any, Any]:
    """`SessionIndex.nearest` as it was: the similarities as a BLAS matrix-vector product."""
    if not self.records or k <= 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    query = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(query))
    similarity = self._rows[: len(self.records)] @ (query / norm if norm > 0 else query)
    top = np.argsort(-similarity, kind="stable")[: min(k, len(self.records))]
    return top, np.clip(similarity[top].astype(np.float64), -1.0, 1.0)


def _blas_nearest_many(
    self: SessionIndex, vectors: Sequence[Sequence[float]], ks: Sequence[int]
) -> list[tuple[Any, Any]]:
    return [_blas_nearest(self, v, k) for v, k in zip(vectors, ks, strict=True)]


def blas_product() -> contextlib.AbstractContextManager[None]:
    """Calls inside search the session with a BLAS product, as before (no other change)."""
    return _swapped(SessionIndex, "nearest_many", _blas_nearest_many)


def pieces_cut_each_call() -> contextlib.AbstractContextManager[None]:
    """With `MemoryConfig.excerpts`: calls inside cut every candidate into sentences again,
    not keeping a message's pieces in the session copy (`SessionIndex.pieces_of`)."""
    return _swapped(SessionIndex, "pieces_of", lambda self, item: None)


def whole_budget() -> contextlib.AbstractContextManager[None]:
    """The middleware's calls inside search for the whole budget, as before."""
    from langchain_ctxbudget import middleware

    return _swapped(middleware, "room_left", lambda budget, layout, held: budget.available)


def write_batch(size: int | None) -> contextlib.AbstractContextManager[None]:
    """Writes inside go to an embedded Chroma in calls of at most ``size`` records (None: as
    large as Chroma takes, the default)."""
    return _swapped(writes, "EMBEDDED_WRITE_BATCH", size)


# -- issue 40, second slice: the middleware's candidates kept per question, as before 2026-11-29 ----
class EveryQuestionRecalled:
    """`Recalled` as before: the candidates of each of the last 1,024 questions, kept after
    their run ended."""

    def __init__(self) -> None:
        self._items: dict[tuple[str, str, str], Any] = {}

    def get(self, key: tuple[str, str, str]) -> Any:
        return self._items.get(key)

    def put(self, key: tuple[str, str, str], items: Any, stamps: Any) -> None:
        self._items[key] = (items, stamps)
        while len(self._items) > 1024:
            del self._items[next(iter(self._items))]

    def forget(self, key: tuple[str, str, str]) -> None:
        """Kept: before, nothing was forgotten."""


# -- issue 40: bounds of reads on the call path ----------------------------------------------------
def id_check_unread() -> contextlib.AbstractContextManager[None]:
    """A bound (unsafe: conflicts pass): writes inside check no id against the store."""
    return _swapped(writer, "refuse_changes", lambda *args, **kwargs: set())


def stamps_unread(memory: Any) -> None:
    """A bound (unsafe: removals go unseen): ``memory``'s stamps read is answered, after the
    first, by the last one read."""
    read = memory.store.stamps
    last: dict[tuple[Any, ...], Any] = {}

    def stamps(**kwargs: Any) -> Any:
        key = tuple(sorted(kwargs.items()))
        if key not in last:
            last[key] = read(**kwargs)
        return last[key]

    memory.store.stamps = stamps


# -- issue 40, third slice: the code before 2026-11-29's reads and items, restored ------------------
def ids_read_first(memory: Any) -> None:
    """``memory`` stores as before: the ids of what it stores are read first (no
    ``first_write_wins``, so the middleware's conflicts take its one-by-one fallback)."""
    add = memory.add_messages

    def add_messages(*args: Any, **kwargs: Any) -> Any:
        kwargs.pop("first_write_wins", None)
        return add(*args, **kwargs)

    memory.add_messages = add_messages


def entry_read_again(memory: Any) -> None:
    """``memory``'s view reads the session's entry again, not taking it from the stamps the
    middleware read just before (``candidates(stamps=...)`` ignored)."""
    gather = memory.candidates

    def candidates(*args: Any, **kwargs: Any) -> Any:
        kwargs.pop("stamps", None)
        return gather(*args, **kwargs)

    memory.candidates = candidates


_ROW_FIELDS = ("tier", "score", "role", "timestamp", "summary_of", "source", "name")
_ROW_FIELDS += ("record_id", "scope")  # a `ctxbudget.core.stored.Row` after its id and text


def constructor_items() -> contextlib.AbstractContextManager[None]:
    """Calls inside build retrieved items with ``ContextItem(...)`` (not `stored_items`)."""

    def build(rows: Sequence[Any]) -> list[ContextItem]:
        return [ContextItem(*r[:2], **dict(zip(_ROW_FIELDS, r[2:], strict=True))) for r in rows]

    return _swapped(record_items, "stored_items", build)


def items_one_by_one() -> contextlib.AbstractContextManager[None]:
    """Calls inside build retrieved items one `stored_item` call each, as before 2026-12-01
    (not `stored_items`' one loop)."""

    def build(rows: Sequence[Any]) -> list[ContextItem]:
        return [stored_item(*r[:2], **dict(zip(_ROW_FIELDS, r[2:], strict=True))) for r in rows]

    return _swapped(record_items, "stored_items", build)


def scores_one_by_one() -> contextlib.AbstractContextManager[None]:
    """Calls inside score the session's matches one record at a time (`record_score`)."""

    def each(
        scoring: Any, records: Sequence[Any], relevance: Sequence[float], newest: Any, sid: Any
    ) -> list[float]:
        return [
            lexical.record_score(scoring, r, m, newest, sid)
            for r, m in zip(records, relevance, strict=True)
        ]

    return _swapped(retrieval, "record_scores", each)


def slice3_before(memory: Any) -> None:
    """``memory`` reads as before the third slice (`ids_read_first`, `entry_read_again`)."""
    ids_read_first(memory)
    entry_read_again(memory)


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


# -- the LangChain middleware's storing (2026-11-30) ---------------------------------------------
def _stored_late(prepare: Any) -> Any:
    def stored_late(self: Any, request: Any, ids: Any, thread: Any = None) -> Any:
        from langchain_ctxbudget import storing

        held: list[Any] = []
        was = storing.store_messages

        def later(*args: Any, **kwargs: Any) -> None:
            held.append((args, kwargs))

        call_memory = sys.modules["langchain_ctxbudget.call_memory"]
        call_memory.store_messages = later  # type: ignore[attr-defined]
        try:
            result = prepare(self, request, ids, thread)  # gathers and packs
        finally:
            call_memory.store_messages = was  # type: ignore[attr-defined]
        for args, kwargs in held:  # then stored, as the model would be called
            was(*args, **kwargs)
        return result

    return stored_late


def stored_after_packing() -> contextlib.AbstractContextManager[None]:
    """Calls inside store the state's messages once packed, not right after gathering."""
    from langchain_ctxbudget.middleware import CtxBudgetMiddleware

    return _swapped(CtxBudgetMiddleware, "_prepare", _stored_late(CtxBudgetMiddleware._prepare))


def _checked_all(unstored: Any) -> Any:
    def checked_all(self: Any, memory: Any, messages: Any, keys: Any, ids: Any) -> Any:
        from langchain_ctxbudget.storing import digest

        digests, _ = unstored(self, memory, messages, keys, ids)
        [digest(m) for m in messages]  # made again by store_edits, as before
        return digests, list(range(len(messages)))  # every message checked, as before

    return checked_all


def every_message_checked() -> contextlib.AbstractContextManager[None]:
    """Calls inside check every state message and digest them twice (before 2026-11-30)."""
    from langchain_ctxbudget.call_memory import CallMemory

    return _swapped(CallMemory, "_unstored", _checked_all(CallMemory._unstored))


def documents_looked_up() -> contextlib.AbstractContextManager[None]:
    """Calls inside search the namespace's documents even when it has none, as before
    2026-12-01 (the entry's read did not say whether there are any)."""

    def scope(**fields: Any) -> SearchScope:
        return SearchScope(**{**fields, "has_documents": None})

    return _swapped(candidates, "SearchScope", scope)
