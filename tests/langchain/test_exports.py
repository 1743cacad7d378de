from __future__ import annotations

import sys

import pytest

import langchain_ctxbudget
from ctxbudget import MissingDependencyError


def test_public_names_are_pinned() -> None:
    assert sorted(langchain_ctxbudget.__all__) == sorted(
        [
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
    )
    for name in langchain_ctxbudget.__all__:
        assert getattr(langchain_ctxbudget, name) is not None
    with pytest.raises(AttributeError):
        langchain_ctxbudget.NoSuchThing  # noqa: B018


def test_the_middleware_without_langchain_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "langchain_ctxbudget.middleware", raising=False)
    monkeypatch.setitem(sys.modules, "langchain.agents.middleware", None)  # as if not installed
    with pytest.raises(MissingDependencyError, match=r"langchain-ctxbudget\[agents\]"):
        langchain_ctxbudget.CtxBudgetMiddleware  # noqa: B018
    # Everything else works without it.
    from langchain_core.messages import HumanMessage

    assert langchain_ctxbudget.budget_messages([HumanMessage("hi")], max_tokens=20)
