"""The LlamaIndex adapter's numbers pass the core's count boundary, as the LangChain one's do.

numpy ints are taken as ints; ``True``, ``"3"``, ``2.0`` and 0 are refused with a
`ConfigurationError` (`InvalidBudgetError` for budgets) naming the class and the option.
"""

from __future__ import annotations

import numpy as np
import pytest
from llama_index.core.schema import NodeWithScore, TextNode

from ctxbudget import ConfigurationError, InvalidBudgetError
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
    with pytest.raises(InvalidBudgetError, match="CtxBudgetMemory: token_limit must be"):
        CtxBudgetMemory.from_defaults(memory=context_memory, token_limit=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidBudgetError, match="CtxBudgetNodePostprocessor: budget must be"):
        CtxBudgetNodePostprocessor(budget=bad)
    with pytest.raises(InvalidBudgetError, match="CtxBudgetRetriever: budget must be"):
        CtxBudgetRetriever(context_memory, budget=bad)  # type: ignore[arg-type]
    wrong_k = -1 if bad == 0 else bad  # k=0 is no nodes, as in LangChain's retriever
    with pytest.raises(ConfigurationError, match="CtxBudgetRetriever: k must be"):
        CtxBudgetRetriever(context_memory, budget=100, k=wrong_k)  # type: ignore[arg-type]
