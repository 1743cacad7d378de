"""Test helpers, independent of the adapter's own conversions: count what an LLM receives.

Also the small builders several test files share: messages, a memory on a fresh session, the
weather tool and a recorder of what a `MockFunctionCallingLLM` receives.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    MessageRole,
    TextBlock,
    ToolCallBlock,
)
from llama_index.core.bridge.pydantic import Field
from llama_index.core.llms import MockLLM
from llama_index.core.tools import FunctionTool

from ctxbudget import TokenCounter
from ctxbudget.memory.context import ContextMemory
from llama_index.ctxbudget import CtxBudgetMemory

# Constructing a FunctionAgent runs workflows' get_steps_from_instance, whose
# inspect.getmembers() reads every attribute of the agent (a pydantic model), deprecated ones
# included (`__fields__`, `__fields_set__`, `model_computed_fields`...): pydantic deprecation
# warnings attributed to the `inspect` module, and only those, are ignored.
AGENT_WARNING = pytest.mark.filterwarnings(
    "ignore::pydantic.warnings.PydanticDeprecationWarning:inspect"
)


def user(text: str) -> ChatMessage:
    return ChatMessage(role=MessageRole.USER, content=text)


def assistant(text: str) -> ChatMessage:
    return ChatMessage(role=MessageRole.ASSISTANT, content=text)


def memory_on(context_memory: ContextMemory, **options: Any) -> CtxBudgetMemory:
    """A CtxBudgetMemory on ``context_memory``, on a new session unless one is given."""
    options.setdefault("session_id", f"s-{uuid.uuid4().hex[:8]}")
    return CtxBudgetMemory.from_defaults(memory=context_memory, **options)


def weather_tool() -> FunctionTool:
    def get_weather(city: str) -> str:
        """Get today's weather forecast for a city."""
        return f"{city}: sunny spells, 21 degrees, light wind from the west, no rain expected."

    return FunctionTool.from_defaults(fn=get_weather)


class Recorder:
    """A MockFunctionCallingLLM response generator: keeps what the LLM receives, replies."""

    def __init__(self, reply: Callable[[Sequence[ChatMessage]], ChatMessage]) -> None:
        self.reply = reply
        self.prompts: list[list[ChatMessage]] = []

    def __call__(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        self.prompts.append([m.model_copy(deep=True) for m in messages])
        return self.reply(messages)


def openai_messages(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """The OpenAI chat messages an OpenAI-style LLM would send for these ChatMessages."""
    out: list[dict[str, Any]] = []
    for message in messages:
        text = "\n".join(b.text for b in message.blocks if isinstance(b, TextBlock))
        entry: dict[str, Any] = {"role": message.role.value, "content": text}
        calls = [b for b in message.blocks if isinstance(b, ToolCallBlock)]
        if calls:
            entry["tool_calls"] = [
                {
                    "id": call.tool_call_id,
                    "type": "function",
                    "function": {
                        "name": call.tool_name,
                        "arguments": call.tool_kwargs
                        if isinstance(call.tool_kwargs, str)
                        else json.dumps(call.tool_kwargs),
                    },
                }
                for call in calls
            ]
        for key in ("tool_call_id", "name"):
            if message.additional_kwargs.get(key):
                entry[key] = message.additional_kwargs[key]
        out.append(entry)
    return out


def prompt_tokens(counter: TokenCounter, messages: Sequence[ChatMessage]) -> int:
    """Prompt tokens of a chat request, as the provider bills them (gpt-4o's tokenizer)."""
    return counter.count_messages(openai_messages(messages))


def call_ids(message: ChatMessage) -> list[str]:
    return [b.tool_call_id or "" for b in message.blocks if isinstance(b, ToolCallBlock)]


def tool_call_problems(messages: Sequence[ChatMessage]) -> list[str]:
    """What an OpenAI-style API would reject: history starting with a tool result, a tool
    result whose call is not before it, or a call whose result is missing."""
    problems: list[str] = []
    conversation = [m for m in messages if m.role.value != "system"]
    if conversation and conversation[0].role.value == "tool":
        problems.append("history starts with a tool result")
    open_calls: set[str] = set()
    for index, message in enumerate(conversation):
        if message.role.value == "assistant":
            if open_calls:
                problems.append(f"message {index}: calls {sorted(open_calls)} got no result")
            open_calls = set(call_ids(message))
        elif message.role.value == "tool":
            call_id = message.additional_kwargs.get("tool_call_id")
            if call_id not in open_calls:
                problems.append(f"message {index}: orphan tool result for {call_id!r}")
            open_calls.discard(call_id)
        elif open_calls:
            problems.append(f"message {index}: calls {sorted(open_calls)} got no result")
            open_calls = set()
    if open_calls:
        problems.append(f"calls {sorted(open_calls)} got no result")
    return problems


class RecordingLLM(MockLLM):
    """LlamaIndex's MockLLM that records every prompt it receives (a str or chat messages).

    Replies are ``max_tokens`` words ("text text ..."), as MockLLM's are.
    """

    prompts: list[str | list[ChatMessage]] = Field(default_factory=list, exclude=True)

    def _reply(self) -> str:
        return " ".join(["text"] * (self.max_tokens or 8))

    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        self.prompts.append([m.model_copy(deep=True) for m in messages])
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=self._reply()))

    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return self.chat(messages, **kwargs)

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.prompts.append(prompt)
        return CompletionResponse(text=self._reply())

    async def acomplete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponse:
        return self.complete(prompt, formatted, **kwargs)

    def chat_prompts(self) -> list[list[ChatMessage]]:
        return [p for p in self.prompts if isinstance(p, list)]

    def text_prompts(self) -> list[str]:
        return [p for p in self.prompts if isinstance(p, str)]
