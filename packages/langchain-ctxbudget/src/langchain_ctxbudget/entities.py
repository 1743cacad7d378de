"""`LLMEntityExtractor`: a ctxbudget entity extractor backed by any LangChain chat model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.runnables import Runnable

from ctxbudget.memory.entities.names import Mention
from ctxbudget.memory.entities.prompt import (
    DEFAULT_ENTITY_PROMPT,
    ask_in_batches,
    check_entity_batch,
    check_entity_prompt,
)
from langchain_ctxbudget.summarizers import reply_text

__all__ = ["DEFAULT_ENTITY_PROMPT", "LLMEntityExtractor"]


class LLMEntityExtractor:
    """An entity extractor (`ctxbudget.memory.entities.EntityExtractor`) that asks a chat model.

    For ``ContextMemory(entity_extractor=...)`` with ``MemoryConfig(entities=True)``: the
    messages of a session are sent ``batch`` at a time (numbered, with their speakers) in one
    human message, the prompt with ``{messages}`` filled in (default `DEFAULT_ENTITY_PROMPT`);
    the reply is read by `ctxbudget.memory.entities.prompt.parse_entity_reply` (one JSON object
    per line; anything else is skipped). ``ContextMemory`` asks about each text once and
    remembers the answer. The LlamaIndex adapter has the same class, with the same options.

    A model error is raised to the caller of the assembly: entities are never silently lost.

    Args:
        model: any chat model (or a Runnable taking messages and returning a message).
        prompt: the prompt template, with a ``{messages}`` field.
        batch: messages per model call.

    Raises:
        ConfigurationError: a prompt without ``{messages}`` (or with another field), a batch
            that is not a positive int.

    >>> from langchain_core.language_models import FakeListChatModel
    >>> reply = '{"message": 1, "name": "Lisbon", "type": "place"}'
    >>> extractor = LLMEntityExtractor(FakeListChatModel(responses=[reply]))
    >>> (mentions,) = extractor.extract(["We moved to Lisbon."], speakers=["Ana"])
    >>> mentions[0].name
    'Lisbon'
    """

    def __init__(
        self,
        model: BaseChatModel | Runnable[list[BaseMessage], Any],
        *,
        prompt: str = DEFAULT_ENTITY_PROMPT,
        batch: int = 20,
    ) -> None:
        self.model = model
        self.prompt = check_entity_prompt(prompt, "LLMEntityExtractor")
        self.batch = check_entity_batch(batch, "LLMEntityExtractor")

    def _ask(self, text: str) -> str:
        return reply_text(self.model.invoke([HumanMessage(text)]), "LLMEntityExtractor")

    def extract(
        self, texts: Sequence[str], *, speakers: Sequence[str | None]
    ) -> list[list[Mention]]:
        """The mentions of each text, in order (one model call per ``batch`` texts)."""
        return ask_in_batches(self._ask, texts, speakers, prompt=self.prompt, batch=self.batch)
