"""The reranker stage: a ranking the user brings reorders the top of the retrieved candidates.

`MemoryConfig.reranker` is anything `as_reranker` takes: a plain callable
``(query, texts) -> scores`` (sync or async), an object shaped like a sentence-transformers
``CrossEncoder`` (it has ``.predict(pairs)``), or what an adapter registered a converter for
(`register_converter`: ``langchain_ctxbudget.rerank`` for LangChain document compressors,
``llama_index.ctxbudget.rerank`` for LlamaIndex node postprocessors). The core imports no
framework: the adapters teach it theirs.

`rerank` runs in `ContextMemory.candidates` (so in `assemble`, the async twins and every
adapter that gathers through it), once per call, after the candidates are scored:

1. the best `MemoryConfig.reranker_top` retrieved candidates (turns, other sessions,
   documents; best first by their score) are the ``N`` it sees, in one call, with their texts;
2. its scores are blended with the pipeline's own (`blended`): both are min-max scaled to
   [0, 1] over the ``N`` (the reranker's scores as ``r``; the pipeline's relevance, each
   score's ``relevance_weight``-th root, as ``p``), and mixed by
   `MemoryConfig.reranker_weight` ``w``: ``b = w * r + (1 - w) * p``; then
   ``score = low + (top - low) * b ** relevance_weight * recency ** recency_weight``, where
   ``top`` is the best score the ``N`` had and ``low`` the best of the candidates past them
   (0 when there are none), ``relevance_weight`` and ``recency`` are `Scoring`'s (age counted
   to the newest candidate). Candidates past the ``N`` keep their scores, so the ``N`` stay
   above them (as they were: the ``N`` are the best) and within the range they had against
   the other tiers; a reranker that agrees with the pipeline (the same order, the same ties)
   changes nothing (`_agrees`), and ``p`` is each score over its recency (`_own`). A message's
   successor (`ctxbudget.memory.reading.successors`) is again scored at least as the message
   it restates. Packing then picks by the new scores, within the same tiers, floors and caps.
   ``w = 1`` is the reranker's scores replacing the pipeline's; below it, what the reranker
   gets wrong about a candidate the pipeline ranks low is outweighed (a noisy reranker over a
   deep pool did worse than none when its scores replaced the pipeline's; blended at the
   default 0.5 it does better at every budget: docs/benchmarks.md, "Rerankers: what the
   pipeline carries").

It runs on a thread of its own (an async one is awaited on the caller's own event loop when the
memory was called async, else on one event loop per process:
`ctxbudget.memory.reading.coroutines`, so the client it keeps serves every call) and is
waited for at most `MemoryConfig.reranker_timeout` seconds; while a reranker that was late
still runs, the memory's later calls skip it (``timeout``) instead of starting another thread.
The memory's ``close`` waits for those threads (`RerankWarnings.close`, bounded by
`ctxbudget.memory.closing.MODEL_WAIT`).
A reranker that raises (``failed``), is late (``timeout``) or returns something other than one
finite number per text (``invalid``: the one rule, `ranking.reranker_scores`, takes numbers or
an array or tensor of shape ``(n,)`` or ``(n, 1)``; an answer whose reading raises too, and
it is read on the reranker's thread, within the timeout) leaves the candidates as they were:
the call never fails for it. Each kind of failure is logged once
per memory (`RerankWarnings`); every call records ``ctxbudget.rerank.status`` (``ok``,
``failed``, ``timeout``, ``invalid``; ``cancelled``, not logged, when an async call is
cancelled while its async reranker runs: that coroutine is cancelled on the caller's loop, and
the call ends at once) on the ``ctxbudget.candidates`` span.
"""

from __future__ import annotations

import contextvars
import dataclasses
import inspect
import itertools
import logging
import math
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ctxbudget.core.numbers import shown
from ctxbudget.errors import ConfigurationError, InvalidValueError
from ctxbudget.memory.closing import join_model_threads
from ctxbudget.memory.policy.ranking import (
    CrossEncoderReranker,
    Reranker,
    as_reranker,
    register_converter,
    reranker_scores,
)
from ctxbudget.memory.reading.coroutines import (
    awaited,
    call_cancelled,
    closing_here,
    give_up_here,
)
from ctxbudget.telemetry.operations import note_on_span

if TYPE_CHECKING:
    from ctxbudget.core.items import ContextItem
    from ctxbudget.memory.policy.config import MemoryConfig
    from ctxbudget.memory.reading.candidates import Candidates

__all__ = [
    "CrossEncoderReranker",
    "Reranker",
    "RerankWarnings",
    "as_reranker",
    "blended",
    "register_converter",
    "rerank",
]

logger = logging.getLogger(__name__)

_SAID = 240  # characters of a reranker's error (or name) its warning shows


class RerankWarnings:
    """The kinds of reranker failure a memory has logged (each is logged once), thread-safe.

    It also holds the threads of the memory's reranker calls. While one that outlived its call
    (``timeout``) runs, later calls skip the reranker at once (status ``timeout``) rather than
    wait for it again and leave one more thread behind, so a hung reranker holds one thread
    per memory (one per call that was already waiting on it when it went late, for calls made
    at once from several threads: each of those is kept, not only the last). `close` waits for
    every one of them (the memory's ``close``), and starts no more: ``refuse`` (the memory's
    closed check) raises for a call the close overtook.
    """

    def __init__(self, *, refuse: Callable[[], None] | None = None) -> None:
        self._seen: set[str] = set()
        self._lock = threading.Lock()
        self._late: list[threading.Thread] = []
        self._running: dict[threading.Thread, str] = {}  # every call's thread: its reranker
        self._refuse = refuse
        self._closed = False

    def late(self) -> bool:
        """True while a reranker call that outlived its call still runs."""
        with self._lock:
            self._late = [thread for thread in self._late if thread.is_alive()]
            return bool(self._late)

    def went_late(self, thread: threading.Thread) -> None:
        """Keep ``thread`` (a reranker call past its timeout) until it ends."""
        with self._lock:
            self._late.append(thread)

    def start(self, thread: threading.Thread, name: str) -> bool:
        """Start ``thread`` (a call of the reranker ``name``), kept for `close`.

        False once closed (nothing started) when no ``refuse`` raises instead.
        """
        with self._lock:
            if self._closed:
                if self._refuse is not None:
                    self._refuse()
                return False
            self._running = {t: n for t, n in self._running.items() if t.is_alive()}
            self._running[thread] = name
            thread.start()
            return True

    def stop_waiting_here(self) -> None:
        """A close begins on an event loop's thread: calls awaiting that loop stop waiting.

        The close blocks the loop, so it would wait for the memory's running calls, and they
        for their reranker's coroutine there, until ``reranker_timeout`` (`give_up_here`).
        """
        with self._lock:
            running = [t for t in self._running if t.is_alive()]
        give_up_here(running)

    def close(self) -> None:
        """Start no more calls; return once the running ones ended (`join_model_threads`)."""
        with self._lock:
            self._closed = True
            running = {t: n for t, n in self._running.items() if t.is_alive()}
        if running:
            names = " and ".join(sorted(set(running.values())))
            with closing_here(list(running)):  # a close that blocks the loop they await
                join_model_threads(list(running), model=names)

    def first(self, kind: str) -> bool:
        """True the first time ``kind`` is seen (then it is logged), False afterwards."""
        with self._lock:
            if kind in self._seen:
                return False
            self._seen.add(kind)
            return True


def rerank(
    found: Candidates, query: str, config: MemoryConfig, warnings: RerankWarnings
) -> Candidates:
    """``found`` with its best retrieved candidates reordered by ``config.reranker``.

    Call it only when a reranker is set. Never raises for the reranker (see the module
    docstring): on failure ``found`` is returned as it was.
    """
    reranker = config.reranker
    retrieved = found.retrieved
    if reranker is None or len(retrieved) < 2:
        return found
    top = list(retrieved[: config.reranker_top])
    texts = [item.text for item in top]
    status, scores, detail = _run(reranker, query, texts, config.reranker_timeout, warnings)
    note_on_span({"ctxbudget.rerank.status": status, "ctxbudget.rerank.candidates": len(top)})
    if scores is None:
        if status != "cancelled" and warnings.first(status):  # a cancel is the caller's
            logger.warning(
                "%s; the candidates keep their own ranking (logged once per memory for this "
                "kind of failure)",
                detail,
            )
        return found
    if _agrees(top, scores):  # nothing to reorder (a blend would shift the ages' weight)
        return dataclasses.replace(found, retrieved=tuple(_successors_kept(list(retrieved))))
    rest = list(retrieved[len(top) :])
    low = max((it.score for it in rest), default=0.0)
    rescored = sorted(_rescored(top, scores, config, low), key=lambda it: (-it.score, it.id))
    # The N first: a tie with the best of the rest (the N's lowest lands on it) keeps them above.
    ordered = _successors_kept([*rescored, *rest])
    return dataclasses.replace(found, retrieved=tuple(ordered))


def _successors_kept(items: list[ContextItem]) -> list[ContextItem]:
    """``items`` with each successor scored at least as the message naming it in ``newer``.

    Along a chain too (A names B, B names C: C ends at least as high as A's score reaches B):
    a floor is passed on link by link until none rises, so the newest statement never ends
    below one it updates.
    """
    scores = {it.id: it.score for it in items}
    links = [(it.id, later) for it in items for later in it.newer if later in scores]
    if not links:
        return items
    for _ in range(len(links)):  # a chain of n links settles in n rounds; no cycle is needed
        raised = False
        for earlier, later in links:
            if scores[later] < scores[earlier]:
                scores[later] = scores[earlier]
                raised = True
        if not raised:
            break
    out = [
        dataclasses.replace(it, score=scores[it.id]) if it.score < scores[it.id] else it
        for it in items
    ]
    changed = any(a is not b for a, b in zip(out, items, strict=True))
    return sorted(out, key=lambda it: -it.score) if changed else out  # stable: ties as they were


def blended(pipeline: list[float], reranker: list[float], weight: float) -> list[float]:
    """Each candidate's blended relevance in [0, 1] (step 2 of the module docstring).

    ``pipeline``: the candidates' relevance as the pipeline ranks them (any scale, higher is
    better); ``reranker``: the reranker's scores of the same candidates, in the same order
    (as many); ``weight``: the reranker's share. Each side is min-max scaled over the
    candidates first (a side with one value for all ranks them equal: it adds the same to
    each). Higher in either side never lowers a candidate's blend.

    >>> blended([1.0, 0.5, 0.0], [0.0, 0.0, 9.0], 0.6)
    [0.4, 0.2, 0.6]
    """
    p, r = _scaled(pipeline), _scaled(reranker)
    return [weight * a + (1.0 - weight) * b for a, b in zip(r, p, strict=True)]


def _scaled(values: list[float]) -> list[float]:
    low, high = min(values, default=0.0), max(values, default=0.0)
    if not (math.isfinite(low) and math.isfinite(high)):  # else the halving below never ends
        msg = f"scores to blend must be finite numbers, got {shown(values)}"
        raise InvalidValueError(msg)
    if high <= low:
        return [1.0] * len(values)
    if not math.isfinite(high - low):  # finite scores whose span overflows (-1e308 to 1e308)
        return _scaled([v / 4.0 for v in values])
    return [min(1.0, max(0.0, (v - low) / (high - low))) for v in values]


def _agrees(top: list[ContextItem], scores: list[float]) -> bool:
    """Whether ``scores`` rank ``top`` as the pipeline did: the same order, the same ties."""
    pairs = zip(itertools.pairwise(scores), itertools.pairwise(top), strict=True)
    return all(r1 >= r2 and (r1 > r2) == (a.score > b.score) for (r1, r2), (a, b) in pairs)


def _rescored(
    top: list[ContextItem], scores: list[float], config: MemoryConfig, low: float
) -> list[Any]:
    if max(scores) <= min(scores):  # one score for all: no order to take
        return top
    best = max(item.score for item in top)
    low = min(low, best)
    weights = config.scoring
    sharpen = weights.relevance_weight
    stamps = [item.timestamp for item in top if item.timestamp is not None]
    newest = max(stamps) if stamps else None
    aged = []  # recency ** recency_weight of each
    for item in top:
        age = 0.0 if newest is None or item.timestamp is None else newest - item.timestamp
        recency = 0.5 ** (max(0.0, age) / (weights.half_life_days * 86_400.0))
        aged.append(recency**weights.recency_weight)
    mixed = blended(_own(top, aged, sharpen), scores, config.reranker_weight)
    return [
        dataclasses.replace(item, score=low + (best - low) * relevance**sharpen * recent)
        for item, relevance, recent in zip(top, mixed, aged, strict=True)
    ]


def _own(top: list[ContextItem], aged: list[float], sharpen: float) -> list[float]:
    """The pipeline's relevance behind each score: the score over its recency, then the root.

    A score is relevance ** relevance_weight x recency ** recency_weight x salience. The
    recency is taken out because `_rescored` puts it back (until 2026-12-01 it was left in,
    and an older candidate paid for its age twice: a reranker that agreed with the pipeline
    moved older turns down). Each is taken over the best before its root: min-max scaling
    drops that common factor, and the roots stay in [0, 1] (a score above 1, from a salience
    above 1, to the power 1 / a small relevance_weight overflowed a float).
    """
    own = [max(0.0, it.score) / max(recent, 1e-300) for it, recent in zip(top, aged, strict=True)]
    if sharpen <= 0:
        return own
    best = max(own, default=0.0)
    if not best > 0 or not math.isfinite(best):
        return [0.0] * len(top)  # none above 0 (or none finite): one relevance for all
    return [(value / best) ** (1.0 / sharpen) for value in own]


def _run(
    reranker: Reranker, query: str, texts: list[str], timeout: float, warnings: RerankWarnings
) -> tuple[str, list[float] | None, str]:
    """(status, scores or None, what went wrong) of one call on a thread of its own."""
    name = f"the reranker {_name(reranker)}"
    if warnings.late():
        detail = f"{name} is still running an earlier call past reranker_timeout={timeout:g}s"
        return "timeout", None, detail
    box: dict[str, Any] = {}
    done = threading.Event()

    def work() -> None:
        try:
            # A copy: a reranker that consumes its list (``del texts[:8]`` per batch) must not
            # change how many scores are due.
            out: Any = reranker(query, list(texts))
            if inspect.isawaitable(out):  # an async reranker: on the one loop (coroutines)
                out = awaited(out)
        except Exception as exc:  # noqa: BLE001 - whatever it raises, the call goes on
            box["error"] = exc
        else:
            # Read here too, within the timeout: an answer slow to read (a tensor its device
            # still computes) held the caller past it until 2026-12-02.
            try:  # the one rule for what a reranker returns (ranking.reranker_scores)
                box["scores"] = reranker_scores(out, len(texts), reranker=_name(reranker))
            except ConfigurationError as refused:
                box["refused"] = refused
        finally:
            done.set()

    context = contextvars.copy_context()  # the caller's spans and callbacks
    thread = threading.Thread(target=context.run, args=(work,), name="ctxbudget-rerank")
    thread.daemon = True  # a hung reranker never keeps the process from exiting
    if not warnings.start(thread, name):
        return "failed", None, f"{name} was not called: the memory closed"
    if not done.wait(timeout):
        warnings.went_late(thread)
        return "timeout", None, f"{name} took longer than reranker_timeout={timeout:g}s"
    if "error" in box:
        error = box["error"]
        if call_cancelled():  # its async caller was cancelled (`awaited` stopped waiting)
            return "cancelled", None, f"{name} was cancelled with its call"
        return "failed", None, f"{name} raised {type(error).__name__}: {_said(error)}"
    if "refused" in box:
        return "invalid", None, str(box["refused"])
    if "scores" not in box:
        return "failed", None, f"{name} ended without a result"
    return "ok", box["scores"], ""


def _name(reranker: Reranker) -> str:
    """The reranker as its warning names it.

    A function by its name (an adapter's says what it wraps:
    ``compressor_reranker(CohereRerank)``), a cross-encoder by its model, else its type.
    """
    if isinstance(reranker, CrossEncoderReranker):
        return repr(reranker)
    name = getattr(reranker, "__name__", None)
    if inspect.isroutine(reranker) and isinstance(name, str):
        return name if len(name) <= _SAID else f"{name[: _SAID - 3]}..."
    return type(reranker).__name__


def _said(error: BaseException) -> str:
    """What ``error`` says, on one line, up to `_SAID` characters.

    Its point is often past the 80 characters a value is shown in.
    """
    try:
        text = " ".join(str(error).split())
    except Exception:  # noqa: BLE001 - an exception whose __str__ fails
        return "(its message cannot be shown)"
    return repr(text) if len(text) <= _SAID else repr(f"{text[: _SAID - 3]}...")
