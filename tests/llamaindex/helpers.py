"""Test helpers, independent of the adapter's own conversions: count what an LLM receives."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

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

from ctxbudget import TokenCounter


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
