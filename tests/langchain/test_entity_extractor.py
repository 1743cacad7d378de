"""`LLMEntityExtractor` with LangChain's fake chat model: what it sends, what it reads.

The model is the one fake (`lc_fakes.RecordingChatModel`); the memory behind it is real.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage
from lc_fakes import RecordingChatModel

from ctxbudget.errors import ConfigurationError
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.entities import Mention
from ctxbudget.memory.policy.config import MemoryConfig
from langchain_ctxbudget import DEFAULT_ENTITY_PROMPT, LLMEntityExtractor


def model(*replies: str) -> RecordingChatModel:
    return RecordingChatModel(messages=iter([AIMessage(r) for r in replies]))


def test_batches_are_numbered_with_their_speakers_and_replies_are_read() -> None:
    fake = model(
        'Here you go:\n{"message": 1, "name": "Caroline", "type": "person", '
        '"alias": "Ana\'s sister"}\nnot json\n{"message": 9, "name": "Nobody"}',
        '```\n{"message": 1, "name": "<b>Lisbon</b>", "type": "city"}\n```',
    )
    extractor = LLMEntityExtractor(fake, batch=2)
    found = extractor.extract(
        ["My sister Caroline called.", "Hi!", "We moved to Lisbon."],
        speakers=["Ana", None, "Ana"],
    )
    assert found == [
        [Mention("Caroline", "person", "Ana's sister")],
        [],
        [Mention("Lisbon", "other")],  # markup removed, an unknown type is "other"
    ]
    assert len(fake.calls) == 2
    sent = fake.calls[0][0][0].content
    assert "1. [Ana] My sister Caroline called.\n2. [unknown] Hi!" in sent
    assert sent.startswith(DEFAULT_ENTITY_PROMPT.split("{")[0][:40])


def test_blank_batches_are_not_sent_and_options_are_checked() -> None:
    fake = model()
    assert LLMEntityExtractor(fake).extract(["  ", ""], speakers=[None, None]) == [[], []]
    assert fake.calls == []
    with pytest.raises(ConfigurationError, match="messages"):
        LLMEntityExtractor(fake, prompt="List entities in {texts}")
    with pytest.raises(ConfigurationError, match="batch"):
        LLMEntityExtractor(fake, batch=0)


def test_context_memory_asks_the_model_once_per_message(tmp_path: Path, embedder: object) -> None:
    reply = (
        '{"message": 1, "name": "Caroline", "type": "person", "alias": "user\'s sister"}\n'
        '{"message": 3, "name": "Caroline", "type": "person"}'
    )
    fake = model(reply, reply)
    memory = ContextMemory(
        path=tmp_path / "chroma",
        embedder=embedder,
        config=MemoryConfig(entities=True),
        entity_extractor=LLMEntityExtractor(fake),
    )
    try:
        memory.add_messages(
            "s1",
            [
                ("user", "My sister Caroline is visiting."),
                ("assistant", "Lovely."),
                ("user", "Caroline works as a nurse now."),
            ],
        )
        first = memory.candidates("s1", "What does my sister do?", budget=2000)
        again = memory.candidates("s1", "Where is my sister?", budget=2000)
        assert len(fake.calls) == 1  # each message was asked about once
        for found in (first, again):
            cards = [it for it in found.entities if it.metadata.get("entity") == "Caroline"]
            assert cards and "user's sister" in cards[0].text
    finally:
        memory.close()
