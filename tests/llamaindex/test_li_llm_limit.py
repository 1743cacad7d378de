"""``CtxBudgetMemory.from_defaults(llm=...)``: the limit sized by the LLM, as ChatMemoryBuffer's.

A user migrating from ``ChatMemoryBuffer.from_defaults(llm=llm)`` passes the LLM; before, that was
a TypeError. The LLM describes itself (``llm.metadata``): without ``token_limit`` the memory
returns at most its ``context_window`` less its ``num_output`` (the reply's room, the core's
`with_reply_room`, as LangChain's ``reply_room``), counted with the LLM's own tokenizer when
ctxbudget knows its ``model_name``. Real chat engines then send prompts that fit. The LLMs are
LlamaIndex's ``MockLLM`` and a small ``CustomLLM`` with a chosen metadata; the rest is real (an
embedded Chroma, the local embedding model, tiktoken).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    CompletionResponseGen,
    LLMMetadata,
    MessageRole,
)
from llama_index.core.bridge.pydantic import Field
from llama_index.core.chat_engine import CondensePlusContextChatEngine, SimpleChatEngine
from llama_index.core.llms import CustomLLM, MockLLM

from ctxbudget import (
    Budget,
    ConfigurationError,
    ConfigurationTypeError,
    InvalidBudgetError,
    TokenCounter,
)
from ctxbudget.core.budget import with_reply_room
from ctxbudget.memory.context import ContextMemory
from llama_index.ctxbudget import CtxBudgetEmbedding, CtxBudgetMemory
from llama_index.ctxbudget.budget import LLM_SHARE

from .helpers import RecordingLLM, prompt_tokens


class ChosenLLM(CustomLLM):
    """A LlamaIndex ``CustomLLM`` with a chosen metadata, recording the chat prompts it gets."""

    window: Any = 1_200
    output: Any = 200
    name: str = "gpt-4o-mini"
    prompts: list[list[ChatMessage]] = Field(default_factory=list, exclude=True)

    @property
    def metadata(self) -> LLMMetadata:
        # model_construct: a metadata with values pydantic would refuse (NaN) reaches the memory
        return LLMMetadata.model_construct(
            context_window=self.window,
            num_output=self.output,
            model_name=self.name,
            is_chat_model=True,
        )

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text="what to cook with tomatoes")

    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        yield self.complete(prompt)

    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        self.prompts.append([m.model_copy(deep=True) for m in messages])
        reply = "Try a tomato and basil pasta, with a little cheese on top. " * 3
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=reply))


def turn_text(turn: int) -> str:
    return f"Turn {turn}: I have tomatoes, basil and cheese from Lisbon. " * 4


def with_llm(context_memory: ContextMemory, llm: object, **options: Any) -> CtxBudgetMemory:
    return CtxBudgetMemory.from_defaults(
        memory=context_memory, session_id=f"s-{uuid.uuid4().hex[:8]}", llm=llm, **options
    )


# -- the limit ---------------------------------------------------------------------------------


def test_from_defaults_takes_the_llm_like_chat_memory_buffer(
    context_memory: ContextMemory,
) -> None:
    # Before: TypeError: from_defaults() got an unexpected keyword argument 'llm'.
    memory = with_llm(context_memory, MockLLM(max_tokens=256))
    # MockLLM's metadata: LlamaIndex's default window of 3,900, num_output = max_tokens. The
    # memory takes ChatMemoryBuffer's share of it (75%), which leaves the reply its room.
    assert memory.token_limit == 3_900 * 3 // 4 == int(3_900 * LLM_SHARE)
    assert memory.model == "gpt-4o"  # MockLLM's model_name is "unknown": the default counts
    # An LLM set to reply at length: the window less its reply, under the share.
    long = with_llm(context_memory, MockLLM(max_tokens=2_000))
    assert (
        long.token_limit
        == 3_900 - 2_000
        == with_reply_room(Budget.for_model("gpt-4o", window=3_900, reserve=0), 2_000).available
    )


def test_the_llms_window_less_its_output_and_its_tokenizer(context_memory: ContextMemory) -> None:
    memory = with_llm(context_memory, ChosenLLM(window=50_000, output=2_000, name="gpt-4o-mini"))
    assert (memory.token_limit, memory.model) == (37_500, "gpt-4o-mini")  # 75% of 50,000
    assert memory.counter.name == TokenCounter.for_model("gpt-4o-mini").name
    # A dated name is the registry's model; a model the registry does not know counts as gpt-4o.
    dated = with_llm(context_memory, ChosenLLM(name="gpt-4o-2024-08-06"))
    assert dated.model == "gpt-4o"
    unknown = with_llm(context_memory, ChosenLLM(name="my-finetune"))
    assert (unknown.model, unknown.token_limit) == ("gpt-4o", 900)


def test_an_llm_that_does_not_say_its_output_keeps_the_default_reserve(
    context_memory: ContextMemory,
) -> None:
    # MockLLM() and OpenAI without max_tokens say num_output=-1: the registry's default reserve
    # of that window (a quarter, at most 4,096) is kept, as Budget.for_model keeps it.
    memory = with_llm(context_memory, MockLLM())
    assert memory.token_limit == Budget.for_model("gpt-4o", window=3_900).available == 2_925
    big = with_llm(context_memory, ChosenLLM(window=128_000, output=-1, name="gpt-4o"))
    assert big.token_limit == 96_000  # 75% of the window: less than 128,000 - 4,096


def test_an_explicit_token_limit_and_model_win(context_memory: ContextMemory) -> None:
    llm = ChosenLLM(window=1_200, output=200, name="gpt-4o-mini")
    memory = with_llm(context_memory, llm, token_limit=1_150, model="claude-sonnet-4-5")
    # The caller's number: nothing is taken for the reply (LangChain's budget=<int> keeps 0).
    assert (memory.token_limit, memory.model) == (1_150, "claude-sonnet-4-5")


def test_to_dict_holds_the_limit_the_llm_gave(context_memory: ContextMemory) -> None:
    memory = with_llm(context_memory, ChosenLLM(window=1_200, output=200))
    data = memory.to_dict()
    assert (data["token_limit"], data["model"]) == (900, "gpt-4o-mini")
    assert "llm" not in data
    again = CtxBudgetMemory.from_dict(data, memory=context_memory)
    assert (again.token_limit, again.model) == (900, "gpt-4o-mini")
    with pytest.raises(ConfigurationError, match=r"llm= in from_defaults only.*token_limit="):
        CtxBudgetMemory.from_dict(data, memory=context_memory, llm=ChosenLLM())
    with pytest.raises(ConfigurationError, match=r"llm= in from_defaults only"):
        CtxBudgetMemory(memory=context_memory, token_limit=100, session_id="x", llm=ChosenLLM())


# -- bad values: what, where, what to do --------------------------------------------------------


@pytest.mark.parametrize(
    ("window", "output", "pattern"),
    [
        (0, 200, r"ChosenLLM\.metadata\.context_window must be positive, got 0.*token_limit="),
        (-1, 200, r"context_window must be positive, got -1"),
        (math.nan, 200, r"context_window must be an int.*nan.*token_limit="),
        (4096.0, 200, r"context_window must be an int"),
        (True, 200, r"context_window must be an int"),
        ("8k", 200, r"context_window must be an int"),
        (1_200, math.nan, r"ChosenLLM\.metadata\.num_output must be an int.*max_tokens"),
        (
            1_200,
            1_200,
            r"ChosenLLM\.metadata\.num_output\) is set to generate up to 1,200 tokens, which "
            r"leaves no room for the prompt in its window of 1,200.*pass token_limit=",
        ),
        (1_200, 5_000, r"up to 5,000 tokens.*window of 1,200"),
    ],
)
def test_bad_metadata_is_refused_before_a_store_is_opened(
    tmp_path: Any, window: object, output: object, pattern: str
) -> None:
    folder = tmp_path / "never"
    with pytest.raises(InvalidBudgetError, match=pattern) as caught:
        CtxBudgetMemory.from_defaults(llm=ChosenLLM(window=window, output=output), path=folder)
    assert str(caught.value).startswith("CtxBudgetMemory.from_defaults(llm=): ")
    assert not folder.exists()


def test_not_an_llm_is_refused(tmp_path: Any) -> None:
    for wrong in ("gpt-4o", CtxBudgetEmbedding, object()):
        with pytest.raises(ConfigurationTypeError, match=r"must be a LlamaIndex LLM.*got"):
            CtxBudgetMemory.from_defaults(llm=wrong, path=tmp_path / "never")  # type: ignore[arg-type]
        with pytest.raises(ConfigurationTypeError, match=r"must be a LlamaIndex LLM"):
            CtxBudgetMemory.from_defaults(  # checked even when it sizes nothing
                llm=wrong,
                token_limit=500,
                model="gpt-4o",
                path=tmp_path / "never",  # type: ignore[arg-type]
            )
    assert not (tmp_path / "never").exists()


def test_metadata_that_pydantic_refuses_is_refused_with_where(tmp_path: Any) -> None:
    class StrictLLM(ChosenLLM):
        @property
        def metadata(self) -> LLMMetadata:
            return LLMMetadata(context_window=self.window, num_output=self.output)

    with pytest.raises(
        ConfigurationError, match=r"(?s)reading StrictLLM\.metadata failed.*finite.*token_limit="
    ):
        CtxBudgetMemory.from_defaults(llm=StrictLLM(window=math.nan), path=tmp_path / "never")
    assert not (tmp_path / "never").exists()


def test_an_llm_and_a_server_to_ask_are_refused_together(tmp_path: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"either llm= .* or base_url="):
        CtxBudgetMemory.from_defaults(
            llm=MockLLM(max_tokens=10), base_url="http://127.0.0.1:9", path=tmp_path / "never"
        )


# -- the way it is used: real chat engines -------------------------------------------------------


def test_simple_chat_engine_prompts_fit_the_llms_window_less_its_reply(
    context_memory: ContextMemory,
) -> None:
    # An LLM set to reply at length: its reply's room, not the share, bounds the memory.
    llm = ChosenLLM(window=1_200, output=600, name="gpt-4o-mini")
    memory = with_llm(context_memory, llm)
    assert memory.token_limit == 1_200 - 600
    engine = SimpleChatEngine.from_defaults(
        llm=llm, memory=memory, system_prompt="You are a cooking assistant."
    )
    counter = TokenCounter.for_model("gpt-4o-mini")
    sizes = []
    for turn in range(1, 26):
        engine.chat(turn_text(turn))
        prompt = llm.prompts[-1]
        sizes.append(prompt_tokens(counter, prompt))
        assert sizes[-1] <= 1_200 - 600, turn
        assert prompt[-1].content == turn_text(turn)
    assert max(sizes) > 500  # the room was used, and history was cut to fit it
    assert len(llm.prompts[-1]) < len(memory.get_all()) + 1


def test_simple_chat_engine_with_mock_llm_fits(
    context_memory: ContextMemory, counter: TokenCounter
) -> None:
    llm = RecordingLLM(max_tokens=300, is_chat_model=True)  # LlamaIndex's MockLLM, recording
    memory = with_llm(context_memory, llm)
    assert memory.token_limit == 3_900 * 3 // 4  # ChatMemoryBuffer's share of MockLLM's window
    engine = SimpleChatEngine.from_defaults(llm=llm, memory=memory, system_prompt="Be brief.")
    sizes = []
    for turn in range(1, 16):
        engine.chat(turn_text(turn) * 3)
        prompt = llm.chat_prompts()[-1]
        assert prompt[-1].content == turn_text(turn) * 3
        sizes.append(prompt_tokens(counter, prompt))
        assert sizes[-1] <= 3_900 - 300, turn
    assert max(sizes) > 2_500  # history filled the room and was cut to fit it
    assert len(memory.get_all()) == 30


def test_condense_plus_context_engine_needs_room_for_its_context(
    context_memory: ContextMemory, counter: TokenCounter
) -> None:
    # The engine fits the retrieved context into what the history leaves of the LLM's window
    # (LlamaIndex's PromptHelper). With the whole window less the reply, LlamaIndex raised
    # "Chunk size -102 is not positive": the default is ChatMemoryBuffer's share, 75%.
    llm = RecordingLLM(max_tokens=300, is_chat_model=True)
    memory = with_llm(context_memory, llm)
    index = VectorStoreIndex.from_documents(
        [Document(text=f"Recipe {i}: tomatoes, basil and cheese, baked. " * 8) for i in range(6)]
    )
    engine = CondensePlusContextChatEngine.from_defaults(
        retriever=index.as_retriever(similarity_top_k=3),
        llm=llm,
        memory=memory,
        system_prompt="You are a cooking assistant.",
    )
    for turn in range(1, 16):
        engine.chat(turn_text(turn) * 3)
        answer = llm.chat_prompts()[-1]
        assert answer[-1].content == turn_text(turn) * 3
        assert prompt_tokens(counter, answer) <= 3_900 - 300, turn
        assert "Recipe" in answer[0].content
    assert len(memory.get_all()) == 30
