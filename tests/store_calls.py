"""`StoreCalls`: the Chroma calls a memory makes on the test's own thread, by action.

Every Chroma call of a store goes through its connection's ``call`` (`ctxbudget.store.connection`),
named by what it does ("read", "search", "open a partition", ...). The background writers'
calls are theirs, not counted.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ctxbudget import ContextMemory

__all__ = ["StoreCalls"]


class StoreCalls:
    """The Chroma calls ``memory`` makes from now on, on the thread that made this."""

    def __init__(self, memory: ContextMemory) -> None:
        self.calls: list[str] = []
        conn = memory.store._collections.conn  # noqa: SLF001 - the store's one door to Chroma
        inner: Callable[..., Any] = conn.call
        caller = threading.get_ident()

        def call(action: str, fn: Callable[[], Any], **kwargs: Any) -> Any:
            if threading.get_ident() == caller:
                self.calls.append(action)
            return inner(action, fn, **kwargs)

        conn.call = call  # type: ignore[method-assign]

    def count(self, action: str) -> int:
        """How many calls named ``action`` were made."""
        return self.calls.count(action)

    def reads(self) -> int:
        """Reads and searches together."""
        return sum(1 for action in self.calls if action in ("read", "query", "search"))
