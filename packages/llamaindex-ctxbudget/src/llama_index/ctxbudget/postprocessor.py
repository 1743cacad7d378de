"""`CtxBudgetNodePostprocessor`: any retriever's nodes, packed into a token budget.

Each call dispatches a `ContextAssembledEvent` (LlamaIndex instrumentation) and logs its
``explain()`` at DEBUG on this module's logger (`llama_index.ctxbudget.events`).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from llama_index.core.bridge.pydantic import ConfigDict, PrivateAttr
from llama_index.core.instrumentation import get_dispatcher  # type: ignore[attr-defined]
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode

from ctxbudget import AssembledContext, ContextAssembler, ContextItem, Shrink
from ctxbudget.compat import refuse_unknown, renamed
from ctxbudget.core.documents import included_positions, pack_documents
from ctxbudget.core.ids import check_caller_id, internal_id
from ctxbudget.core.numbers import count, real
from ctxbudget.core.unicode import lone_surrogate
from ctxbudget.errors import InvalidBudgetError, InvalidItemError
from ctxbudget.memory.inputs import check_query
from llama_index.ctxbudget.events import LastContext, report_assembly
from llama_index.ctxbudget.node_tiers import TIER_KEY, hide_key, node_tier

__all__ = ["CtxBudgetNodePostprocessor", "with_text"]

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)


def with_text(node: NodeWithScore, text: str, metadata_mode: MetadataMode) -> NodeWithScore:
    """A copy of ``node`` whose content, as ``metadata_mode`` reads it, is ``text`` (a cut one).

    When ``text`` was cut from the content with its metadata header, the copy hides its
    metadata from that mode's reader (the LLM's or the embedder's excluded keys; for
    ``MetadataMode.ALL`` a template without the header), so the header is not read twice.
    """
    inner = node.node
    update: dict[str, Any] = {"text": text}
    if metadata_mode != MetadataMode.NONE and inner.get_metadata_str(metadata_mode):
        if metadata_mode == MetadataMode.LLM:
            update["excluded_llm_metadata_keys"] = list(inner.metadata)
        elif metadata_mode == MetadataMode.EMBED:
            update["excluded_embed_metadata_keys"] = list(inner.metadata)
        else:
            update["text_template"] = "{content}"
    return NodeWithScore(node=inner.model_copy(update=update), score=node.score)


class CtxBudgetNodePostprocessor(BaseNodePostprocessor):
    """Keeps the most valuable nodes that fit ``budget`` tokens; use it in any query engine.

    Nodes are ctxbudget items: higher score first (the exact knapsack when it is small enough),
    duplicates dropped (same node id, same text, or near-same embedding when nodes carry
    embeddings), and the next node cut at a sentence boundary to use the room left. Two nodes
    with one id and different contents (two indexes that both hold a ``guide#0``) are two items,
    each reported under its node id; one id and one content is one node found twice (fusion
    retrievers), and the copy returned is the one the report keeps (the higher tier, then the
    higher score, then the earlier). A metadata ``tier_key`` puts nodes in tiers
    (``"PINNED"``, ``"RETRIEVED"``, ``"ENTITY"``... or an int; a lower tier is packed first; tag
    nodes with `set_tier`). Kept nodes come back tier by tier, in the order given within a tier:
    the order the call's report lists them (what is returned is exactly its ``included``), with
    ``tier_key`` hidden from the LLM and the embedder (it is control metadata).

    What is counted is each node's content as the response synthesizer sends it
    (``metadata_mode``, LlamaIndex's ``MetadataMode.LLM`` by default) with ``model``'s
    tokenizer, each as a line of its own: the kept nodes fit ``budget`` as one rendered block.
    Node ids starting with ``ctxbudget:`` are refused (`InvalidItemError`): ctxbudget keeps
    them for its own items. A score is any real number (numpy's too; None is no score, 0.0);
    NaN and the infinities are refused (`InvalidItemError` naming the node), as everywhere
    numbers enter ctxbudget (`ctxbudget.core.numbers`).

    Each call dispatches a `ContextAssembledEvent` carrying its `AssembledContext`.

    Attributes:
        budget: the most tokens the kept nodes may take (``token_budget`` is its old name).
        model: the model whose tokenizer counts.
        tier_key: the metadata key naming a node's tier (None: every node is RETRIEVED).
        metadata_mode: which content is counted.
        truncate: cut a node that does not fit whole at a sentence boundary (else drop it).
        near_duplicate_threshold: cosine similarity at which nodes with embeddings are
            duplicates, above 0 and at most 1 (None: off).

    >>> from llama_index.core import VectorStoreIndex  # doctest: +SKIP
    >>> index.as_query_engine(node_postprocessors=[  # doctest: +SKIP
    ...     CtxBudgetNodePostprocessor(budget=1500, model="gpt-4o")])
    """

    # An unknown option (a misspelled ``budget``) is refused, naming it, not ignored.
    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    budget: int
    model: str = "gpt-4o"
    tier_key: str | None = TIER_KEY
    metadata_mode: MetadataMode = MetadataMode.LLM
    truncate: bool = True
    near_duplicate_threshold: float | None = 0.95

    _assembler: ContextAssembler = PrivateAttr()
    _last: LastContext = PrivateAttr(default_factory=LastContext)

    def __init__(self, **data: Any) -> None:
        """Validate the budget and build the assembler (``model``'s tokenizer)."""
        where = "CtxBudgetNodePostprocessor"
        refuse_unknown(data, {*type(self).model_fields, "token_budget"}, where)
        data = renamed(data, {"token_budget": "budget"}, where)
        data["budget"] = count(  # numpy ints too; True, "3" or 2.0 refused
            data.get("budget"),
            "CtxBudgetNodePostprocessor: budget",
            error=InvalidBudgetError,
            hint="the most tokens the kept nodes may take, e.g. budget=1500",
        )
        threshold = data.get("near_duplicate_threshold")
        if threshold is not None:  # the LangChain compressor's range; NaN would turn it off
            data["near_duplicate_threshold"] = real(
                threshold,
                f"{where}: near_duplicate_threshold",
                above=0.0,
                most=1.0,
                hint="a cosine similarity in (0, 1], e.g. 0.95, or None to turn it off",
            )
        super().__init__(**data)
        self._assembler = ContextAssembler(
            model=self.model,
            min_exchanges=0,
            near_duplicate_threshold=self.near_duplicate_threshold,
        )

    @classmethod
    def class_name(cls) -> str:
        """The class name LlamaIndex serializes."""
        return "CtxBudgetNodePostprocessor"

    @property
    def last_context(self) -> AssembledContext | None:
        """The assembly of this thread's or asyncio task's last call (``.explain()``).

        Kept per thread and task (`contextvars`): concurrent calls never see each other's.
        For one call's report wherever it ran, handle its `ContextAssembledEvent`. Its
        ``tokens_available`` is ``budget``: the nodes fit it as one rendered block, layout
        included (see `ctxbudget.core.documents.pack_documents`). None before the first call,
        or when ``budget`` is below what the layout alone costs.
        """
        return self._last.get()

    def _postprocess_nodes(
        self,
        nodes: list[NodeWithScore],
        query_bundle: QueryBundle | None = None,
    ) -> list[NodeWithScore]:
        _check(query_bundle)
        kept, context = self._pack(nodes)
        self._report(context, len(nodes))
        return kept

    async def _apostprocess_nodes(
        self,
        nodes: list[NodeWithScore],
        query_bundle: QueryBundle | None = None,
    ) -> list[NodeWithScore]:
        _check(query_bundle)
        # Packed in a worker thread; reported here, in the caller's task.
        kept, context = await asyncio.to_thread(self._pack, nodes)
        self._report(context, len(nodes))
        return kept

    def _pack(
        self, nodes: list[NodeWithScore]
    ) -> tuple[list[NodeWithScore], AssembledContext | None]:
        shown: list[NodeWithScore] = []
        items: list[ContextItem] = []
        contents: dict[str, str] = {}  # node id -> the content of its first node
        for index, given in enumerate(nodes):
            check_caller_id(given.node_id, f"node {index}")
            tier = node_tier(given, self.tier_key)
            node = hide_key(given, self.tier_key)  # counted as it is sent: without the key
            shown.append(node)
            shrink = Shrink.DROP
            if self.truncate and isinstance(node.node, TextNode):
                shrink = Shrink.TRUNCATE
            content = node.node.get_content(metadata_mode=self.metadata_mode)
            problem = lone_surrogate(content)
            if problem is not None:  # named here: the counter would not say which node
                msg = f"node {index} (id {node.node_id!r}): its content {problem}"
                raise InvalidItemError(msg)
            key = node.node_id
            first = contents.setdefault(key, content)
            if first != content:
                # One id, another content (two indexes' "guide#0"): another item, which names
                # the node's id as the caller's own. One id and one content is one node
                # found twice (fusion retrievers): the core keeps one copy (`_kept`).
                key = internal_id("node", json.dumps([node.node_id, index]))
            items.append(
                ContextItem(
                    key,
                    content,
                    tier=tier,
                    score=_score(node, index),
                    shrink=shrink,
                    source="node",
                    embedding=node.node.embedding,
                    record_id=node.node_id,
                )
            )
        context = pack_documents(items, self._assembler, self.budget)
        kept = [] if context is None else _kept(shown, items, context, self.metadata_mode)
        return kept, context

    def _report(self, context: AssembledContext | None, offered: int) -> None:
        self._last.set(context)
        report_assembly(
            dispatcher,
            logger,
            context,
            component=self.class_name(),
            configured=f"budget={self.budget:,}",
            budget=self.budget,
            offered=offered,
        )


def _score(node: NodeWithScore, index: int) -> float:
    """A node's score through the core's number boundary (None: no score, 0.0).

    Raises:
        InvalidItemError: NaN, an infinity or not a number; the message names the node.
    """
    if node.score is None:
        return 0.0
    where = f"CtxBudgetNodePostprocessor: node {index} (id {node.node_id!r}): score"
    hint = (
        "give every node a finite score (higher is better) or None for no score, e.g. fix "
        "or drop the retriever's or reranker's NaN"
    )
    return real(node.score, where, error=InvalidItemError, hint=hint)


def _check(query_bundle: QueryBundle | None) -> None:
    """The core's query check (a lone surrogate refused): the query reaches events and logs."""
    if query_bundle is not None:
        check_query(query_bundle.query_str)


def _kept(
    nodes: list[NodeWithScore],
    offered: list[ContextItem],
    context: AssembledContext,
    metadata_mode: MetadataMode,
) -> list[NodeWithScore]:
    """The nodes the report includes, in its order, truncated ones replaced by their copy.

    ``offered[i]`` is the item of ``nodes[i]``. Each included item is mapped back to the node
    it was made from by position, never by node id: of a node found twice (one id, one item
    id), the node returned is the one the core kept (higher tier, then score, then the earlier).
    """
    out: list[NodeWithScore] = []
    for index, item in zip(included_positions(offered, context), context.included, strict=True):
        node = nodes[index]
        if item is not offered[index]:  # cut to fit: a copy with the text that was packed
            node = with_text(node, item.text, metadata_mode)
        out.append(node)
    return out
