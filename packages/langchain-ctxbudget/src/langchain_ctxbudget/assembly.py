"""`CallAssembler`: how `CtxBudgetMiddleware` runs the core on each model call.

One `ctxbudget.ContextAssembler` per token counter, built with the middleware's options
(``min_exchanges``, ``history_trim``, ``trim_step``) and rendering what precedes the
conversation as the one system message the model receives (`ctxbudget.core.split`), so the report
counts what is sent; the thread's previous call is passed as ``previous=`` (its report then says
what prefix the two share). A budget the never-pruned items
do not fit says so, and that the tool schemas were counted in its reserve when there were some.
"""

from __future__ import annotations

import threading

from ctxbudget import AssembledContext, Budget, BudgetExceededError, ContextAssembler, TokenCounter
from ctxbudget.core.items import ContextItem
from ctxbudget.core.split import one_system_layouts
from ctxbudget.core.trimming import TrimOptions

__all__ = ["CallAssembler"]


class CallAssembler:
    """The middleware's assemblers, one per counter (shared by its calls; assembling is pure).

    Args:
        min_exchanges: newest exchanges kept before pinned facts and memories are packed.
        trim: the trimming options (`ctxbudget.core.trimming.trim_options`).
    """

    def __init__(self, *, min_exchanges: int, trim: TrimOptions) -> None:
        self.min_exchanges = min_exchanges
        self.trim = trim
        self._assemblers: dict[tuple[int, bool], ContextAssembler] = {}
        self._lock = threading.Lock()

    def assembler(self, counter: TokenCounter, *, joined: bool = False) -> ContextAssembler:
        """The (cached) assembler of ``counter`` (``joined``: the call has a system message).

        With ``joined``, what ctxbudget renders goes inside the call's own system message
        (`langchain_ctxbudget.system`).
        """
        with self._lock:
            assembler = self._assemblers.get((id(counter), joined))
            if assembler is None or assembler.counter is not counter:
                assembler = ContextAssembler(
                    counter,
                    min_exchanges=self.min_exchanges,
                    layouts=one_system_layouts(counter, joined=joined),
                    **self.trim,
                )
                self._assemblers[(id(counter), joined)] = assembler
            return assembler

    def assemble(
        self,
        counter: TokenCounter,
        items: list[ContextItem],
        budget: Budget,
        *,
        tools: bool,
        previous: AssembledContext | None,
        joined: bool = False,
    ) -> AssembledContext:
        """One call's context (``tools``: the call carries tool schemas, counted in the reserve).

        Raises:
            BudgetExceededError: the never-pruned items alone do not fit.
        """
        try:
            return self.assembler(counter, joined=joined).assemble(
                items, budget=budget, previous=previous
            )
        except BudgetExceededError as exc:
            if not tools:
                raise
            msg = f"{exc} (the reserve includes the tool schemas)"
            raise BudgetExceededError(msg, required=exc.required, available=exc.available) from exc
