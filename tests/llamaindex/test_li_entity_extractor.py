"""`LLMEntityExtractor` with LlamaIndex's `MockLLM` (it answers with the prompt it is sent)."""

from __future__ import annotations

import pytest
from llama_index.core.llms import MockLLM

from ctxbudget.errors import ConfigurationError
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.entities import Mention
from ctxbudget.memory.policy.config import MemoryConfig
from llama_index.ctxbudget import DEFAULT_ENTITY_PROMPT, LLMEntityExtractor

# MockLLM repeats its prompt: a prompt that is itself a reply tests what is sent and read.
ECHO = '{{"message": 2, "name": "Lisbon", "type": "place"}}\n{messages}'


def test_the_reply_is_read_per_message_and_the_prompt_numbers_them() -> None:
    extractor = LLMEntityExtractor(MockLLM(), prompt=ECHO, batch=2)
    found = extractor.extract(["Hi.", "We moved.", "Bye."], speakers=["Ana", "Ana", None])
    assert found == [[], [Mention("Lisbon", "place")], []]
    default = LLMEntityExtractor(MockLLM())  # the default prompt's example is not a mention
    assert default.extract(["Caroline called."], speakers=["Ana"]) == [[]]
    assert "{messages}" in DEFAULT_ENTITY_PROMPT
    with pytest.raises(ConfigurationError, match="messages"):
        LLMEntityExtractor(MockLLM(), prompt="no field")


def test_context_memory_uses_it(context_memory: ContextMemory) -> None:
    memory = ContextMemory(
        store=context_memory.store,
        config=MemoryConfig(entities=True),
        entity_extractor=LLMEntityExtractor(MockLLM(), prompt=ECHO),
    )
    memory.add_messages("s1", [("user", "Hello there."), ("assistant", "We moved, you know.")])
    found = memory.candidates("s1", "Tell me about Lisbon", budget=2000)
    assert [it.metadata["entity"] for it in found.entities] == ["Lisbon"]
    assert found.entities[0].metadata["type"] == "place"
