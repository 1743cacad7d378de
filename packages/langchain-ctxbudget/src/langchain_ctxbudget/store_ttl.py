"""`CtxBudgetStore`'s TTL upkeep: sweeping expired items now, or in a thread until stopped.

Expired items are never returned anyway (the core checks expiry on every read,
`ctxbudget.memory.values`); a sweep frees their space. `TTLSweeping` is the part of
`CtxBudgetStore` that runs the sweeps (``sweep_ttl``, ``start_ttl_sweeper``...), with the
memory's `ContextMemory.sweep_values` doing the work.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from typing import TYPE_CHECKING

from ctxbudget.errors import MemoryClosedError, StoreError
from langchain_ctxbudget.store_ops import sweep_minutes, waited

if TYPE_CHECKING:
    from langgraph.store.base import TTLConfig

    from ctxbudget.memory.context import ContextMemory

__all__ = ["DEFAULT_SWEEP_MINUTES", "TTLSweeping"]

logger = logging.getLogger(__name__)

DEFAULT_SWEEP_MINUTES = 5
"""Minutes between sweeps when neither `TTLSweeping.start_ttl_sweeper` nor the ttl config says."""


class TTLSweeping:
    """Sweeping a store's expired items (a part of `CtxBudgetStore`).

    Attributes:
        memory: the memory whose values are swept.
        ttl_config: the store's LangGraph ``TTLConfig`` (its ``sweep_interval_minutes``).
        _sweeper: the running sweeper's stop event and future, or None.
    """

    memory: ContextMemory
    ttl_config: TTLConfig | None
    _sweeper: tuple[threading.Event, concurrent.futures.Future[None]] | None = None

    def sweep_ttl(self) -> int:
        """Delete expired items now; how many were deleted (`ContextMemory.sweep_values`)."""
        return self.memory.sweep_values()

    async def asweep_ttl(self) -> int:
        """Async `sweep_ttl`."""
        return await self.memory.arun(self.memory.sweep_values)

    def start_ttl_sweeper(
        self, sweep_interval_minutes: float | None = None
    ) -> concurrent.futures.Future[None]:
        """Sweep expired items every ``sweep_interval_minutes`` in a thread, until stopped.

        Default interval: ``ttl={"sweep_interval_minutes": ...}``, else 5 minutes. Expired
        items are never returned anyway; sweeping frees their space. A second call returns the
        running sweeper's future; a sweeper told to stop (even one that has not stopped yet:
        `stop_ttl_sweeper` timed out) or that ended (failed) is not running, and a new one starts.
        """
        if self._sweeper is not None:
            stop, running = self._sweeper
            if not stop.is_set() and not running.done():
                return running
        given = sweep_interval_minutes
        if given is None:
            given = (self.ttl_config or {}).get("sweep_interval_minutes") or DEFAULT_SWEEP_MINUTES
        minutes = sweep_minutes(given, "start_ttl_sweeper(sweep_interval_minutes=)")
        stop, done = threading.Event(), concurrent.futures.Future[None]()

        def sweep() -> None:
            try:
                while not waited(stop, minutes * 60):
                    try:
                        swept = self.memory.sweep_values()
                    except MemoryClosedError:
                        break
                    except StoreError as exc:  # the store failed this round: try again later
                        logger.warning("TTL sweep failed, retrying in %g min: %s", minutes, exc)
                        continue
                    logger.debug("TTL sweep deleted %d expired items", swept)
            except BaseException as exc:  # the thread ends: its future says why, and the log
                logger.exception("the TTL sweeper stopped")
                done.set_exception(exc)
                return
            done.set_result(None)

        threading.Thread(target=sweep, name="ctxbudget-ttl-sweeper", daemon=True).start()
        self._sweeper = (stop, done)
        return done

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper thread; whether it stopped within ``timeout`` seconds."""
        return self._stop_sweeper(timeout)

    def _stop_sweeper(self, timeout: float | None) -> bool:
        if self._sweeper is None:
            return True
        stop, done = self._sweeper
        stop.set()
        try:
            done.exception(timeout)  # a sweeper that failed has stopped too (and logged why)
        except concurrent.futures.TimeoutError:
            return False
        self._sweeper = None
        return True
