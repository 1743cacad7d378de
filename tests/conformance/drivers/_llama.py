"""What the LlamaIndex drivers share: explicit settings and an LLM that records its prompts."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from llama_index.core import Settings
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    MessageRole,
)
from llama_index.core.bridge.pydantic import Field
from llama_index.core.llms import MockLLM

from llama_index.ctxbudget import CtxBudgetEmbedding

__all__ = ["RecordingLLM", "openai_form", "use_settings"]


class RecordingLLM(MockLLM):
    """LlamaIndex's MockLLM keeping a copy of every chat prompt it receives."""

    prompts: list[list[ChatMessage]] = Field(default_factory=list, exclude=True)

    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        self.prompts.append([m.model_copy(deep=True) for m in messages])
        # Each reply is its own text: stored, it is found exactly where it is sent again.
        reply = f"noted r{uuid.uuid4().hex[:10]}"
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=reply))

    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return self.chat(messages, **kwargs)

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text="Noted.")


def use_settings(embedder: object) -> None:
    """LlamaIndex's global settings, explicit (its defaults are OpenAI's, offline here)."""
    Settings.llm = MockLLM()
    Settings.embed_model = CtxBudgetEmbedding(embedder)


def openai_form(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """Text chat messages as an OpenAI-style LLM sends them (role and content)."""
    return [{"role": m.role.value, "content": m.content or ""} for m in messages]
