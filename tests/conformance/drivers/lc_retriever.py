"""The LangChain door `CtxBudgetRetriever` over the memory's stored turns.

A retriever does not write: ``add`` stores the turns in the memory it reads
(``ContextMemory.add_messages``, with the turns' ids) and ``pin`` pins there. It searches
``"all"`` records of the user (every session of ``user``), so what another object deletes,
replaces or unpins must not come back.

- ``send``: ``invoke(query, budget=budget)`` with ``k`` large enough that the budget decides;
  ``got`` is the returned documents by their records' own ids (``metadata["id"]``) and
  ``page_content``; ``chosen`` the packing's included items by their callers' ids
  (`pack_documents`, read from inside: the retriever keeps no report), in the report's order;
  ``extra["doc_ids"]``: each `Document.id` and its report item id.
- ``bad``: ``budget``/``k`` go to ``invoke``, ``query`` is the query, ``session_id``/
  ``user_id`` and other names go to the constructor.
- ``close``: closes the memory; ``after_close`` retrieves again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_ctxbudget import CtxBudgetRetriever, retrievers

from ._packed import packings
from .base import Place, Received, Refusal, Turn
from .common import BUDGET_NAMES, MODEL, SPANS, attempt, payload, raised, reported

__all__ = ["RetrieverDriver", "bad_parts", "make"]

K = 50


class RetrieverDriver:
    """`CtxBudgetRetriever` (``search="all"``) over one memory."""

    name = "lc_retriever"
    can = frozenset({"add", "send", "report", "removal", "bad", "kinds", "close", "pin"})
    takes = frozenset({"budget", "k", "query", "session_id", "user_id"})

    def __init__(self, place: Place) -> None:
        self.memory = place.open_memory()

    def _retriever(self, user: object, **options: Any) -> CtxBudgetRetriever:
        options = {"search": "all", "user_id": user, "model": MODEL, "k": K, **options}
        return CtxBudgetRetriever(memory=self.memory, **options)

    def add(self, session: str, user: str, turns: Sequence[Turn]) -> None:
        """Store the turns in the memory the retriever reads."""
        self.memory.add_messages(session, [payload(t) for t in turns], user_id=user, progress=False)

    def pin(self, text: str, id: str, session: str | None = None, user: str | None = None) -> None:  # noqa: A002
        """Pin in the memory the retriever reads."""
        self.memory.pin(session, text, user_id=user, id=id)

    def send(self, session: str, user: str, query: str, budget: int) -> Received:
        """One retrieval for ``query`` within ``budget``."""
        SPANS.clear()
        with packings(retrievers) as made:
            docs = self._retriever(user).invoke(query, budget=budget)
        context = made[-1] if made else None
        got = [(str(d.metadata["id"]), d.page_content) for d in docs]
        texts = [d.page_content for d in docs]
        return reported(context, budget, got, texts, extra={"doc_ids": [str(d.id) for d in docs]})

    def bad(self, argument: str, value: object) -> Refusal | None:
        """One retrieval with ``argument=value``."""
        query, call, options = bad_parts(argument, value)
        return attempt(lambda: self._retriever("bad-user", **options).invoke(query, **call))  # type: ignore[arg-type]

    def close(self) -> None:
        """Close the memory the retriever reads."""
        self.memory.close()

    def after_close(self) -> BaseException | None:
        """One retrieval after `close`."""
        return raised(lambda: self._retriever("closed-user").invoke("Still there?"))


def bad_parts(argument: str, value: object) -> tuple[object, dict[str, Any], dict[str, Any]]:
    """Where ``argument=value`` goes: (the query, the call's arguments, the constructor's)."""
    query: object = "Where do I live?"
    call: dict[str, Any] = {}
    options: dict[str, Any] = {}
    if argument in BUDGET_NAMES:
        call["budget"] = value
    elif argument == "k":
        call["k"] = value
    elif argument == "query":
        query = value
    else:
        options[argument] = value
    return query, call, options


def make(place: Place) -> RetrieverDriver:
    """The driver."""
    return RetrieverDriver(place)
