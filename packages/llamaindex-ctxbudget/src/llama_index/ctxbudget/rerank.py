"""A LlamaIndex rerank node postprocessor, as `MemoryConfig.reranker`.

`postprocessor_reranker` turns a ``BaseNodePostprocessor`` that reranks
(``SentenceTransformerRerank``, ``CohereRerank``, ``LLMRerank``, your own) into the core's
`Reranker`: the texts become `TextNode`s, ``postprocess_nodes(nodes, query_str=query)`` is
called once, and each text's score is the score its node came back with, or (a postprocessor
that only reorders) its place in the answer; a text dropped scores below every kept one.
Importing this module also lets `MemoryConfig(reranker=postprocessor)` take it as it is.

>>> from ctxbudget.memory.policy.config import MemoryConfig
>>> config = MemoryConfig(reranker=postprocessor_reranker(my_rerank))  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence

from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, TextNode

from ctxbudget.memory.policy.ranking import Reranker, register_converter

__all__ = ["postprocessor_reranker"]

_PREFIX = "ctxbudget-rerank-"  # the node id of each text: its place among them


def postprocessor_reranker(postprocessor: BaseNodePostprocessor) -> Reranker:
    """``postprocessor`` as a `Reranker` (see the module docstring)."""

    def scores(query: str, texts: Sequence[str], /) -> list[float]:
        nodes = [
            NodeWithScore(node=TextNode(text=t, id_=f"{_PREFIX}{n}"), score=None)
            for n, t in enumerate(texts)
        ]
        answer = postprocessor.postprocess_nodes(nodes, query_str=query)
        found: dict[int, float] = {}
        for place, scored in enumerate(answer):
            name = scored.node.node_id
            if not name.startswith(_PREFIX) or not name[len(_PREFIX) :].isdigit():
                continue
            index = int(name[len(_PREFIX) :])
            if 0 <= index < len(texts) and index not in found:
                score = scored.score
                found[index] = float(score) if score is not None else float(len(answer) - place)
        floor = min(found.values(), default=1.0) - 1.0
        return [found.get(n, floor) for n in range(len(texts))]

    scores.__name__ = f"postprocessor_reranker({type(postprocessor).__name__})"
    return scores


def _convert(obj: object) -> Reranker | None:
    return postprocessor_reranker(obj) if isinstance(obj, BaseNodePostprocessor) else None


register_converter(_convert)
