"""The inclusion log of `ContextMemory`: a stored record of every assembly, and what reads it.

On by default (``ContextMemory(inclusion_log=True)``): each `ContextMemory.assemble` hands its
result to `InclusionLog.log`, which takes what it needs of the result (ids, tiers, scores,
reasons and their details, figures: no content unless `InclusionLogConfig.keep_context` asks
for the query and the context as sent) and queues the record for the store's background
writer (`ctxbudget.store.context_log`). Building the record (its pruned entries too:
`ctxbudget.memory.log.queued`), counting the included items' tokens and writing happen there,
off the call's critical path: the call itself pays a few tenths of a millisecond
(docs/benchmarks.md, "Inclusion log"). An assembly that fails with a
`BudgetExceededError` is logged too, with the error.

Reading: `ContextMemory.contexts` (a session's records, newest first), `budget_stats` (the
analytics of `ctxbudget.memory.log.analytics` over a session, a user or a namespace) and
`access_counts`; each first waits for what is queued to be written. A session keeps its newest
`InclusionLogConfig.retain` records (the oldest are dropped as new ones are written); its log
is deleted with the session (`delete_session`, ``clear(pins=True)``), and a user's records with
the user (`delete_user`). Writing never fails an assembly: a record the store cannot take is
dropped and logged (`ctxbudget.store.context_log`).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ctxbudget.core.budget import Budget
from ctxbudget.core.items import ContextItem
from ctxbudget.core.render import Format
from ctxbudget.core.report import AssembledContext
from ctxbudget.errors import BudgetExceededError, ConfigurationError, StoreError
from ctxbudget.memory.log.access import AccessCounts, boosted
from ctxbudget.memory.log.analytics import BudgetStats, access_counts, budget_stats
from ctxbudget.memory.log.entries import (
    ContextRecord,
    decode_record,
    error_record,
)
from ctxbudget.memory.log.queued import (
    content_of,
    document_of,
    record_key,
    success_later,
)
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.memory.reading.candidates import Candidates
from ctxbudget.store.context_log import LogEntry
from ctxbudget.tokens.counter import TokenCounter

if TYPE_CHECKING:
    from ctxbudget.store.chroma_store import ChromaStore

__all__ = ["ContextLogging", "InclusionLog", "InclusionLogConfig"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class InclusionLogConfig:
    """How `ContextMemory` logs its assemblies (``ContextMemory(inclusion_log=...)``).

    Attributes:
        retain: the most records kept per session; the oldest are dropped as new ones come.
        keep_context: also keep each assembly's query and rendered context as sent (content,
            so off by default; docs/operations.md). Off, no prune detail quotes a text.
    """

    retain: int = 200
    keep_context: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.retain, bool) or not isinstance(self.retain, int) or self.retain < 1:
            msg = f"InclusionLogConfig.retain must be a positive int, got {self.retain!r}"
            raise ConfigurationError(msg)
        if not isinstance(self.keep_context, bool):
            msg = (
                f"InclusionLogConfig.keep_context must be True or False, got {self.keep_context!r}"
            )
            raise ConfigurationError(msg)


class InclusionLog:
    """One memory's inclusion log: records its assemblies, reads them back (module docstring).

    Args:
        store: the store the records are kept in.
        namespace: the memory's tenant.
        config: retention (`InclusionLogConfig`).
        enabled: log assemblies (False: only read what is stored).
    """

    def __init__(
        self,
        store: ChromaStore,
        namespace: str,
        config: InclusionLogConfig,
        *,
        enabled: bool = True,
    ) -> None:
        self.store = store
        self.namespace = namespace
        self.config = config
        self.enabled = enabled
        self.access = AccessCounts(config.retain)
        """This object's copies of sessions' access counts, for scoring (keyed by generation)."""

    def log(
        self,
        result: AssembledContext,
        *,
        session_id: str,
        user_id: str | None,
        model: str,
        counter: TokenCounter,
        generation: str = "",
    ) -> None:
        """Queue the record of a successful assembly (built and written in the background).

        ``generation``: the session's when assembled; a copy of its access counts of that
        generation counts this assembly too, and the record is written only while the session
        keeps it (`ctxbudget.store.context_log`).
        """
        key, now = record_key()
        self.access.add(session_id, generation, ((it.id, int(it.tier)) for it in result.included))
        keep = self.config.keep_context
        query, sent = content_of(result) if keep else (None, None)
        build = functools.partial(
            success_later,
            result.pruned_later(),
            keep,
            key=key,
            session_id=session_id,
            user_id=user_id,
            time=now,
            model=model,
            format=result.format,
            budget=result.budget,
            tokens_used=result.tokens_used,
            included=tuple(result.included),
            tiers=dict(result.tiers),
            counter=counter,
            query=query,
            context=sent,
        )
        self._queue(session_id, user_id, key, now, build, generation)

    def log_error(
        self,
        error: BudgetExceededError,
        *,
        budget: Budget,
        format: Format,  # noqa: A002 - the public name
        session_id: str,
        user_id: str | None,
        model: str,
        generation: str = "",
    ) -> None:
        """Queue the record of an assembly that failed: its never-pruned items did not fit."""
        key, now = record_key()
        build = functools.partial(
            error_record,
            key=key,
            session_id=session_id,
            user_id=user_id,
            time=now,
            model=model,
            format=format,
            budget=budget,
            error=str(error),
            required=error.required,
        )
        self._queue(session_id, user_id, key, now, build, generation)

    def _queue(
        self,
        session_id: str,
        user_id: str | None,
        key: str,
        now: float,
        build: Callable[[], ContextRecord],
        generation: str,
    ) -> None:
        document = functools.partial(document_of, build)
        config = self.config
        entry = LogEntry(
            self.namespace, session_id, user_id, key, now, document, config.retain, generation
        )
        self.store.logs.append(entry)

    def flush(self) -> None:
        """Wait until every queued record is written (or dropped, which is logged)."""
        self.store.logs.flush()

    def records(self, session_id: str, *, limit: int | None = None) -> list[ContextRecord]:
        """A session's stored records, newest first (the newest ``limit``)."""
        self.flush()
        out = []
        for row in self.store.logs.read(self.namespace, session_id, limit=limit):
            try:
                out.append(decode_record(row.document))
            except StoreError as exc:
                logger.warning(
                    "context record %r of session %r skipped: %s", row.key, session_id, exc
                )
        return out

    def sessions(self, *, user_id: str | None = None) -> list[str]:
        """The sessions with a log (of ``user_id``'s assemblies when given), sorted."""
        self.flush()
        return self.store.logs.sessions(self.namespace, user_id=user_id)

    def access_counts(self, session_id: str) -> dict[str, int]:
        """How many of the session's retained assemblies included each item."""
        return access_counts(self.records(session_id))


class ContextLogging:
    """The inclusion log's methods of `ContextMemory` (this class is one of its bases)."""

    store: ChromaStore
    namespace: str
    model: str
    config: MemoryConfig
    _log: InclusionLog

    def counter_for(self, model: str | None) -> TokenCounter:
        """The token counter of ``model`` (`ContextMemory.counter_for`)."""
        raise NotImplementedError  # pragma: no cover

    def _open_log(self, option: bool | InclusionLogConfig) -> InclusionLog:
        if isinstance(option, bool):
            config, enabled = InclusionLogConfig(), option
        elif isinstance(option, InclusionLogConfig):
            config, enabled = option, True
        else:
            msg = f"inclusion_log must be True, False or an InclusionLogConfig, got {option!r}"
            raise ConfigurationError(msg)
        if self.config.access_salience > 0 and not enabled:
            msg = (
                f"MemoryConfig.access_salience={self.config.access_salience} counts what the "
                "inclusion log recorded, but inclusion_log=False; turn the log on or set "
                "access_salience=0"
            )
            raise ConfigurationError(msg)
        return InclusionLog(self.store, self.namespace, config, enabled=enabled)

    def record_context(
        self,
        context: AssembledContext,
        *,
        session_id: str,
        user_id: str | None = None,
        model: str | None = None,
        counter: TokenCounter | None = None,
        generation: str = "",
    ) -> None:
        """Log a context assembled outside `assemble` (the adapters' own, from `candidates`).

        What `assemble` does for its own result: nothing when the log is off. ``counter``: the
        one that counted the context (default: ``model``'s). ``generation``: the session's when
        its candidates were read (`Candidates.generation`): the record is written only while
        the session keeps it.
        """
        log = self._log
        if log.enabled:
            counter = counter or self.counter_for(model)
            name = model or counter.model or counter.name
            log.log(
                context,
                session_id=session_id,
                user_id=user_id,
                model=name,
                counter=counter,
                generation=generation,
            )

    def _logged(
        self,
        assemble: Callable[..., AssembledContext],
        items: Sequence[ContextItem],
        budget: Budget,
        fmt: Format,
        session_id: str,
        found: Candidates,
        model: str | None,
    ) -> AssembledContext:
        """``assemble(items, ...)``, logged (`ContextMemory.assemble`'s last step)."""
        log = self._log
        if not log.enabled:
            return assemble(items, budget=budget, format=fmt)
        name = model or self.model
        try:
            result = assemble(items, budget=budget, format=fmt)
        except BudgetExceededError as exc:
            log.log_error(
                exc,
                budget=budget,
                format=fmt,
                session_id=session_id,
                user_id=found.user_id,
                model=name,
                generation=found.generation,
            )
            raise
        log.log(
            result,
            session_id=session_id,
            user_id=found.user_id,
            model=name,
            counter=self.counter_for(model),
            generation=found.generation,
        )
        return result

    def _with_access(self, session_id: str, found: Candidates) -> Candidates:
        """``found``, scored up by access counts when `MemoryConfig.access_salience` is on."""
        weight = self.config.access_salience
        if weight <= 0:
            return found
        log = self._log
        counts = log.access.get(session_id, found.generation, lambda: log.records(session_id))
        exponent = self.config.scoring.salience_weight
        return boosted(found, counts, weight=weight, exponent=exponent)

    @property
    def inclusion_log(self) -> InclusionLog:
        """This memory's `InclusionLog` (its settings, access counts, and ``flush``)."""
        return self._log

    def contexts(self, session_id: str, *, limit: int | None = None) -> list[ContextRecord]:
        """The logged assemblies of a session, newest first (the newest ``limit``).

        Each `ContextRecord` names what one `assemble` included (ids, tiers, tokens) and
        pruned (ids, reasons), with its budget and per-tier figures, or the over-budget error
        that stopped it. At most `InclusionLogConfig.retain` are kept per session.

        >>> mem.contexts("s1", limit=1)[0].included_ids  # doctest: +SKIP
        ['ctxbudget:system', 'm1', 'm2', 'ctxbudget:query']
        """
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or limit < 0
        ):
            msg = f"limit must be None or a non-negative int, got {limit!r}"
            raise ConfigurationError(msg)
        return self._log.records(session_id, limit=limit)

    def budget_stats(
        self, session_id: str | None = None, *, user_id: str | None = None, top: int | None = 10
    ) -> BudgetStats:
        """Budget analytics (`ctxbudget.memory.log.analytics`) over logged assemblies.

        Over one session's log (``session_id``), the assemblies made for one user
        (``user_id``; with ``session_id``, that user's in that session), or, with neither,
        every session's log of the namespace (an administrative call: it reads them all).
        ``top``: how many of the most-pruned items to list (None: all).
        """
        log = self._log
        sessions = [session_id] if session_id is not None else log.sessions(user_id=user_id)
        records = [r for s in sessions for r in log.records(s)]
        if user_id is not None:
            records = [r for r in records if r.user_id == user_id]
        return budget_stats(records, top=top)

    def access_counts(self, session_id: str) -> dict[str, int]:
        """How many of a session's logged assemblies included each memory or summary, by id.

        System prompt, query and tool schemas are left out; ids are as assembled (a record of
        another scope under its scoped id). What `MemoryConfig.access_salience` feeds into
        scoring.
        """
        return self._log.access_counts(session_id)
