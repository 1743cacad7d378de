"""The message being answered reaches the model as the caller gave it, and is stored once.

* Images (and the other blocks a `ChatMessage` carries) of the current message are sent as the
  caller's own blocks, counted as the provider bills them (an image by its size), directly and
  through a real `FunctionAgent`, on its first step and after its tool calls.
* A block ctxbudget cannot count (audio, video, a document) is refused, naming what to do,
  instead of being replaced by a mark the model cannot see.
* A question put again after a failed model call (no reply followed it) is a retry: stored
  once, sent once. The same words said again after a reply are a new turn.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from llama_index.core import Settings
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import (
    AudioBlock,
    ChatMessage,
    ChatResponse,
    ImageBlock,
    MessageRole,
    TextBlock,
    ToolCallBlock,
)
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms.mock import MockFunctionCallingLLM

from ctxbudget import BudgetExceededError, InvalidItemError, TokenCounter
from ctxbudget.memory.context import ContextMemory
from ctxbudget.tokens.images import image_tokens
from llama_index.ctxbudget import CtxBudgetEmbedding

from .helpers import (
    AGENT_WARNING,
    Recorder,
    RecordingLLM,
    assistant,
    memory_on,
    openai_messages,
    user,
    weather_tool,
)


def png(width: int, height: int) -> bytes:
    """A real (grey) PNG file of the given size."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    rows = b"".join(b"\x00" + b"\x80" * width for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


PHOTO = png(640, 360)


def photo_message(text: str = "What is in this photo?") -> ChatMessage:
    return ChatMessage(
        role=MessageRole.USER, blocks=[TextBlock(text=text), ImageBlock(image=PHOTO)]
    )


IMAGE_PART = {"type": "image_url", "image_url": {"url": "x"}, "width": 640, "height": 360}


def billed(counter: TokenCounter, messages: Sequence[ChatMessage]) -> int:
    """Prompt tokens as an OpenAI-style LLM bills these messages, the photo by its size."""
    sent = openai_messages(messages)
    for entry, message in zip(sent, messages, strict=True):
        if any(isinstance(b, ImageBlock) for b in message.blocks):
            entry["content"] = [
                {"type": "text", "text": b.text} if isinstance(b, TextBlock) else IMAGE_PART
                for b in message.blocks
            ]
    return counter.count_messages(sent)


def images_of(message: ChatMessage) -> list[bytes]:
    return [b.resolve_image().read() for b in message.blocks if isinstance(b, ImageBlock)]


# -- the caller's own blocks -------------------------------------------------------------------
def test_the_current_messages_image_is_sent_as_given_and_counted_by_its_size(
    context_memory: ContextMemory, counter: TokenCounter
) -> None:
    memory = memory_on(context_memory, token_limit=900)
    memory.put_messages([user("Hi, I am planning a trip."), assistant("Happy to help.")])
    question = photo_message()
    memory.put(question)

    out = memory.get()

    assert out[-1].role is MessageRole.USER
    assert images_of(out[-1]) == [PHOTO]  # the caller's image, not the text "[image]"
    assert out[-1].blocks[0] == TextBlock(text="What is in this photo?")
    assert "[image]" not in (out[-1].content or "")
    context = memory.last_context
    assert context is not None
    assert context.tokens_used == billed(counter, out) <= 900
    assert billed(counter, out) - billed(counter, out[:-1]) > image_tokens(640, 360)
    # What was returned is a copy: a caller editing it changes nothing stored.
    out[-1].blocks[0] = TextBlock(text="edited")
    assert memory.get()[-1].blocks[0] == TextBlock(text="What is in this photo?")


def test_an_image_too_large_for_the_limit_is_refused_not_flattened(
    context_memory: ContextMemory,
) -> None:
    memory = memory_on(context_memory, token_limit=300)  # the photo alone costs more
    memory.put(photo_message())
    with pytest.raises(BudgetExceededError, match="query 435"):
        memory.get()


def test_a_message_given_as_input_is_counted_with_its_image(
    context_memory: ContextMemory, counter: TokenCounter
) -> None:
    memory = memory_on(context_memory, token_limit=1200)
    memory.put_messages([user("Hi"), assistant("Hello.")])
    question = photo_message()
    out = memory.get(input=question)  # a chat engine sends it after these itself
    context = memory.last_context
    assert context is not None
    assert billed(counter, [*out, question]) <= 1200
    sent_after = counter.count_message(
        "user", [{"type": "text", "text": "What is in this photo?"}, IMAGE_PART]
    )
    assert context.summary()["tokens_available"] == 1200 - sent_after


def test_a_block_ctxbudget_cannot_count_is_refused_naming_what_to_do(
    context_memory: ContextMemory,
) -> None:
    memory = memory_on(context_memory, token_limit=900)
    memory.put(
        ChatMessage(
            role=MessageRole.USER,
            blocks=[TextBlock(text="Listen:"), AudioBlock(audio=b"RIFF0000WAVE", format="wav")],
        )
    )
    with pytest.raises(InvalidItemError) as refused:
        memory.get()
    message = str(refused.value)
    assert "AudioBlock" in message and "current message" in message and "text" in message


def call_the_tool_once(messages: Sequence[ChatMessage]) -> ChatMessage:
    """The model's replies: a weather call, then (given its result) an answer."""
    if messages[-1].role is MessageRole.TOOL:
        return assistant("Sunny: the photo was taken on a good day.")
    call = ToolCallBlock(tool_call_id="c1", tool_name="get_weather", tool_kwargs={"city": "X"})
    return ChatMessage(role=MessageRole.ASSISTANT, blocks=[call])


@AGENT_WARNING
async def test_a_function_agent_sends_the_users_image_on_every_step(
    context_memory: ContextMemory, embedding: CtxBudgetEmbedding
) -> None:
    recorder = Recorder(call_the_tool_once)
    llm = MockFunctionCallingLLM(response_generator=recorder)
    Settings.llm, Settings.embed_model = llm, embedding
    memory = memory_on(context_memory, token_limit=1500)
    agent = FunctionAgent(tools=[weather_tool()], llm=llm)

    await agent.run(
        user_msg=photo_message("What is the weather where this was taken?"), memory=memory
    )

    assert len(recorder.prompts) == 2  # asked, then again after the tool call
    first, second = recorder.prompts
    assert images_of(first[-1]) == [PHOTO]
    # After the tool call the question is still sent, once, with its image, then the call.
    questions = [m for m in second if m.role is MessageRole.USER]
    assert len(questions) == 1 and images_of(questions[0]) == [PHOTO]
    assert [m.role for m in second[-2:]] == [MessageRole.ASSISTANT, MessageRole.TOOL]


# -- a retried question is stored once ---------------------------------------------------------
class FailingOnce(RecordingLLM):
    """A RecordingLLM whose first chat call fails (a timeout, a rate limit)."""

    failed: bool = False

    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        if not self.failed:
            self.failed = True
            raise ConnectionError("the provider timed out")
        return super().chat(messages, **kwargs)


def test_a_question_retried_after_a_failed_call_is_stored_and_sent_once(
    context_memory: ContextMemory,
) -> None:
    llm = FailingOnce(max_tokens=5)
    Settings.llm = llm
    memory = memory_on(context_memory, token_limit=600)
    engine = SimpleChatEngine.from_defaults(llm=llm, memory=memory)
    question = "Which train goes to Porto in the morning?"
    with pytest.raises(ConnectionError):
        engine.chat(question)

    engine.chat(question)  # the user tries again

    assert [(m.role, m.content) for m in memory.get_all()] == [
        (MessageRole.USER, question),
        (MessageRole.ASSISTANT, "text text text text text"),
    ]
    assert [m.content for m in llm.chat_prompts()[-1]].count(question) == 1


def test_a_retry_keeps_the_new_attempts_blocks(context_memory: ContextMemory) -> None:
    memory = memory_on(context_memory, token_limit=900)
    memory.put(photo_message())
    other = png(64, 64)
    memory.put(
        ChatMessage(
            role=MessageRole.USER,
            blocks=[TextBlock(text="What is in this photo?"), ImageBlock(image=other)],
        )
    )
    assert len(memory.get_all()) == 1
    assert images_of(memory.get()[-1]) == [other]


def test_the_same_words_after_a_reply_are_a_new_turn(context_memory: ContextMemory) -> None:
    memory = memory_on(context_memory, token_limit=600)
    memory.put(user("Yes."))
    memory.put(assistant("Shall I book it too?"))
    memory.put(user("Yes."))
    memory.put_messages([user("Yes."), assistant("Booked.")])  # a retry, then its reply
    assert [m.content for m in memory.get_all()] == [
        "Yes.",
        "Shall I book it too?",
        "Yes.",
        "Booked.",
    ]


def test_a_retry_through_another_memory_object_is_recognised(
    context_memory: ContextMemory,
) -> None:
    # A server builds a memory per request: the retry reaches a new object on the session.
    first = memory_on(context_memory, token_limit=600)
    first.put_messages([user("Hi"), assistant("Hello."), user("Book the 9:10 to Porto.")])
    again = memory_on(context_memory, token_limit=600, session_id=first.session_id)
    again.put(user("Book the 9:10 to Porto."))
    again.put(assistant("Booked."))
    assert [m.content for m in first.get_all()] == [
        "Hi",
        "Hello.",
        "Book the 9:10 to Porto.",
        "Booked.",
    ]


def test_two_memories_opened_on_one_folder_see_each_others_puts_at_once(tmp_path: Path) -> None:
    """One `CtxBudgetMemory.from_defaults(path=...)` per request opens a `ContextMemory` each:
    before 2026-12-01 a read waited only for its own object's background writes, so a retry
    through the second object, right after the first put, was stored twice, and its `get()`
    did not see the question."""
    from llama_index.ctxbudget import CtxBudgetMemory

    first = CtxBudgetMemory.from_defaults(token_limit=600, path=tmp_path, session_id="s1")
    second = CtxBudgetMemory.from_defaults(token_limit=600, path=tmp_path, session_id="s1")
    try:
        first.put(user("Book the 9:10 to Porto."))
        second.put(user("Book the 9:10 to Porto."))  # at once: the retry of a failed call
        second.put(assistant("Booked."))
        assert [m.content for m in first.get_all()] == ["Book the 9:10 to Porto.", "Booked."]
        first.put(user("And a seat by the window."))
        assert "And a seat by the window." in [m.content for m in second.get()]
    finally:
        first.close()
        second.close()


def test_an_empty_tool_result_reads_back_as_empty_text(context_memory: ContextMemory) -> None:
    """LlamaIndex's own memory gives ``""``; ``None`` (no block) is refused by OpenAI's API."""
    memory = memory_on(context_memory, token_limit=600)
    call = ChatMessage(
        role=MessageRole.ASSISTANT,
        blocks=[ToolCallBlock(tool_call_id="c", tool_name="ping", tool_kwargs={})],
    )
    done = ChatMessage(role=MessageRole.TOOL, content="", additional_kwargs={"tool_call_id": "c"})
    memory.put_messages([user("Ping it."), call, done])
    for read in (memory.get_all(), memory.get()):
        results = [m for m in read if m.role == MessageRole.TOOL]
        assert [m.content for m in results] == [""]
