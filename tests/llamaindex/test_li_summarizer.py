"""LLMSummarizer: a ctxbudget Summarizer backed by a LlamaIndex LLM."""

from __future__ import annotations

import pytest
from llama_index.core.base.llms.types import ChatMessage, MessageRole

from ctxbudget import Summarizer, Tier, TokenCounter
from ctxbudget.core.ids import internal_id
from ctxbudget.memory.context import ContextMemory
from llama_index.ctxbudget import CtxBudgetMemory, LLMSummarizer

from .helpers import RecordingLLM


def test_the_summary_is_the_llms_reply_within_the_limit(counter: TokenCounter) -> None:
    llm = RecordingLLM(max_tokens=200)
    summarizer = LLMSummarizer(llm)
    assert isinstance(summarizer, Summarizer)

    summary = summarizer.summarize(["Ada moved to Lisbon.", "She works as a chemist."], 25)

    (prompt,) = llm.text_prompts()
    # The same default prompt as LangChain's ChatModelSummarizer (ctxbudget.core.prompts).
    assert prompt.endswith("- Ada moved to Lisbon.\n- She works as a chemist.")
    assert "at most 18 words" in prompt
    assert summary.startswith("text text") and counter.count(summary) <= 25
    assert summarizer.summarize(["x"], 0) == "" and summarizer.summarize([" "], 10) == ""
    assert len(llm.prompts) == 1  # nothing to summarize: the LLM is not asked


def test_a_custom_prompt_takes_the_same_fields_as_langchains() -> None:
    llm = RecordingLLM(max_tokens=3)
    custom = LLMSummarizer(llm, prompt="Shorten to {max_tokens} tokens:\n{texts}")
    assert custom.summarize(["one", "two"], 10) == "text text text"
    assert llm.text_prompts() == ["Shorten to 10 tokens:\n- one\n- two"]
    with pytest.raises(ValueError, match="texts"):
        LLMSummarizer(llm, prompt="Summarize {text}")
    with pytest.raises(ValueError, match="fields are"):
        LLMSummarizer(llm, prompt="{texts} in {language}")


def test_memory_summaries_written_by_the_llm_stand_in_for_cut_history(
    context_memory: ContextMemory, counter: TokenCounter
) -> None:
    llm = RecordingLLM(max_tokens=12, is_chat_model=True)
    memory = CtxBudgetMemory.from_defaults(memory=context_memory, session_id="s", token_limit=300)
    for i in range(40):
        memory.put(ChatMessage(role=MessageRole.USER, content=f"Point {i} about the trip plan."))
        memory.put(ChatMessage(role=MessageRole.ASSISTANT, content=f"Noted point {i}. " * 5))

    ids = memory.summarize(LLMSummarizer(llm), keep_recent=20, stretch=30, max_tokens=40)

    # Summaries are ctxbudget's own items: their ids are in its id space, per session.
    assert ids == [internal_id("summary", "0-29"), internal_id("summary", "30-59")]
    assert len(llm.chat_prompts()) == 2  # a chat model is asked through chat
    memory.put(ChatMessage(role=MessageRole.USER, content="Remind me of the plan."))
    memory.get()
    assert memory.last_context is not None
    summaries = [it for it in memory.last_context.included if it.tier == Tier.SUMMARY]
    assert summaries and all(it.text.startswith("text text") for it in summaries)
