"""The LangChain door `CtxBudgetCompressor` over each session's turns as documents.

A compressor reads no store: the driver stands for the retriever before it, and keeps each
session's turns as `Document` objects (``Document.id`` = the turn's id, newest first, so the
rank score favours the newest). Removal by another object does not apply (``can`` says so),
nor does ``close``.

- ``send``: ``compress_documents(docs, query)`` of a compressor with ``budget``; ``got`` is the
  returned documents (id, ``page_content``), ``chosen`` the packing's included items
  (`pack_documents`, read from inside: the compressor keeps no report), by the documents' own
  ids, in the report's order.
- ``bad``: ``budget`` and other names go to the constructor, ``query`` to the call.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.documents import Document

from langchain_ctxbudget import CtxBudgetCompressor, compressors

from ._packed import packings
from .base import Place, Received, Refusal, Turn
from .common import MODEL, HoldsNothing, attempt, reported, routed

__all__ = ["CompressorDriver", "make"]


class CompressorDriver(HoldsNothing):
    """`CtxBudgetCompressor` over each session's turns."""

    name = "lc_compressor"
    can = frozenset({"add", "send", "report", "bad", "kinds"})
    takes = frozenset({"budget", "query"})

    def __init__(self, place: Place) -> None:
        self._sessions: dict[str, list[Turn]] = {}

    def add(self, session: str, user: str, turns: Sequence[Turn]) -> None:
        """Append the turns to the session's documents."""
        self._sessions.setdefault(session, []).extend(turns)

    def send(self, session: str, user: str, query: str, budget: int) -> Received:
        """One ``compress_documents`` of the session's documents within ``budget``."""
        turns = self._sessions.get(session, [])
        docs = [Document(turn.text, id=turn.id) for turn in reversed(turns)]
        with packings(compressors) as made:
            out = CtxBudgetCompressor(budget=budget, model=MODEL).compress_documents(docs, query)
        context = made[-1] if made else None
        got = [(str(d.id), d.page_content) for d in out]
        return reported(context, budget, got, [d.page_content for d in out])

    def bad(self, argument: str, value: object) -> Refusal | None:
        """One call with ``argument=value``."""
        query, options = routed(argument, value, {"budget": 300})
        docs = [Document("I live in Lisbon.", id="d1")]
        return attempt(
            lambda: CtxBudgetCompressor(**options).compress_documents(docs, query)  # type: ignore[arg-type]
        )


def make(place: Place) -> CompressorDriver:
    """The driver."""
    return CompressorDriver(place)
