"""A group chat's speakers, gathered async calls and concurrent system messages (2026-12-02).

- The question a ``get()`` answers is sent with its speaker's ``name``, as history is.
- The same words said by another speaker are that speaker's turn, not a retry of the last one.
- ``aput`` calls gathered on one loop store in the order they were called (as LlamaIndex's own
  ``ChatMemoryBuffer`` does), and an ``aget_all`` called after them reads them all.
- Two system messages put at once (two tasks, two memory objects on one folder) are both
  stored, in some order, and neither caller sees an error.
- ``additional_kwargs["tool_calls"]`` that is not a list is refused, and nothing is stored.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.llms import MockLLM
from llama_index.core.memory import ChatMemoryBuffer

from ctxbudget.errors import InvalidItemError
from ctxbudget.memory.context import ContextMemory
from llama_index.ctxbudget import CtxBudgetEmbedding, CtxBudgetMemory


def said(role: str, text: str, name: str | None = None) -> ChatMessage:
    kwargs = {"name": name} if name else {}
    return ChatMessage(role=role, content=text, additional_kwargs=kwargs)


def speakers(messages: list[ChatMessage]) -> list[tuple[str, str, str | None]]:
    return [(m.role.value, m.content or "", m.additional_kwargs.get("name")) for m in messages]


def test_the_question_is_sent_with_its_speaker(context_memory: ContextMemory) -> None:
    memory = CtxBudgetMemory(memory=context_memory, session_id="room", token_limit=2000)
    memory.put(said("user", "Hi, I am Bob.", "bob"))
    memory.put(said("assistant", "Hello Bob!"))
    memory.put(said("user", "What's my name?", "bob"))
    sent: list[list[ChatMessage]] = []

    class Recording(MockLLM):
        def chat(self, messages: list[ChatMessage], **kwargs: object) -> object:  # type: ignore[override]
            sent.append(list(messages))
            return super().chat(messages, **kwargs)

    Recording().chat(memory.get())
    assert speakers(sent[-1]) == [
        ("user", "Hi, I am Bob.", "bob"),
        ("assistant", "Hello Bob!", None),
        ("user", "What's my name?", "bob"),
    ]
    assert memory.last_context is not None
    assert memory.last_context.to_messages()[-1].get("name") == "bob"  # the report: the same


def test_the_same_words_by_another_speaker_are_their_turn(context_memory: ContextMemory) -> None:
    memory = CtxBudgetMemory(memory=context_memory, session_id="room", token_limit=2000)
    buffer = ChatMemoryBuffer.from_defaults(token_limit=2000)
    turns = [
        said("user", "Pizza tonight?", "alice"),
        said("user", "yes", "bob"),
        said("user", "yes", "carol"),
    ]
    for turn in turns:
        memory.put(turn)
        buffer.put(turn)
    assert speakers(memory.get_all()) == speakers(buffer.get_all())
    memory.put(said("user", "yes", "carol"))  # the same speaker again, nothing between: a retry
    assert speakers(memory.get_all()) == speakers(buffer.get_all())


def test_gathered_puts_store_in_call_order(context_memory: ContextMemory) -> None:
    memory = CtxBudgetMemory(memory=context_memory, session_id="s", token_limit=2000)
    turns = [said("user" if i % 2 == 0 else "assistant", f"message {i}") for i in range(8)]

    async def main() -> list[str]:
        puts = [asyncio.create_task(memory.aput(turn)) for turn in turns]
        read = asyncio.create_task(memory.aget_all())  # called after them: reads them all
        await asyncio.gather(*puts)
        return [m.content or "" for m in await read]

    assert asyncio.run(main()) == [f"message {i}" for i in range(8)]
    assert [m.content for m in memory.get_all()] == [f"message {i}" for i in range(8)]


def test_system_messages_put_at_once_are_all_stored(
    tmp_path: Path, embedding: CtxBudgetEmbedding
) -> None:
    folder = tmp_path / "m"
    first = ContextMemory(folder, embedder=embedding)
    second = ContextMemory(folder, embedder=embedding)
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def put(context: ContextMemory, text: str) -> None:
        memory = CtxBudgetMemory(memory=context, session_id="s", token_limit=2000)
        start.wait()
        try:
            memory.put(said("system", text))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    for _ in range(3):
        errors.clear()
        texts = [f"Rule {n} from writer {w}." for n, w in ((_, 0), (_, 1))]
        threads = [
            threading.Thread(target=put, args=(ctx, text))
            for ctx, text in zip((first, second), texts, strict=True)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors, errors
    reader = CtxBudgetMemory(memory=first, session_id="s", token_limit=2000)
    systems = [m.content for m in reader.get_all() if m.role == MessageRole.SYSTEM]
    assert sorted(systems) == sorted(f"Rule {n} from writer {w}." for n in range(3) for w in (0, 1))
    second.close()
    first.close()


def test_tool_calls_that_are_not_a_list_are_refused(context_memory: ContextMemory) -> None:
    memory = CtxBudgetMemory(memory=context_memory, session_id="s", token_limit=2000)
    memory.put(said("user", "Weather in Lisbon?"))
    call = {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
    asking = ChatMessage(role="assistant", content="", additional_kwargs={"tool_calls": call})
    with pytest.raises(InvalidItemError, match=r"tool_calls'\] must be a list.*single call"):
        memory.put(asking)
    assert [m.content for m in memory.get_all()] == ["Weather in Lisbon?"]
