"""The reply's room: a chat model's window comes with room for what it is set to generate.

A provider checks the prompt against the window less the reply's ``max_tokens``: Anthropic
refuses a request whose prompt and ``max_tokens`` exceed the window (ChatAnthropic sets
``max_tokens`` from the model's profile: 64,000 for claude-sonnet-4-5), and a local server cuts
the prompt's start to make room. Without ``reserve=``, the middleware budgeted a window the chat
model declared (its profile's ``max_input_tokens``, Ollama's ``num_ctx``) with a reserve of 0,
and a registry window with at most 4,096: a long conversation was packed up to the window and
the provider refused it. Now the reserve is at least what the chat model is set to generate.
"""

from __future__ import annotations

import pytest
from langchain.agents import create_agent
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    convert_to_openai_messages,
)
from lc_fakes import RecordingChatModel

from ctxbudget import AssembledContext, Budget, InvalidBudgetError, TokenCounter
from langchain_ctxbudget import CtxBudgetMiddleware
from langchain_ctxbudget.budget import model_output

COUNTER = TokenCounter.for_model("gpt-4o")


class CappedModel(RecordingChatModel):
    """A chat model set to generate at most ``max_tokens``, with a LangChain model profile."""

    model_name: str = "gpt-4o"
    max_tokens: int | None = None


def history(turns: int) -> list[BaseMessage]:
    messages: list[BaseMessage] = []
    for i in range(turns):
        messages += [HumanMessage(f"question {i} " + "word " * 40, id=f"h{i}")]
        messages += [AIMessage(f"answer {i} " + "word " * 40, id=f"a{i}")]
    return [*messages, HumanMessage("and now?", id="q")]


def test_chat_anthropic_gets_room_for_its_max_tokens() -> None:
    chat = ChatAnthropic(model="claude-sonnet-4-5", api_key="offline")  # type: ignore[arg-type]
    assert chat.max_tokens == 64_000 and chat.profile is not None
    for middleware in (
        CtxBudgetMiddleware(),
        CtxBudgetMiddleware(model="anthropic:claude-sonnet-4-5"),
        CtxBudgetMiddleware(model=chat),
    ):
        budget = middleware._call_budget(COUNTER, chat, [])
        # Before: (200,000, 0) from the profile, (200,000, 4,096) from the registry.
        assert (budget.window, budget.reserve) == (200_000, 64_000)


@pytest.mark.parametrize("max_tokens", [None, 300, 900])
def test_what_is_sent_leaves_the_models_max_tokens(max_tokens: int | None) -> None:
    model = CappedModel(
        messages=iter([AIMessage("ok")]),
        profile={"max_input_tokens": 2_000},
        max_tokens=max_tokens,
    )
    seen: list[AssembledContext] = []
    middleware = CtxBudgetMiddleware(on_context=lambda c: seen.append(c.context))
    create_agent(model, middleware=[middleware]).invoke({"messages": history(40)})
    reserve = max(max_tokens or 0, min(4096, 2_000 // 4))  # the registry's default, at least
    assert seen[0].budget.reserve == reserve
    sent, _tools = model.calls[0]
    assert COUNTER.count_messages(convert_to_openai_messages(sent)) <= 2_000 - reserve
    assert seen[0].tokens_used <= 2_000 - reserve
    assert sent[-1].id == "q"


def test_the_callers_reserve_and_window_are_kept() -> None:
    capped = CappedModel(profile={"max_input_tokens": 2_000}, max_tokens=900, messages=iter([]))
    given = CtxBudgetMiddleware(reserve=100)._call_budget(COUNTER, capped, [])
    assert (given.window, given.reserve) == (2_000, 100)
    window = CtxBudgetMiddleware(budget=1_500)._call_budget(COUNTER, capped, [])
    assert (window.window, window.reserve) == (1_500, 0)  # docs: 0 with an int budget
    whole = Budget(window=1_500, reserve=7)
    assert CtxBudgetMiddleware(budget=whole)._call_budget(COUNTER, capped, []) == whole


def test_a_max_tokens_that_leaves_no_room_is_refused_with_the_numbers() -> None:
    capped = CappedModel(profile={"max_input_tokens": 2_000}, max_tokens=2_000, messages=iter([]))
    with pytest.raises(InvalidBudgetError, match=r"up to 2,000 tokens.*window of 2,000"):
        CtxBudgetMiddleware()._call_budget(COUNTER, capped, [])


def test_model_output_reads_every_providers_setting() -> None:
    assert model_output(CappedModel(messages=iter([]), max_tokens=5)) == 5
    assert model_output(CappedModel(messages=iter([]))) is None
    assert model_output(CappedModel(messages=iter([])).bind(max_tokens=7)) == 7
    assert model_output(CappedModel(messages=iter([]), max_tokens=5).bind(stop=["x"])) == 5

    class Ollama(RecordingChatModel):
        num_predict: int | None = 256

    assert model_output(Ollama(messages=iter([]))) == 256
    for bad in (True, 0, -1, 2.5, "100"):
        assert model_output(CappedModel.model_construct(max_tokens=bad)) is None
