"""A postprocessor's node scores pass the core's one rule (`ranking.reranker_scores`).

Bugs found by probing `llama_index.ctxbudget.rerank.postprocessor_reranker` with the scores
real postprocessors set on their nodes (``node.score = ...``, unchecked by pydantic):

* a one-element numpy array (a cross-encoder's ``(n, 1)`` row) failed the call (numpy's
  "conversion of an array with ndim > 0 to a scalar"), so the postprocessor was never used;
* a string (``"0.9"``) or a bool was taken as a score, NaN was handed on and refused later as
  the adapter's list, naming neither the postprocessor nor the node.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from rerank_setup import QUERY

from ctxbudget.errors import ConfigurationError
from llama_index.ctxbudget.rerank import postprocessor_reranker

TEXTS = ["tea", "a sunrise", "more tea"]
ACCEPTED: dict[str, Callable[[float], object]] = {
    "a 0-d tensor": lambda s: torch.tensor(s),
    "a (1,) tensor": lambda s: torch.tensor([s]),
    "a (1,) array": lambda s: np.array([s], dtype=np.float32),
    "a numpy float32": np.float32,
}
REFUSED: dict[str, tuple[Callable[[float], object], str]] = {
    "a str": (str, "a str at 0"),
    "a bool": (lambda s: s > 0, "a bool at 0"),
    "NaN": (lambda s: np.float64("nan"), "NaN at 0"),
    "infinity": (lambda s: torch.tensor(float("inf")), "inf at 0"),
    "a row of two": (lambda s: np.array([s, s]), "a row of 2 at 0"),
}


class Scoring(BaseNodePostprocessor):
    """Keeps every node, scored by ``score`` (a sunrise 1.0, else 0.0)."""

    score: Any

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        for node in nodes:
            node.score = self.score(float("sun" in node.node.get_content()))
        return nodes


@pytest.mark.parametrize("kind", sorted(ACCEPTED))
def test_scores_as_postprocessors_give_them_are_taken(kind: str) -> None:
    scores = postprocessor_reranker(Scoring(score=ACCEPTED[kind]))(QUERY, TEXTS)
    assert scores == [0.0, 1.0, 0.0]


@pytest.mark.parametrize("kind", sorted(REFUSED))
def test_what_is_no_score_is_refused_naming_the_postprocessor(kind: str) -> None:
    score, why = REFUSED[kind]
    with pytest.raises(ConfigurationError, match=why) as refused:
        postprocessor_reranker(Scoring(score=score))(QUERY, TEXTS)
    said = str(refused.value)
    assert said.startswith("the reranker Scoring.postprocess_nodes returned node scores")
    assert "NodeWithScore.score" in said.split(": ")[-1]  # what to do


class Rewriting(BaseNodePostprocessor):
    """Returns new nodes with new text and their own ids (a summarizer that keeps nothing)."""

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        return [
            NodeWithScore(node=TextNode(text=f"about {n.node.get_content()}"), score=1.0)
            for n in nodes
        ]


def test_an_answer_that_matches_no_text_is_refused_not_read_without_it() -> None:
    """Before 2026-12-01 such nodes were left out: every text scored the floor, silently."""
    with pytest.raises(ConfigurationError, match="matching none of the texts"):
        postprocessor_reranker(Rewriting())(QUERY, TEXTS)
