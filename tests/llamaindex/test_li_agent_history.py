"""`agent.run(chat_history=...)` keeps the system prompt put into the memory.

LlamaIndex's agents hand ``chat_history`` to ``memory.aset`` (it replaces the stored messages)
before they put the user's message. A system prompt put into the memory (``system_prompt=`` of
`CtxBudgetMemory.from_defaults`, ``put`` of a system message) is the agent's instruction, not
part of that history: it still reaches the LLM first. A history that brings its own system
messages replaces the stored ones with those.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from llama_index.core import Settings
from llama_index.core.agent.workflow import AgentWorkflow, FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.llms.mock import MockFunctionCallingLLM

from ctxbudget.memory.context import ContextMemory
from llama_index.ctxbudget import CtxBudgetEmbedding

from .helpers import AGENT_WARNING, Recorder, assistant, memory_on, user

PROMPT = "You are a travel agent. Always answer in French."


def bien_sur(messages: Sequence[ChatMessage]) -> ChatMessage:
    return assistant("Bien sûr.")


def history() -> list[ChatMessage]:
    return [user("I want to go to Porto."), assistant("Porto est magnifique.")]


def run_agent(kind: str, llm: MockFunctionCallingLLM) -> FunctionAgent | AgentWorkflow:
    agent = FunctionAgent(name="travel", description="Plans trips.", tools=[], llm=llm)
    return agent if kind == "agent" else AgentWorkflow(agents=[agent], root_agent="travel")


@AGENT_WARNING
@pytest.mark.parametrize("kind", ["agent", "workflow"])
@pytest.mark.parametrize("how", ["system_prompt", "put"])
async def test_chat_history_keeps_the_memorys_system_prompt(
    context_memory: ContextMemory, embedding: CtxBudgetEmbedding, kind: str, how: str
) -> None:
    recorder = Recorder(bien_sur)
    llm = MockFunctionCallingLLM(response_generator=recorder)
    Settings.llm, Settings.embed_model = llm, embedding
    if how == "system_prompt":
        memory = memory_on(context_memory, token_limit=800, system_prompt=PROMPT)
    else:
        memory = memory_on(context_memory, token_limit=800)
        memory.put(ChatMessage(role=MessageRole.SYSTEM, content=PROMPT))
    agent = run_agent(kind, llm)

    await agent.run(user_msg="And the trains?", chat_history=history(), memory=memory)

    (sent,) = recorder.prompts
    assert [(m.role, m.content) for m in sent] == [
        (MessageRole.SYSTEM, PROMPT),
        (MessageRole.USER, "I want to go to Porto."),
        (MessageRole.ASSISTANT, "Porto est magnifique."),
        (MessageRole.USER, "And the trains?"),
    ]
    # The next run, with the history the caller keeps, still starts with the prompt.
    again = [*history(), user("And the trains?"), assistant("Bien sûr.")]
    await agent.run(user_msg="Merci !", chat_history=again, memory=memory)
    assert recorder.prompts[-1][0].content == PROMPT
    assert [m.content for m in memory.get_all()][0] == PROMPT


def test_a_history_with_its_own_system_message_replaces_the_stored_one(
    context_memory: ContextMemory,
) -> None:
    memory = memory_on(context_memory, token_limit=800, system_prompt=PROMPT)
    memory.set([ChatMessage(role=MessageRole.SYSTEM, content="Answer in English."), *history()])
    assert [m.content for m in memory.get_all()] == [
        "Answer in English.",
        "I want to go to Porto.",
        "Porto est magnifique.",
    ]
    memory.reset()  # forgets the system messages too
    assert memory.get_all() == []
