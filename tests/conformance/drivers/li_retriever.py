"""The LlamaIndex door `CtxBudgetRetriever` over the memory's stored turns (and documents).

A retriever does not write: ``add`` stores the turns in the memory it reads
(``ContextMemory.add_messages``, with the turns' ids) and ``pin`` pins there. It searches
documents and every session of ``user``, so what another object deletes, replaces or unpins
must not come back.

- ``send``: ``retrieve(query)`` of a retriever with ``budget`` (``k`` unset: the budget
  decides); ``got`` is the returned nodes by their records' own ids (``metadata["id"]``) and
  their text as the LLM reads it, ``chosen`` the report (``last_context``) by the callers'
  ids, in its own order; ``extra["node_ids"]``: each node's id (its report item id).
- ``bad``: ``budget``/``k``, ``session_id``/``user_id`` and other names go to the
  constructor, ``query`` to ``retrieve``.
- ``close``: closes the memory; ``after_close`` retrieves again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.schema import MetadataMode, QueryBundle

from llama_index.ctxbudget import CtxBudgetRetriever

from ._llama import use_settings
from .base import Place, Received, Refusal, Turn
from .common import MODEL, attempt, framework_value, payload, raised, reported, routed

__all__ = ["RetrieverDriver", "make"]


class RetrieverDriver:
    """LlamaIndex `CtxBudgetRetriever` (documents and the user's messages) over one memory."""

    name = "li_retriever"
    can = frozenset({"add", "send", "report", "removal", "bad", "kinds", "close", "pin"})
    takes = frozenset({"budget", "k", "query", "session_id", "user_id"})

    def __init__(self, place: Place) -> None:
        use_settings(place.embedder)
        self.memory = place.open_memory()

    def _retriever(self, user: object, **options: Any) -> CtxBudgetRetriever:
        options = {"budget": 300, "user_id": user, "model": MODEL, **options}
        return CtxBudgetRetriever(self.memory, **options)

    def add(self, session: str, user: str, turns: Sequence[Turn]) -> None:
        """Store the turns in the memory the retriever reads."""
        self.memory.add_messages(session, [payload(t) for t in turns], user_id=user, progress=False)

    def pin(self, text: str, id: str, session: str | None = None, user: str | None = None) -> None:  # noqa: A002
        """Pin in the memory the retriever reads."""
        self.memory.pin(session, text, user_id=user, id=id)

    def send(self, session: str, user: str, query: str, budget: int) -> Received:
        """One retrieval for ``query`` within ``budget``."""
        retriever = self._retriever(user, budget=budget)
        nodes = retriever.retrieve(query)
        context = retriever.last_context
        texts = [n.node.get_content(metadata_mode=MetadataMode.LLM) for n in nodes]
        got = [(str(n.node.metadata["id"]), t) for n, t in zip(nodes, texts, strict=True)]
        return reported(context, budget, got, texts, extra={"node_ids": [n.node_id for n in nodes]})

    def bad(self, argument: str, value: object) -> Refusal | None:
        """One retrieval with ``argument=value``."""
        query, options = routed(argument, value, {})
        bundle = framework_value(lambda: QueryBundle(query), "a query")  # type: ignore[arg-type]
        return attempt(lambda: self._retriever("bad-user", **options).retrieve(bundle))

    def close(self) -> None:
        """Close the memory the retriever reads."""
        self.memory.close()

    def after_close(self) -> BaseException | None:
        """One retrieval after `close`."""
        return raised(lambda: self._retriever("closed-user").retrieve("Still there?"))


def make(place: Place) -> RetrieverDriver:
    """The driver."""
    return RetrieverDriver(place)
