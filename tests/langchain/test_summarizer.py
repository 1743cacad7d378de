"""`ChatModelSummarizer`: the prompt it sends, the limit it keeps, and its use by the core."""

from __future__ import annotations

import pytest
from langchain_core.language_models import FakeListChatModel
from lc_fakes import RecordingChatModel

from ctxbudget import ContextAssembler, ContextItem, Shrink, Summarizer, Tier, TokenCounter
from langchain_ctxbudget import DEFAULT_SUMMARY_PROMPT, ChatModelSummarizer

COUNTER = TokenCounter.for_model("gpt-4o")


def test_it_is_a_ctxbudget_summarizer_and_sends_the_documented_prompt() -> None:
    model = RecordingChatModel(messages=iter(["Ana moved to Lisbon."]))
    summarizer = ChatModelSummarizer(model)
    assert isinstance(summarizer, Summarizer)
    assert (
        summarizer.summarize(["I moved to Lisbon.", "  ", "It is sunny\nthere."], 40)
        == "Ana moved to Lisbon."
    )
    ((sent, _),) = model.calls
    assert len(sent) == 1 and sent[0].type == "human"
    expected = DEFAULT_SUMMARY_PROMPT.format(
        texts="- I moved to Lisbon.\n- It is sunny\nthere.", max_words=30
    )
    assert sent[0].content == expected
    assert "at most 30 words" in sent[0].content


@pytest.mark.parametrize("limit", [5, 12, 30])
def test_a_long_reply_is_cut_to_the_limit_at_a_sentence(limit: int) -> None:
    reply = " ".join(f"Fact {i} about the trip to Porto." for i in range(20))
    summary = ChatModelSummarizer(FakeListChatModel(responses=[reply])).summarize(["x"], limit)
    assert COUNTER.count(summary) <= limit
    assert summary == "" or reply.startswith(summary.removesuffix(" …").rstrip())


async def test_async_and_empty_inputs() -> None:
    summarizer = ChatModelSummarizer(FakeListChatModel(responses=["Short."]))
    assert await summarizer.asummarize(["a"], 10) == "Short."
    assert summarizer.summarize([], 10) == ""
    assert summarizer.summarize(["a"], 0) == ""
    with pytest.raises(ValueError, match="texts"):
        ChatModelSummarizer(FakeListChatModel(responses=["x"]), prompt="Summarize please")


def test_the_assembler_summarizes_what_does_not_fit_with_it() -> None:
    summarizer = ChatModelSummarizer(
        FakeListChatModel(responses=["Notes: Ana likes trains and rivers."])
    )
    notes = [
        ContextItem(
            f"n{i}",
            f"Note {i}: " + "details about the trip " * 10,
            tier=Tier.RETRIEVED,
            shrink=Shrink.SUMMARIZE,
        )
        for i in range(6)
    ]
    query = ContextItem("q", "What does Ana like?", tier=Tier.QUERY)
    ctx = ContextAssembler(COUNTER, summarizer=summarizer).assemble([*notes, query], budget=200)
    assert "Notes: Ana likes trains and rivers." in ctx.render()
    assert ctx.tokens_used <= 200
