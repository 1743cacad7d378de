"""A LlamaIndex rerank node postprocessor, as `MemoryConfig.reranker`.

`postprocessor_reranker` turns a ``BaseNodePostprocessor`` that reranks
(``SentenceTransformerRerank``, ``CohereRerank``, ``LLMRerank``, your own) into the core's
`Reranker`: the texts become `TextNode`s, ``postprocess_nodes(nodes, query_str=query)`` is
called once, and each text's score is the score its node came back with, or (a postprocessor
that only reorders, or scores some nodes only) its place in the answer; a text dropped scores
below every kept one. Nodes come back as given, with their ids, or new (matched by text).
A postprocessor with its own ``apostprocess_nodes`` (or ``_apostprocess_nodes``) is awaited
through it when the memory was called async (on the app's loop, where its client works), and
when its ``postprocess_nodes`` raises `NotImplementedError` (an async-only one).
Importing this module also lets `MemoryConfig(reranker=postprocessor)` take it as it is.

>>> from ctxbudget.memory.policy.config import MemoryConfig
>>> config = MemoryConfig(reranker=postprocessor_reranker(my_rerank))  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import cast

from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, TextNode

from ctxbudget.memory.policy.ranking import (
    Reranker,
    check_wrapped,
    framework_answer,
    kept_scores,
    register_converter,
)
from ctxbudget.memory.reading.coroutines import sync_or_async

__all__ = ["postprocessor_reranker"]

_PREFIX = "ctxbudget-rerank-"  # the node id of each text: its place among them


def postprocessor_reranker(postprocessor: BaseNodePostprocessor) -> Reranker:
    """``postprocessor`` as a `Reranker` (see the module docstring).

    Raises:
        ConfigurationTypeError: ``postprocessor`` is not a LlamaIndex node postprocessor
            (an instance with ``.postprocess_nodes``): a class, or another framework's reranker.
    """
    check_wrapped(
        postprocessor,
        wrapper="postprocessor_reranker",
        kind="LlamaIndex node postprocessor",
        method="postprocess_nodes",
    )

    kind = type(postprocessor)  # its own async method (a duck-typed one may have none)
    own_async = any(
        getattr(kind, name, None) not in (None, getattr(_BASE, name))
        for name in ("apostprocess_nodes", "_apostprocess_nodes")
    )

    def scores(query: str, texts: Sequence[str], /) -> list[float] | Awaitable[list[float]]:
        nodes = [
            NodeWithScore(node=TextNode(text=t, id_=f"{_PREFIX}{n}"), score=None)
            for n, t in enumerate(texts)
        ]
        made = {id(scored.node): n for n, scored in enumerate(nodes)}

        def scored() -> list[float]:
            answer = postprocessor.postprocess_nodes(nodes, query_str=query)
            found = _scored_nodes(answer, postprocessor)
            return _scores_of(found, texts, made, where=type(postprocessor).__name__)

        def ascored() -> Awaitable[list[float]]:
            return _ascores(postprocessor, nodes, query, texts, made)

        return sync_or_async(scored, ascored if own_async else None)

    scores.__name__ = f"postprocessor_reranker({type(postprocessor).__name__})"
    return cast("Reranker", scores)


_BASE = BaseNodePostprocessor


async def _ascores(
    postprocessor: BaseNodePostprocessor,
    nodes: list[NodeWithScore],
    query: str,
    texts: Sequence[str],
    made: dict[int, int],
) -> list[float]:
    """The scores of ``postprocessor.apostprocess_nodes`` (see `_scores_of`)."""
    answer = await postprocessor.apostprocess_nodes(nodes, query_str=query)
    scored = _scored_nodes(answer, postprocessor)
    return _scores_of(scored, texts, made, where=type(postprocessor).__name__)


def _scored_nodes(answer: object, postprocessor: object) -> list[NodeWithScore]:
    """``answer`` as a list of `NodeWithScore`, or a `TypeError` naming what came back instead."""
    where = f"{type(postprocessor).__name__}.postprocess_nodes"
    return framework_answer(answer, NodeWithScore, where=where)


def _scores_of(
    answer: Sequence[NodeWithScore],
    texts: Sequence[str],
    made: dict[int, int],
    *,
    where: str = "the postprocessor",
) -> list[float]:
    """Each text's score, as the postprocessor answered (see the module docstring).

    A node's score when every node kept has one, else its place in the answer; a text not in
    the answer scores below every kept one. A node is matched to its text as given (the same
    node, even rewritten in place), by its id, or by its text (a postprocessor that returns
    new nodes). The scores pass the core's rule (`reranker_scores`: a tensor or a one-element
    array is a number; a str, a bool, NaN or an infinity is refused, naming ``where``).

    Raises:
        ConfigurationError: a node's score that is no finite number.
    """
    unused = {n: t for n, t in enumerate(texts)}
    kept: list[tuple[int, object]] = []
    unmatched = ""
    for scored in answer:
        node = scored.node
        index = made.get(id(node))
        if index is None or index not in unused:
            name = node.node_id
            digits = name[len(_PREFIX) :] if name.startswith(_PREFIX) else ""
            index = int(digits) if digits.isascii() and digits.isdigit() else None  # not "²"
        if index is None or index not in unused:  # a new node: by its text
            text = node.get_content()
            index = next((n for n, t in unused.items() if t == text), None)
            if index is None:
                if text not in texts:  # not a repeat: a text of its own
                    unmatched = unmatched or (
                        f"a node matching none of the texts it was given ({text[:40]!r}..., "
                        f"id {node.node_id!r}, not {_PREFIX}<n>)"
                    )
                continue
        del unused[index]
        kept.append((index, scored.score))
    return kept_scores(
        kept,
        len(texts),
        reranker=f"{where}.postprocess_nodes",
        returned="returned node scores",
        todo="set each NodeWithScore.score to a finite number, higher for more relevant",
        unmatched=unmatched,
    )


def _convert(obj: object) -> Reranker | None:
    return postprocessor_reranker(obj) if isinstance(obj, BaseNodePostprocessor) else None


register_converter(_convert)
