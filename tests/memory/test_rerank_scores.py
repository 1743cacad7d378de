"""What a reranker may return: one rule (`ranking.reranker_scores`) for every path.

Bugs found by probing the scores real rerankers return:

* a torch tensor (a model's logits), a numpy array of shape ``(n, 1)`` (what many
  cross-encoders' ``predict`` returns) and a list of one-element arrays or tensors were refused
  as ``invalid``: the reranker was logged once and never used again;
* a cross-encoder whose ``predict`` returns ``(n, 1)`` was handed over row by row, so its
  scores were never numbers.

Accepted: a list or tuple of numbers (numpy's scalars and 0-d tensors too), or an array or
tensor of shape ``(n,)`` or ``(n, 1)``. Refused, with the reranker named, what it returned and
what to return instead: another length, ``(n, k > 1)``, NaN, infinity, anything not a number.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import numpy as np
import pytest
import torch

from ctxbudget.core.items import ContextItem
from ctxbudget.errors import ConfigurationError
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.memory.reading.candidates import Candidates
from ctxbudget.memory.reading.rerank import RerankWarnings, rerank

BEST = [0.1, 0.2, 0.3, 0.9]  # the reranker's: the pipeline's last is its best
ACCEPTED: dict[str, Callable[[], object]] = {
    "torch 1-D": lambda: torch.tensor(BEST),
    "torch (n, 1)": lambda: torch.tensor(BEST).reshape(-1, 1),
    "torch bfloat16 with grad": lambda: torch.tensor(BEST, requires_grad=True).bfloat16(),
    "numpy (n, 1)": lambda: np.array(BEST).reshape(-1, 1),
    "numpy float32": lambda: np.array(BEST, dtype=np.float32),
    "numpy float64": lambda: np.array(BEST, dtype=np.float64),
    "numpy ints": lambda: np.array([1, 2, 3, 9]),
    "a list of numpy scalars": lambda: [np.float32(0.1), np.float64(0.2), np.int64(0), 0.9],
    "a list of 0-d tensors": lambda: list(torch.tensor(BEST)),
    "a list of one-element arrays": lambda: list(np.array(BEST).reshape(-1, 1)),
    "a tuple of one-element lists": lambda: tuple([s] for s in BEST),
}
REFUSED: dict[str, tuple[Callable[[], object], str]] = {
    "too few": (lambda: np.array(BEST[:3]), "3 scores for 4 texts"),
    "too many": (lambda: torch.tensor([*BEST, 1.0]), "5 scores for 4 texts"),
    "(n, 2)": (lambda: np.ones((4, 2)), r"shape \(4, 2\)"),
    "(1, n)": (lambda: np.ones((1, 4)), r"shape \(1, 4\)"),
    "3-D": (lambda: torch.ones((4, 1, 1)), r"shape \(4, 1, 1\)"),
    "a single number": (lambda: np.float64(0.5), "one number"),
    "numpy NaN": (lambda: np.array([0.1, np.nan, 0.3, 0.9]), "NaN at 1"),
    "torch infinity": (lambda: torch.tensor([0.1, 0.2, float("inf"), 0.9]), "inf at 2"),
    "a NaN in (n, 1)": (lambda: np.array([[0.1], [0.2], [0.3], [np.nan]]), "NaN at 3"),
    "strings": (lambda: ["high", "low", "low", "low"], "a str at 0"),
    "numpy strings": (lambda: np.array(["1", "2", "3", "4"]), "a str at 0"),
    "bools": (lambda: np.array([True, False, False, True]), "a bool at 0"),
    "a row of two": (lambda: [[0.1, 0.2], 0.2, 0.3, 0.9], "a row of 2 at 0"),
    "None": (lambda: None, "NoneType"),
    "a dict": (lambda: {0: 0.1, 1: 0.2, 2: 0.3, 3: 0.9}, "dict"),
    "a str": (lambda: "0.1 0.2 0.3 0.9", "str"),
}


def pool(scores: Sequence[float]) -> Candidates:
    items = [
        ContextItem(id=f"t{n}", text=f"turn {n}", score=s, timestamp=1.7e9 + n)
        for n, s in enumerate(scores)
    ]
    return Candidates(pinned=(), history=(), summaries=(), retrieved=tuple(items), user_id=None)


FOUND = pool([0.9, 0.8, 0.7, 0.6])


def reranked(reranker: object, caplog: pytest.LogCaptureFixture) -> list[str]:
    config = MemoryConfig(reranker=reranker, reranker_top=4, reranker_weight=1.0)
    with caplog.at_level(logging.WARNING, logger="ctxbudget.memory.reading.rerank"):
        found = rerank(FOUND, "q", config, RerankWarnings())
    return [it.id for it in found.retrieved]


@pytest.mark.parametrize("kind", sorted(ACCEPTED))
def test_scores_as_real_rerankers_return_them_rerank(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    def scorer(query: str, texts: Sequence[str]) -> object:
        return ACCEPTED[kind]()

    assert reranked(scorer, caplog)[0] == "t3", caplog.text  # the reranker's best first
    assert not caplog.records


class Predicting:
    """A cross-encoder whose ``predict`` returns an ``(n, 1)`` array of float32."""

    def predict(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        return np.array([[float(t.endswith("3"))] for _, t in pairs], dtype=np.float32)


def test_a_cross_encoder_answering_n_by_1_reranks(caplog: pytest.LogCaptureFixture) -> None:
    assert reranked(Predicting(), caplog)[0] == "t3", caplog.text
    assert not caplog.records


async def test_an_async_reranker_answering_a_tensor_reranks(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scorer(query: str, texts: Sequence[str]) -> torch.Tensor:
        return torch.tensor(BEST).reshape(-1, 1)

    assert reranked(scorer, caplog)[0] == "t3", caplog.text


@pytest.mark.parametrize("kind", sorted(REFUSED))
def test_what_is_no_score_per_text_leaves_the_ranking_and_says_why(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    answer, _ = REFUSED[kind]

    def scorer(query: str, texts: Sequence[str]) -> object:
        return answer()

    assert reranked(scorer, caplog) == ["t0", "t1", "t2", "t3"]  # as it was
    (warned,) = caplog.records
    said = warned.getMessage()
    assert "the reranker scorer returned" in said
    assert "one finite number per text" in said
    assert "keep their own ranking" in said


@pytest.mark.parametrize("kind", sorted(REFUSED))
def test_the_one_rule_refuses_with_the_reranker_the_answer_and_what_to_do(kind: str) -> None:
    from ctxbudget.memory.policy.ranking import reranker_scores

    answer, why = REFUSED[kind]
    with pytest.raises(ConfigurationError, match=why) as refused:
        reranker_scores(answer(), 4, reranker="my_reranker")
    said = str(refused.value)
    assert said.startswith("the reranker my_reranker returned ")
    assert "return one finite number per text" in said


def test_the_one_rule_flattens_n_by_1_and_keeps_the_order() -> None:
    from ctxbudget.memory.policy.ranking import reranker_scores

    for kind, answer in ACCEPTED.items():
        got = reranker_scores(answer(), 4, reranker="r")
        assert all(type(s) is float for s in got), kind
        assert np.argmax(got) == 3, kind
    got = reranker_scores(np.array([[0.5], [0.25]], dtype=np.float32), 2, reranker="r")
    assert got == [0.5, 0.25]
