"""CtxBudgetMemory inside LlamaIndex's chat engines and agents, against a 2,048-token window.

Every prompt the (fake) LLM receives is counted with gpt-4o's tokenizer as the provider bills it
(messages, their overhead, tool calls and, for agents, the tool schemas): it must fit the window
minus the reply reserve, for 200 turns, with a fact pinned at turn 1 still there at turn 200 and
no tool result ever sent without its call.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.agent.workflow import AgentWorkflow, FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.chat_engine import CondensePlusContextChatEngine, SimpleChatEngine
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.tools import BaseTool

from ctxbudget import TokenCounter
from ctxbudget.memory.context import ContextMemory
from llama_index.ctxbudget import CtxBudgetEmbedding, CtxBudgetMemory, CtxBudgetNodePostprocessor

from .helpers import (
    AGENT_WARNING,
    RecordingLLM,
    prompt_tokens,
    tool_call_problems,
    weather_tool,
)

WINDOW = 2048
REPLY = 256  # kept free for the model's answer
FACT = "The user is allergic to peanuts and cooks for two."
CITIES = ["Lisbon", "Porto", "Madrid", "Seville", "Paris", "Lyon", "Rome", "Turin"]


def user_turn(turn: int) -> str:
    return (
        f"Turn {turn}: I have {turn % 7 + 1} tomatoes, basil and {CITIES[turn % 8]} cheese. "
        f"What could I cook tonight in under {10 + turn % 30} minutes?"
    )


def system_text(messages: Sequence[ChatMessage]) -> str:
    return "\n".join(m.content or "" for m in messages if m.role is MessageRole.SYSTEM)


def tool_schema_tokens(counter: TokenCounter, tools: Sequence[BaseTool]) -> int:
    """The tool schemas a function-calling request carries (OpenAI's JSON), as tokens."""
    return sum(counter.count(json.dumps(t.metadata.to_openai_tool())) for t in tools)


@pytest.mark.slow
def test_simple_chat_engine_200_turns_in_a_2048_window(
    context_memory: ContextMemory, counter: TokenCounter
) -> None:
    llm = RecordingLLM(max_tokens=60)
    memory = CtxBudgetMemory.from_defaults(
        memory=context_memory, session_id="chat", token_limit=WINDOW - REPLY
    )
    engine = SimpleChatEngine.from_defaults(
        llm=llm, memory=memory, system_prompt="You are a cooking assistant. Answer briefly."
    )

    sizes: list[int] = []
    for turn in range(1, 201):
        engine.chat(user_turn(turn))
        if turn == 1:
            memory.pin(FACT)
        (prompt,) = llm.prompts[-1:]
        assert isinstance(prompt, list)
        sizes.append(prompt_tokens(counter, prompt))
        assert sizes[-1] <= WINDOW - REPLY, turn
        assert tool_call_problems(prompt) == [], turn
        assert prompt[0].content == "You are a cooking assistant. Answer briefly."
        assert prompt[-1].content == user_turn(turn)
        if turn >= 2:
            assert FACT in system_text(prompt), turn

    assert len(llm.prompts) == 200
    assert max(sizes) > WINDOW - REPLY - 150  # the window was used: history was being cut
    final = "\n".join(m.content or "" for m in llm.prompts[-1])
    assert user_turn(1) not in final  # far too old to fit as history
    assert len(memory.get_all()) == 400  # but everything is kept in the store


class Scripted:
    """A MockFunctionCallingLLM response generator: calls the tool on weather questions."""

    def __init__(self) -> None:
        self.prompts: list[tuple[list[ChatMessage], list[BaseTool]]] = []
        self.calls = 0

    def __call__(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        self.prompts.append(([m.model_copy(deep=True) for m in messages], kwargs.get("tools", [])))
        last = messages[-1]
        if last.role is MessageRole.TOOL:
            return ChatMessage(
                role=MessageRole.ASSISTANT,
                content=f"The forecast: {last.content}. Good weather for a picnic.",
            )
        text = last.content or ""
        if "weather" in text:
            self.calls += 1
            city = next((c for c in CITIES if c in text), "Lisbon")
            block = ToolCallBlock(
                tool_call_id=f"call-{self.calls}",
                tool_name="get_weather",
                tool_kwargs={"city": city},
            )
            return ChatMessage(role=MessageRole.ASSISTANT, blocks=[block])
        return ChatMessage(
            role=MessageRole.ASSISTANT,
            content="Here is an idea: " + "a quick tomato and basil pasta with garlic. " * 6,
        )


def agent_turn(turn: int) -> str:
    if turn % 3 == 0:
        return f"Turn {turn}: what is the weather in {CITIES[turn % 8]} today?"
    return user_turn(turn)


@pytest.mark.slow
@AGENT_WARNING
async def test_function_agent_200_turns_in_a_2048_window(
    context_memory: ContextMemory, counter: TokenCounter
) -> None:
    script = Scripted()
    llm = MockFunctionCallingLLM(response_generator=script)
    tool = weather_tool()
    # The agent appends its current tool calls and results after the memory's messages, and
    # sends the tool schemas: the memory's limit leaves room for both.
    headroom = 256
    memory = CtxBudgetMemory.from_defaults(
        memory=context_memory,
        session_id="agent",
        token_limit=WINDOW - REPLY - headroom,
        system_prompt="You are a cooking assistant with a weather tool. Answer briefly.",
    )
    agent = FunctionAgent(tools=[tool], llm=llm)

    turn_of_prompt: list[int] = []
    for turn in range(1, 201):
        await agent.run(user_msg=agent_turn(turn), memory=memory)
        if turn == 1:
            memory.pin(FACT)
        turn_of_prompt += [turn] * (len(script.prompts) - len(turn_of_prompt))

    assert script.calls == 66
    assert len(script.prompts) == 200 + 66  # a tool turn asks the model twice
    sizes = []
    for (prompt, tools), turn in zip(script.prompts, turn_of_prompt, strict=True):
        sizes.append(prompt_tokens(counter, prompt) + tool_schema_tokens(counter, tools))
        assert sizes[-1] <= WINDOW - REPLY, turn
        assert tool_call_problems(prompt) == [], turn
        assert prompt[0].content.startswith("You are a cooking assistant"), turn  # type: ignore[union-attr]
        if turn >= 2:
            assert FACT in system_text(prompt), turn
    assert max(sizes) > WINDOW - REPLY - headroom - 150  # history was being cut
    last_prompt = script.prompts[-1][0]
    assert not any(agent_turn(1) == m.content for m in last_prompt)
    stored = memory.get_all()
    assert sum(1 for m in stored if m.role is MessageRole.TOOL) == 66
    assert sum(1 for m in stored if m.role is MessageRole.USER) == 200


@AGENT_WARNING
async def test_agent_workflow_with_ctxbudget_memory(
    context_memory: ContextMemory, counter: TokenCounter
) -> None:
    script = Scripted()
    llm = MockFunctionCallingLLM(response_generator=script)
    helper = FunctionAgent(
        name="helper", description="Cooks and checks the weather.", tools=[weather_tool()], llm=llm
    )
    workflow = AgentWorkflow(agents=[helper], root_agent="helper")
    memory = CtxBudgetMemory.from_defaults(
        memory=context_memory, session_id="workflow", token_limit=600
    )
    memory.pin(FACT)
    for turn in range(1, 13):
        await workflow.run(user_msg=agent_turn(turn), memory=memory)
    assert script.calls == 4
    for prompt, tools in script.prompts:
        # The memory's part is within 600; the agent adds its current call, result and tools.
        assert prompt_tokens(counter, prompt) + tool_schema_tokens(counter, tools) <= 600 + 256
        assert tool_call_problems(prompt) == []
        assert FACT in system_text(prompt)
    assert len(memory.get_all()) == 12 * 2 + 4 * 2  # user + answer, plus call + result


def test_condense_plus_context_chat_engine_fits(
    context_memory: ContextMemory, counter: TokenCounter, embedding: CtxBudgetEmbedding
) -> None:
    documents = [
        Document(
            text=f"Recipe {i}: {dish}. " + "Chop, season, simmer and taste as you go. " * 12,
            metadata={"dish": dish},
        )
        for i, dish in enumerate(
            ["tomato soup", "basil pesto", "cheese omelette", "lentil curry", "ratatouille"] * 4
        )
    ]
    index = VectorStoreIndex.from_documents(documents, embed_model=embedding)
    context_budget = 500
    llm = RecordingLLM(max_tokens=60, is_chat_model=True)
    memory = CtxBudgetMemory.from_defaults(
        memory=context_memory, session_id="rag", token_limit=WINDOW - REPLY - context_budget - 300
    )
    engine = CondensePlusContextChatEngine.from_defaults(
        retriever=index.as_retriever(similarity_top_k=10),
        llm=llm,
        memory=memory,
        system_prompt="You are a cooking assistant.",
        node_postprocessors=[CtxBudgetNodePostprocessor(budget=context_budget)],
    )
    for turn in range(1, 31):
        engine.chat(user_turn(turn))
        answer = llm.chat_prompts()[-1]
        assert answer[-1].content == user_turn(turn)
        assert prompt_tokens(counter, answer) <= WINDOW - REPLY, turn
        assert tool_call_problems(answer) == []
    condense = llm.text_prompts()
    assert len(condense) == 29  # the first turn has no history to condense
    assert max(counter.count(p) for p in condense) <= WINDOW - REPLY
    assert len(memory.get_all()) == 60
