"""LlamaIndex adapters for ctxbudget, importable as ``llama_index.ctxbudget``.

* `CtxBudgetMemory`: a chat memory whose ``get`` always fits its token limit, backed by a
  ctxbudget ``ContextMemory`` (Chroma and a local embedder).
* `CtxBudgetRetriever`: retrieval from a ``ContextMemory`` within a token budget.
* `CtxBudgetNodePostprocessor`: any retriever's nodes packed into a token budget.
* `CtxBudgetEmbedding`: ctxbudget's local embedder as a LlamaIndex embedding model.
* `LLMSummarizer`: a ctxbudget ``Summarizer`` backed by any LlamaIndex LLM.
* `LLMEntityExtractor`: entity memory's extractor backed by any LlamaIndex LLM.
* `ContextAssembledEvent`: the LlamaIndex instrumentation event of each assembly (its report).
* `set_tier`: tag a node or document with its tier, hidden from the LLM and the embedder.
"""

from __future__ import annotations

from llama_index.ctxbudget.blocks import block_tier
from llama_index.ctxbudget.embeddings import CtxBudgetEmbedding
from llama_index.ctxbudget.entities import DEFAULT_ENTITY_PROMPT, LLMEntityExtractor
from llama_index.ctxbudget.events import ContextAssembledEvent
from llama_index.ctxbudget.memory import CtxBudgetMemory
from llama_index.ctxbudget.node_tiers import set_tier
from llama_index.ctxbudget.postprocessor import CtxBudgetNodePostprocessor
from llama_index.ctxbudget.retriever import CtxBudgetRetriever
from llama_index.ctxbudget.summarizer import DEFAULT_SUMMARY_PROMPT, LLMSummarizer

__all__ = [
    "DEFAULT_ENTITY_PROMPT",
    "DEFAULT_SUMMARY_PROMPT",
    "ContextAssembledEvent",
    "CtxBudgetEmbedding",
    "CtxBudgetMemory",
    "CtxBudgetNodePostprocessor",
    "CtxBudgetRetriever",
    "LLMEntityExtractor",
    "LLMSummarizer",
    "block_tier",
    "set_tier",
]
