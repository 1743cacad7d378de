"""The LlamaIndex door `CtxBudgetNodePostprocessor` over a user's turns as nodes.

A postprocessor reads no store: the driver stands for the retrievers before it. Each session
is one index whose nodes are its turns, with ids by position (``n0``, ``n1``...), and a call
gets the nodes of every session of the user, as a query engine merging several indexes'
results does: two sessions are two indexes that both hold an ``n0`` (one id, two contents),
the case where a postprocessor must return the node it packed. Scores favour the session
asked and then the newest turns. Removal by another object does not apply (``can`` says
so), nor does ``close``.

- ``send``: ``postprocess_nodes(nodes, query_str=query)`` of a postprocessor with ``budget``;
  ``got`` is the returned nodes (node id, text as the LLM reads it), ``chosen`` the report
  (``last_context.included``, by the caller's own node ids).
- ``bad``: ``budget`` and other names go to the constructor, ``query`` to the call.
"""

from __future__ import annotations

from collections.abc import Sequence

from llama_index.core.schema import MetadataMode, NodeWithScore, TextNode

from llama_index.ctxbudget import CtxBudgetNodePostprocessor

from ._llama import use_settings
from .base import Place, Received, Refusal, Turn
from .common import MODEL, HoldsNothing, attempt, reported, routed

__all__ = ["PostprocessorDriver", "make"]


class PostprocessorDriver(HoldsNothing):
    """`CtxBudgetNodePostprocessor` over each session's turns."""

    name = "li_postprocessor"
    can = frozenset({"add", "send", "report", "bad", "kinds"})
    takes = frozenset({"budget", "query"})

    def __init__(self, place: Place) -> None:
        use_settings(place.embedder)
        self._users: dict[str, dict[str, list[Turn]]] = {}

    def add(self, session: str, user: str, turns: Sequence[Turn]) -> None:
        """Append the turns to the session's nodes."""
        self._users.setdefault(user, {}).setdefault(session, []).extend(turns)

    def _nodes(self, session: str, user: str) -> list[NodeWithScore]:
        nodes: list[NodeWithScore] = []
        for name, turns in self._users.get(user, {}).items():
            bonus = 1.0 if name == session else 0.0
            nodes += [
                NodeWithScore(
                    node=TextNode(id_=f"n{i}", text=turn.text), score=bonus + (i + 1) / len(turns)
                )
                for i, turn in enumerate(turns)
            ]
        return nodes

    def send(self, session: str, user: str, query: str, budget: int) -> Received:
        """One ``postprocess_nodes`` of the user's nodes within ``budget``."""
        post = CtxBudgetNodePostprocessor(budget=budget, model=MODEL)
        out = post.postprocess_nodes(self._nodes(session, user), query_str=query)
        context = post.last_context
        texts = [n.node.get_content(metadata_mode=MetadataMode.LLM) for n in out]
        got = [(n.node_id, text) for n, text in zip(out, texts, strict=True)]
        return reported(context, budget, got, texts)

    def bad(self, argument: str, value: object) -> Refusal | None:
        """One call with ``argument=value``."""
        query, options = routed(argument, value, {"budget": 300})
        node = NodeWithScore(node=TextNode(id_="n1", text="I live in Lisbon."), score=1.0)
        return attempt(
            lambda: CtxBudgetNodePostprocessor(**options).postprocess_nodes(
                [node],
                query_str=query,  # type: ignore[arg-type]
            )
        )


def make(place: Place) -> PostprocessorDriver:
    """The driver."""
    return PostprocessorDriver(place)
