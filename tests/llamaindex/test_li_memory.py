"""CtxBudgetMemory on its own: what get returns fits, keeps the right things, and round-trips."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock, ToolCallBlock
from llama_index.core.memory import StaticMemoryBlock

from ctxbudget import BudgetExceededError, InvalidBudgetError, InvalidItemError, Tier, TokenCounter
from ctxbudget.errors import UnknownModelError
from ctxbudget.memory.context import ContextMemory
from llama_index.ctxbudget import CtxBudgetEmbedding, CtxBudgetMemory, block_tier

from .helpers import assistant, memory_on, prompt_tokens, tool_call_problems, user


def tool_call(call_id: str, name: str = "weather", **kwargs: Any) -> ChatMessage:
    return ChatMessage(
        role=MessageRole.ASSISTANT,
        blocks=[ToolCallBlock(tool_call_id=call_id, tool_name=name, tool_kwargs=kwargs)],
    )


def tool_result(call_id: str, text: str) -> ChatMessage:
    return ChatMessage(
        role=MessageRole.TOOL, content=text, additional_kwargs={"tool_call_id": call_id}
    )


def conversation(turns: int, *, words: int = 30) -> list[ChatMessage]:
    filler = " ".join(["we also talked about the weather and the trams"] * (words // 8 + 1))
    messages: list[ChatMessage] = []
    for i in range(turns):
        messages.append(user(f"Question {i}: what about item {i}? {filler}"))
        messages.append(assistant(f"Answer {i}: item {i} is fine. {filler}"))
    return messages


def test_get_returns_the_conversation_with_the_pending_message_last(
    context_memory: ContextMemory, counter: TokenCounter
) -> None:
    memory = memory_on(context_memory, token_limit=500)
    memory.put(user("Hi, I am planning a trip to Lisbon."))
    memory.put(assistant("Lovely! When are you going?"))
    memory.put(user("In May, for a week."))

    out = memory.get()

    assert [(m.role.value, m.content) for m in out] == [
        ("user", "Hi, I am planning a trip to Lisbon."),
        ("assistant", "Lovely! When are you going?"),
        ("user", "In May, for a week."),
    ]
    # Exactly what was counted is what is returned.
    assert memory.last_context is not None
    assert prompt_tokens(counter, out) == memory.last_context.tokens_used


def test_get_fits_the_token_limit_and_keeps_the_newest_turns(
    context_memory: ContextMemory, counter: TokenCounter
) -> None:
    memory = memory_on(context_memory, token_limit=400)
    memory.put_messages(conversation(25))
    memory.put(user("And what about item 99?"))

    out = memory.get()

    assert prompt_tokens(counter, out) <= 400
    texts = [m.content or "" for m in out]
    assert texts[-1] == "And what about item 99?"
    assert any(t.startswith("Answer 24:") for t in texts)  # the newest exchange is kept
    assert not any(t.startswith("Question 0:") for t in texts)  # the oldest had to go
    assert len(memory.get_all()) == 51  # nothing was forgotten in the store


def test_a_system_message_is_the_top_tier_and_never_cut(
    context_memory: ContextMemory, counter: TokenCounter
) -> None:
    memory = memory_on(context_memory, token_limit=200)
    memory.put(ChatMessage(role=MessageRole.SYSTEM, content="You are Ada's travel agent."))
    memory.put_messages(conversation(20))
    memory.put(ChatMessage(role=MessageRole.SYSTEM, content="You are Ada's travel agent."))
    memory.put(user("Book it."))

    out = memory.get()

    assert out[0].role is MessageRole.SYSTEM
    assert (out[0].content or "").startswith("You are Ada's travel agent.")
    assert sum("travel agent" in (m.content or "") for m in out) == 1  # stored once, shown once
    assert prompt_tokens(counter, out) <= 200
    assert memory.get_all()[0].content == "You are Ada's travel agent."
    assert [m.role for m in memory.get_all()].count(MessageRole.SYSTEM) == 1


def test_a_system_prompt_that_cannot_fit_is_an_error_not_an_overflow(
    context_memory: ContextMemory,
) -> None:
    memory = memory_on(context_memory, token_limit=40, system_prompt="Be precise. " * 60)
    memory.put(user("Hello"))
    with pytest.raises(BudgetExceededError, match="never pruned"):
        memory.get()


def test_an_input_that_is_not_stored_is_left_for_the_caller_with_its_room_kept(
    context_memory: ContextMemory, counter: TokenCounter
) -> None:
    # CondensePlusContextChatEngine asks get(input=message) and sends the message itself.
    memory = memory_on(context_memory, token_limit=300)
    memory.put_messages(conversation(15))
    question = "Please summarize everything we said about item 3 and item 7 so far."

    out = memory.get(input=question)

    assert out[-1].role is MessageRole.ASSISTANT
    assert all(m.content != question for m in out)
    assert prompt_tokens(counter, [*out, user(question)]) <= 300


def test_an_input_that_is_the_stored_last_message_is_returned_last(
    context_memory: ContextMemory,
) -> None:
    # FunctionAgent puts the user message and asks get(); after its tool calls (kept outside
    # the memory until the turn ends) it asks get(input=that message).
    memory = memory_on(context_memory, token_limit=300)
    memory.put_messages(conversation(3))
    memory.put(user("What is next?"))
    assert memory.get()[-1].content == "What is next?"
    out = memory.get(input="What is next?")
    assert out[-1].content == "What is next?"
    assert [m.content for m in out].count("What is next?") == 1


def test_initial_token_count_leaves_room_for_the_prefix_messages(
    context_memory: ContextMemory, counter: TokenCounter
) -> None:
    memory = memory_on(context_memory, token_limit=300)
    memory.put_messages(conversation(15))
    memory.put(user("Next?"))
    prefix = [ChatMessage(role=MessageRole.SYSTEM, content="You are a careful assistant. " * 8)]
    # What SimpleChatEngine computes when the memory has a tokenizer_fn.
    initial = len(memory.tokenizer_fn(" ".join(m.content or "" for m in prefix)))

    out = memory.get(initial_token_count=initial)

    assert prompt_tokens(counter, [*prefix, *out]) <= 300
    one_exchange = prompt_tokens(counter, conversation(1)) - 3
    assert prompt_tokens(counter, out) > 300 - initial - one_exchange  # the room was used
    with pytest.raises(InvalidBudgetError, match="initial_token_count 300"):
        memory.get(initial_token_count=300)


def test_old_turns_come_back_by_meaning(context_memory: ContextMemory) -> None:
    memory = memory_on(context_memory, token_limit=700)
    memory.put(user("My sister Lena moved to Porto last spring."))
    memory.put(assistant("Good to know, Porto is lovely."))
    memory.put_messages(conversation(40, words=16))
    memory.put(user("Where does my sister live now?"))

    out = memory.get()

    history = [m.content or "" for m in out if m.role is not MessageRole.SYSTEM]
    assert not any("Lena" in t for t in history)  # far outside the recent window
    context = "\n".join(m.content or "" for m in out if m.role is MessageRole.SYSTEM)
    assert "Lena moved to Porto" in context
    assert memory.last_context is not None
    assert any(
        it.text.startswith("My sister Lena") and it.tier == Tier.RETRIEVED
        for it in memory.last_context.included
    )


def test_pinned_facts_survive_a_long_history_set_and_reset(
    context_memory: ContextMemory, counter: TokenCounter
) -> None:
    memory = memory_on(context_memory, token_limit=250)
    fact = memory.pin("Ada is allergic to peanuts.")
    memory.put_messages(conversation(30))
    memory.put(user("Suggest a snack."))
    out = memory.get()
    assert "allergic to peanuts" in (out[0].content or "")
    assert prompt_tokens(counter, out) <= 250

    memory.set([user("A new start."), assistant("Sure.")])
    assert [m.content for m in memory.get_all()] == ["A new start.", "Sure."]
    memory.reset()
    assert memory.get_all() == []
    assert "allergic to peanuts" in (memory.get()[0].content or "")
    assert memory.unpin(fact)
    assert memory.get() == []


def test_set_checks_every_message_before_forgetting_anything(
    context_memory: ContextMemory,
) -> None:
    memory = memory_on(context_memory, token_limit=250)
    memory.put_messages([user("keep me"), assistant("kept")])
    broken = ChatMessage(
        role=MessageRole.ASSISTANT,
        content="calling",
        additional_kwargs={"tool_calls": [{"id": "c1", "function": {"arguments": "{}"}}]},
    )
    with pytest.raises(InvalidItemError, match="no tool name"):
        memory.set([user("new"), broken])
    assert [m.content for m in memory.get_all()] == ["keep me", "kept"]


def test_tool_calls_round_trip_and_are_never_split_from_their_results(
    context_memory: ContextMemory, counter: TokenCounter
) -> None:
    memory = memory_on(context_memory, token_limit=2000)
    messages: list[ChatMessage] = []
    for i in range(12):
        messages += [
            user(f"What is the weather in city {i}?"),
            tool_call(f"call-{i}", city=f"city {i}"),
            tool_result(f"call-{i}", f"City {i}: sunny, {20 + i} degrees, light wind. " * 3),
            assistant(f"It is sunny in city {i}."),
        ]
    memory.put_messages(messages)

    stored = memory.get_all()
    assert len(stored) == len(messages)
    assert stored[1].blocks == messages[1].blocks
    assert stored[1].content is None  # no "(tool call)" placeholder comes back
    assert stored[2].additional_kwargs == {"tool_call_id": "call-0"}

    for limit in range(60, 700, 23):
        memory.token_limit = limit
        out = memory.get(input="and tomorrow?")
        assert tool_call_problems(out) == [], limit
        assert prompt_tokens(counter, [*out, user("and tomorrow?")]) <= limit
    out = memory.get()
    calls = [m for m in out if any(isinstance(b, ToolCallBlock) for b in m.blocks)]
    assert calls
    assert calls[-1].blocks[-1] == ToolCallBlock(
        tool_call_id="call-11", tool_name="weather", tool_kwargs={"city": "city 11"}
    )


def test_the_memory_persists_across_instances(
    tmp_path: Path, embedding: CtxBudgetEmbedding
) -> None:
    path = tmp_path / "store"
    with CtxBudgetMemory.from_defaults(
        token_limit=500, path=path, session_id="chat-1", embedder=embedding
    ) as first:
        first.put_messages([user("Remember the blue door."), assistant("Blue door, noted.")])
        first.put(ChatMessage(role=MessageRole.SYSTEM, content="Be brief."))
        first.pin("The door code is 4711.")
    with CtxBudgetMemory.from_defaults(
        token_limit=500, path=path, session_id="chat-1", embedder=embedding
    ) as second:
        assert [m.content for m in second.get_all()] == [
            "Be brief.",
            "Remember the blue door.",
            "Blue door, noted.",
        ]
        second.put(user("What is the door code?"))
        assert "4711" in (second.get()[0].content or "")


async def test_async_methods_match_the_sync_ones(
    context_memory: ContextMemory, counter: TokenCounter
) -> None:
    memory = memory_on(context_memory, token_limit=300)
    await memory.aput(ChatMessage(role=MessageRole.SYSTEM, content="Answer in French."))
    await memory.aput_messages(conversation(10))
    await memory.aput(user("Et maintenant ?"))
    out = await memory.aget()
    assert out == memory.get()
    assert prompt_tokens(counter, out) <= 300
    assert len(await memory.aget_all()) == 22
    await memory.aset([user("only this")])  # replaces the conversation; the system prompt stays
    assert [m.content for m in await memory.aget_all()] == ["Answer in French.", "only this"]
    await memory.areset()
    assert await memory.aget_all() == []


def test_memory_blocks_become_tiers_in_priority_order(
    context_memory: ContextMemory, counter: TokenCounter
) -> None:
    core = StaticMemoryBlock(name="core", static_content="The user is Ada.", priority=0)
    high = StaticMemoryBlock(
        name="high", static_content="Ada is allergic to peanuts. Ada is vegan.", priority=1
    )
    low = StaticMemoryBlock(
        name="low", static_content="The office plant is a fern. " * 30, priority=2
    )
    memory = memory_on(context_memory, token_limit=110, memory_blocks=[low, high, core])
    memory.put(user("What should I cook?"))

    out = memory.get()

    text = "\n".join(m.content or "" for m in out)
    assert "The user is Ada." in text
    assert "allergic to peanuts. Ada is vegan." in text
    assert text.count("fern") < 30  # the lowest priority gets only what is left, if anything
    assert prompt_tokens(counter, out) <= 110
    assert block_tier(core) == Tier.PINNED
    assert block_tier(high) == Tier.PINNED + 1
    assert block_tier(low, {"low": Tier.RETRIEVED}) == Tier.RETRIEVED


def test_priority_zero_blocks_are_never_cut(context_memory: ContextMemory) -> None:
    core = StaticMemoryBlock(name="core", static_content="Rule: always cite sources. " * 40)
    memory = memory_on(context_memory, token_limit=100, memory_blocks=[core])
    memory.put(user("hi"))
    with pytest.raises(BudgetExceededError):
        memory.get()


def test_block_tiers_and_chat_message_blocks(context_memory: ContextMemory) -> None:
    class Recalled(StaticMemoryBlock):
        async def _aget(self, messages: Any = None, **kwargs: Any) -> Any:
            assert messages is not None and messages[-1].content == "Who am I?"
            return [assistant("You told me you are Ada."), user("Right.")]

    block = Recalled(name="recalled", static_content="unused", priority=3)
    memory = memory_on(context_memory, token_limit=400, memory_blocks=[block])
    memory.put(user("Who am I?"))
    memory.get()
    assert memory.last_context is not None
    kept = {it.id: it for it in memory.last_context.included}
    assert kept["block:recalled:0"].tier == Tier.PINNED + 3
    assert kept["block:recalled:0"].role == "assistant"

    with pytest.raises(InvalidItemError, match="RECENT"):
        memory_on(context_memory, token_limit=100, block_tiers={"x": Tier.RECENT})


def test_from_defaults_checks_its_arguments(context_memory: ContextMemory, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="either memory= or path"):
        CtxBudgetMemory.from_defaults(memory=context_memory, path=tmp_path, token_limit=10)
    with pytest.raises(InvalidBudgetError, match="token_limit"):
        memory_on(context_memory, token_limit=0)
    with pytest.raises(UnknownModelError):
        memory_on(context_memory, token_limit=100, model="no-such-model")
    default = memory_on(context_memory)
    assert default.token_limit == 128_000 - 4096  # gpt-4o's window minus its reply reserve


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    turns=st.lists(
        st.tuples(
            st.text(
                st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=80
            ),
            st.integers(min_value=0, max_value=2),  # tool calls made in the turn
            st.text(min_size=1, max_size=60),
        ),
        min_size=1,
        max_size=8,
    ),
    limit=st.integers(min_value=40, max_value=600),
)
def test_property_output_fits_and_tool_results_are_never_orphaned(
    context_memory: ContextMemory,
    counter: TokenCounter,
    turns: list[tuple[str, int, str]],
    limit: int,
) -> None:
    memory = memory_on(context_memory, token_limit=limit)
    messages: list[ChatMessage] = []
    for index, (question, calls, answer) in enumerate(turns):
        messages.append(user(question if question.strip() else "?"))
        for call in range(calls):
            call_id = f"c{index}-{call}"
            messages += [tool_call(call_id, q=question[:10]), tool_result(call_id, answer)]
        messages.append(assistant(answer if answer.strip() else "ok"))
    memory.put_messages(messages)
    memory.put(user("And now?"))
    out = memory.get()
    assert prompt_tokens(counter, out) <= limit
    assert tool_call_problems(out) == []
    assert out[-1].content == "And now?"
    assert all(isinstance(b, TextBlock | ToolCallBlock) for m in out for b in m.blocks)


async def test_sync_get_with_blocks_inside_a_running_event_loop(
    context_memory: ContextMemory,
) -> None:
    # A sync chat engine called from async code (or a notebook): blocks are awaited elsewhere.
    core = StaticMemoryBlock(name="core", static_content="The user is Ada.")
    memory = memory_on(context_memory, token_limit=200, memory_blocks=[core])
    memory.put(user("Hello"))
    out = memory.get()
    assert "The user is Ada." in (out[0].content or "")
    assert out == await memory.aget()
    assert memory.to_dict()["memory_blocks"] == ["core"]  # names only: blocks are live objects


def test_every_get_is_in_the_inclusion_log(context_memory: ContextMemory) -> None:
    memory = memory_on(context_memory, session_id="li-logged")
    memory.put(user("Hi, I am planning a trip to Lisbon."))
    memory.put(assistant("Lovely! When are you going?"))
    memory.put(user("In May, for a week."))
    memory.get()
    context_memory.flush()
    records = context_memory.contexts("li-logged")
    assert len(records) == 1
    last = context_memory.previous_contexts.get("li-logged")
    assert last is not None
    assert [entry.id for entry in records[0].included] == last.included_ids
