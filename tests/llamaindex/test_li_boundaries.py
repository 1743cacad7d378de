"""The LlamaIndex adapter's numbers pass the core's count boundary, as the LangChain one's do.

numpy ints are taken as ints; ``True``, ``"3"``, ``2.0`` and 0 are refused with a
`ConfigurationError` (`InvalidBudgetError` for budgets) naming the class and the option.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest
from llama_index.core.schema import NodeWithScore, TextNode

from ctxbudget import ConfigurationError, InvalidBudgetError, InvalidItemError
from ctxbudget.core.numbers import shown
from ctxbudget.errors import ConfigurationTypeError
from ctxbudget.memory.context import ContextMemory
from llama_index.ctxbudget import CtxBudgetMemory, CtxBudgetNodePostprocessor, CtxBudgetRetriever

BAD = [True, "3", 2.0, np.float64(2.0), 0]


def test_numpy_budgets_and_token_limits_are_taken(context_memory: ContextMemory) -> None:
    # Before: each of these refused a numpy int.
    memory = CtxBudgetMemory.from_defaults(memory=context_memory, token_limit=np.int64(3000))
    assert type(memory.token_limit) is int and memory.token_limit == 3000
    processor = CtxBudgetNodePostprocessor(budget=np.int32(200))
    assert type(processor.budget) is int
    nodes = [NodeWithScore(node=TextNode(text="Lisbon is sunny.", id_="n1"), score=0.5)]
    assert [n.node.node_id for n in processor.postprocess_nodes(nodes)] == ["n1"]
    retriever = CtxBudgetRetriever(context_memory, budget=np.uint16(800), k=np.int64(2))
    assert (retriever.budget, retriever.k) == (800, 2)


@pytest.mark.parametrize("bad", BAD)
def test_other_kinds_are_refused_by_name(context_memory: ContextMemory, bad: object) -> None:
    limit = r"CtxBudgetMemory\(token_limit=\): (budget|Budget\.window) must be"
    with pytest.raises(InvalidBudgetError, match=limit):
        CtxBudgetMemory.from_defaults(memory=context_memory, token_limit=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidBudgetError, match="CtxBudgetNodePostprocessor: budget must be"):
        CtxBudgetNodePostprocessor(budget=bad)
    with pytest.raises(InvalidBudgetError, match="CtxBudgetRetriever: budget must be"):
        CtxBudgetRetriever(context_memory, budget=bad)  # type: ignore[arg-type]
    wrong_k = -1 if bad == 0 else bad  # k=0 is no nodes, as in LangChain's retriever
    with pytest.raises(ConfigurationError, match="CtxBudgetRetriever: k must be"):
        CtxBudgetRetriever(context_memory, budget=100, k=wrong_k)  # type: ignore[arg-type]


# -- one boundary: every door refuses a value as the core does ----------------------------------
def core_phrase(error: pytest.ExceptionInfo[BaseException]) -> str:
    """What every door must repeat of the core's message (the part before its advice)."""
    return str(error.value).split("; ", 1)[0]


CORE_BAD_BUDGETS = [True, "200", float("nan"), float("inf"), float("-inf"), 10**5000]


@pytest.mark.parametrize("bad", CORE_BAD_BUDGETS, ids=shown)
def test_token_limit_is_refused_as_assemble_refuses_a_budget(
    context_memory: ContextMemory, bad: object
) -> None:
    # Before: "CtxBudgetMemory: token_limit must be...", not the core's budget message.
    with pytest.raises(InvalidBudgetError) as core:
        context_memory.assemble("s", "hello", budget=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidBudgetError) as door:
        CtxBudgetMemory.from_defaults(memory=context_memory, token_limit=bad)  # type: ignore[arg-type]
    assert core_phrase(core) in str(door.value)


def test_a_bad_token_limit_leaves_no_store_open(tmp_path: Path) -> None:
    # Checked before from_defaults opens a store of its own (that an error would leave open).
    with pytest.raises(InvalidBudgetError):
        CtxBudgetMemory.from_defaults(path=tmp_path / "store", token_limit="200")  # type: ignore[arg-type]
    assert not (tmp_path / "store").exists()


def test_the_retriever_refuses_k_as_search_does(context_memory: ContextMemory) -> None:
    # Before: "k must be at most 10**100": its own bound, not the one search holds.
    with pytest.raises(ConfigurationError) as core:
        context_memory.search("where?", k=10**5000)
    with pytest.raises(ConfigurationError) as door:
        CtxBudgetRetriever(context_memory, budget=300, k=10**5000)
    assert core_phrase(core) in str(door.value)


QUERY = "where\udfff now"


def test_the_retriever_and_postprocessor_refuse_a_query_as_search_does(
    context_memory: ContextMemory,
) -> None:
    # Before: the retriever's embedder raised TypeError; the postprocessor took the query.
    with pytest.raises(InvalidItemError) as core:
        context_memory.search(QUERY)
    with pytest.raises(InvalidItemError) as retrieved:
        CtxBudgetRetriever(context_memory, budget=300, user_id="u").retrieve(QUERY)
    nodes = [NodeWithScore(node=TextNode(text="Lisbon is sunny.", id_="n1"), score=0.5)]
    post = CtxBudgetNodePostprocessor(budget=300)
    with pytest.raises(InvalidItemError) as processed:
        post.postprocess_nodes(nodes, query_str=QUERY)
    with pytest.raises(InvalidItemError) as processed_async:
        asyncio.run(post.apostprocess_nodes(nodes, query_str=QUERY))
    for door in (retrieved, processed, processed_async):
        assert core_phrase(core) in str(door.value)


def test_a_misspelled_postprocessor_option_is_refused_by_name() -> None:
    # Before: pydantic dropped an unknown field without a word.
    with pytest.raises(ConfigurationTypeError, match="'bugdet'"):
        CtxBudgetNodePostprocessor(budget=300, bugdet=500)
    with pytest.warns(DeprecationWarning):  # an old name is still an option
        assert CtxBudgetNodePostprocessor(token_budget=300).budget == 300
