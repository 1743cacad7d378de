"""LangChain adapters for ctxbudget: the prompt always fits, counted with the model's tokenizer.

* `CtxBudgetMiddleware`: agent middleware for ``langchain.agents.create_agent`` (needs the
  ``agents`` extra: ``pip install 'langchain-ctxbudget[agents]'``).
* `budget_messages`: a drop-in for ``trim_messages`` (also a Runnable for LCEL).
* `CtxBudgetRetriever`, `CtxBudgetCompressor`: retrieved context packed into a token budget.
* `CtxBudgetChatMessageHistory`: chat history stored in a ``ContextMemory``.
* `CtxBudgetStore`: LangGraph's long-term memory store (``BaseStore``) kept in a
  ``ContextMemory`` (needs the ``agents`` extra, for ``langgraph``).
* `ChatModelSummarizer`: a ``ctxbudget.Summarizer`` backed by any chat model.
* `LLMEntityExtractor`: entity memory's extractor backed by any chat model.

>>> from langchain_core.messages import HumanMessage
>>> from langchain_ctxbudget import budget_messages
>>> print([m.content for m in budget_messages([HumanMessage("Hi")], max_tokens=20)])
['Hi']
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain_ctxbudget.chat_history import CtxBudgetChatMessageHistory
from langchain_ctxbudget.compressors import CtxBudgetCompressor
from langchain_ctxbudget.entities import DEFAULT_ENTITY_PROMPT, LLMEntityExtractor
from langchain_ctxbudget.messages import budget_messages
from langchain_ctxbudget.observe import CallContext
from langchain_ctxbudget.retrievers import CtxBudgetRetriever
from langchain_ctxbudget.summarizers import DEFAULT_SUMMARY_PROMPT, ChatModelSummarizer

if TYPE_CHECKING:
    from langchain_ctxbudget.middleware import CtxBudgetMiddleware
    from langchain_ctxbudget.store import CtxBudgetStore

__all__ = [
    "DEFAULT_ENTITY_PROMPT",
    "DEFAULT_SUMMARY_PROMPT",
    "CallContext",
    "ChatModelSummarizer",
    "CtxBudgetChatMessageHistory",
    "CtxBudgetCompressor",
    "CtxBudgetMiddleware",
    "CtxBudgetRetriever",
    "CtxBudgetStore",
    "LLMEntityExtractor",
    "budget_messages",
]

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # The middleware needs the optional `langchain` package: import it on first use, so the
    # rest of the package works without it (the import error names the extra to install).
    if name == "CtxBudgetMiddleware":
        from langchain_ctxbudget.middleware import CtxBudgetMiddleware

        return CtxBudgetMiddleware
    if name == "CtxBudgetStore":  # needs `langgraph` too (the `agents` extra)
        from langchain_ctxbudget.store import CtxBudgetStore

        return CtxBudgetStore
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)
