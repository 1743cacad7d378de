"""A LlamaIndex rerank node postprocessor, as `MemoryConfig.reranker`.

A tiny `BaseNodePostprocessor` of the test's own stands in for ``SentenceTransformerRerank`` or
``CohereRerank``; the memory, store and embedder are real.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from rerank_setup import EVIDENCE, QUERY, memory, session_of

from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.store.chroma_store import ChromaStore
from llama_index.ctxbudget.rerank import postprocessor_reranker


class KeywordRerank(BaseNodePostprocessor):
    """Scores nodes holding ``word`` 1, the others 0; keeps the best ``top_n``."""

    word: str
    top_n: int = 3

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        assert query_bundle is not None and query_bundle.query_str == QUERY
        scored = [
            NodeWithScore(node=n.node, score=float(self.word in n.node.get_content()))
            for n in nodes
        ]
        return sorted(scored, key=lambda n: -(n.score or 0.0))[: self.top_n]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder) -> ChromaStore:
    folder: Path = tmp_path_factory.mktemp("li-rerank")
    return ChromaStore(folder / "db", embedder=embedder)


@pytest.mark.parametrize("wrapped", [True, False], ids=["wrapped", "as-is"])
async def test_a_rerank_postprocessor_changes_the_context(
    store: ChromaStore, wrapped: bool
) -> None:
    postprocessor = KeywordRerank(word="sunrise")
    plain = memory(store)
    session = session_of(plain)
    before = plain.assemble(session, QUERY, budget=130)
    reranker = postprocessor_reranker(postprocessor) if wrapped else postprocessor
    mem = memory(store, reranker)
    after = mem.assemble(session, QUERY, budget=130)
    assert EVIDENCE not in [it.text for it in before.included]
    assert EVIDENCE in [it.text for it in after.included]
    later = await mem.aassemble(session, QUERY, budget=130)  # the async path too
    assert EVIDENCE in [it.text for it in later.included]


def test_dropped_nodes_score_below_every_kept_one() -> None:
    texts = ["a sunrise", "tea", "more tea", "tea again"]
    scores = postprocessor_reranker(KeywordRerank(word="sunrise"))(QUERY, texts)
    assert scores == [1.0, 0.0, 0.0, -1.0]


def test_the_llamaindex_memory_sends_what_the_postprocessor_ranks_first(
    store: ChromaStore,
) -> None:
    from llama_index.ctxbudget import CtxBudgetMemory

    def sent(reranker: object) -> list[str]:
        mem = memory(store, reranker)
        session = session_of(mem)
        door = CtxBudgetMemory.from_defaults(memory=mem, session_id=session, token_limit=160)
        return [str(m.content) for m in door.get(input=QUERY)]

    assert not any(EVIDENCE in text for text in sent(None))
    assert any(EVIDENCE in text for text in sent(KeywordRerank(word="sunrise")))


class Fresh(BaseNodePostprocessor):
    """Answers with new nodes (new ids) of the same texts, the sunrise first, unscored."""

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        ranked = sorted(nodes, key=lambda n: "sunrise" not in n.node.get_content())
        return [NodeWithScore(node=TextNode(text=n.node.get_content()), score=None) for n in ranked]


def test_new_nodes_of_the_same_texts_are_matched_by_text() -> None:
    scores = postprocessor_reranker(Fresh())(QUERY, ["tea", "a sunrise", "more tea"])
    assert scores[1] == max(scores) and len(set(scores)) == 3


class Superscript(BaseNodePostprocessor):
    """Answers with new nodes whose ids end in a digit int() refuses ("²"), the sunrise first."""

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        ranked = sorted(nodes, key=lambda n: "sunrise" not in n.node.get_content())
        return [
            NodeWithScore(node=TextNode(id_="ctxbudget-rerank-²", text=n.node.get_content()))
            for n in ranked
        ]


def test_an_id_of_other_digits_is_matched_by_text() -> None:
    # Before 2026-12-01: "²".isdigit() let int() raise, and the reranker counted as failed.
    scores = postprocessor_reranker(Superscript())(QUERY, ["tea", "a sunrise", "more tea"])
    assert scores[1] == max(scores) and len(set(scores)) == 3
