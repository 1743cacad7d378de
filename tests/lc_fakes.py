"""The one LLM fake of the LangChain tests (adapter and reliability suites): a LangChain fake chat
model that records what it was sent."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field


class RecordingChatModel(GenericFakeChatModel):
    """`GenericFakeChatModel` that records the messages and tool schemas of every call."""

    calls: list[tuple[list[BaseMessage], list[dict[str, Any]]]] = Field(default_factory=list)

    def bind_tools(  # type: ignore[override]
        self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any
    ) -> Runnable[Any, Any]:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.calls.append((list(messages), list(kwargs.get("tools") or [])))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)
