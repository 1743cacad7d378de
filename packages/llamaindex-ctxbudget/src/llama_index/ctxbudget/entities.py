"""`LLMEntityExtractor`: a ctxbudget entity extractor backed by any LlamaIndex LLM."""

from __future__ import annotations

from collections.abc import Sequence

from llama_index.core.llms.llm import LLM

from ctxbudget.errors import ConfigurationTypeError
from ctxbudget.memory.entities.names import Mention
from ctxbudget.memory.entities.prompt import (
    DEFAULT_ENTITY_PROMPT,
    ask_in_batches,
    check_entity_batch,
    check_entity_prompt,
)

__all__ = ["DEFAULT_ENTITY_PROMPT", "LLMEntityExtractor"]


class LLMEntityExtractor:
    r"""An entity extractor (`ctxbudget.memory.entities.EntityExtractor`) that asks an LLM.

    For ``ContextMemory(entity_extractor=...)`` with ``MemoryConfig(entities=True)`` (also the
    memory behind `CtxBudgetMemory`): the messages of a session are sent ``batch`` at a time
    (numbered, with their speakers) as one completion prompt, ``{messages}`` filled in (default
    `DEFAULT_ENTITY_PROMPT`); the reply is read by
    `ctxbudget.memory.entities.prompt.parse_entity_reply` (one JSON object per line). The
    LangChain adapter has the same class, with the same options.

    A model error is raised to the caller of the assembly: entities are never silently lost.

    Args:
        llm: any LlamaIndex LLM.
        prompt: the prompt template, with a ``{messages}`` field.
        batch: messages per model call.

    Raises:
        ConfigurationError: a prompt without ``{messages}`` (or with another field), a batch
            that is not a positive int.
        ConfigurationTypeError: ``llm`` is not a LlamaIndex LLM.

    >>> from llama_index.core.llms import MockLLM
    >>> echo = '{{"message": 1, "name": "Lisbon", "type": "place"}}\n{messages}'
    >>> extractor = LLMEntityExtractor(MockLLM(), prompt=echo)  # MockLLM repeats the prompt
    >>> (mentions,) = extractor.extract(["We moved."], speakers=["Ana"])
    >>> mentions[0].name
    'Lisbon'
    """

    def __init__(self, llm: LLM, *, prompt: str = DEFAULT_ENTITY_PROMPT, batch: int = 20) -> None:
        if not callable(getattr(llm, "complete", None)):  # refused here, not on first extraction
            msg = (
                f"LLMEntityExtractor needs a LlamaIndex LLM (with .complete), got "
                f"{type(llm).__name__}; pass e.g. OpenAI(model='gpt-4o-mini') or Settings.llm"
            )
            raise ConfigurationTypeError(msg)
        self.llm = llm
        self.prompt = check_entity_prompt(prompt, "LLMEntityExtractor")
        self.batch = check_entity_batch(batch, "LLMEntityExtractor")

    def _ask(self, text: str) -> str:
        return self.llm.complete(text).text

    def extract(
        self, texts: Sequence[str], *, speakers: Sequence[str | None]
    ) -> list[list[Mention]]:
        """The mentions of each text, in order (one model call per ``batch`` texts)."""
        return ask_in_batches(self._ask, texts, speakers, prompt=self.prompt, batch=self.batch)
