"""Tool calls and results at the LlamaIndex door, checked as the core and LangChain check them.

- A tool result (role ``tool`` or ``function``) without ``additional_kwargs["tool_call_id"]``
  answers no call: no provider takes it, so every ``get`` would prune it as an orphan. It is
  refused at ``put``/``put_messages``/``set`` (`InvalidItemError` naming the message's position
  and what to give), and nothing given with it is stored; until 2026-12-02 it was stored and
  then pruned on every ``get``. LangChain's ``ToolMessage`` requires the id.
- Tool-call kwargs holding NaN or an infinity are refused (JSON has neither, providers refuse
  a bare ``NaN``; the core and the LangChain adapter refuse them); until 2026-12-02 they were
  stored and sent as ``{"x": NaN}``.
- Arguments given as text are the model's own, kept as given even when they hold a bare
  ``NaN`` (as a malformed call is): they are not JSON to the core, so they come back as text
  kwargs, never as a dict holding NaN that LlamaIndex would send as ``NaN``.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock

from ctxbudget import PruneReason
from ctxbudget.errors import InvalidItemError
from ctxbudget.memory.context import ContextMemory

from .helpers import memory_on, tool_call_problems, user


def calling(call_id: str = "c1", kwargs: dict[str, Any] | str | None = None) -> ChatMessage:
    kwargs = {"city": "Lisbon"} if kwargs is None else kwargs
    block = ToolCallBlock(tool_call_id=call_id, tool_name="weather", tool_kwargs=kwargs)
    return ChatMessage(role=MessageRole.ASSISTANT, blocks=[block])


def result(text: str = "sunny", role: MessageRole = MessageRole.TOOL, **kwargs: Any) -> ChatMessage:
    return ChatMessage(role=role, content=text, additional_kwargs=kwargs)


NO_ID = [
    pytest.param(MessageRole.TOOL, {}, id="tool-no-kwargs"),
    pytest.param(MessageRole.TOOL, {"tool_call_id": None}, id="tool-None"),
    pytest.param(MessageRole.TOOL, {"tool_call_id": ""}, id="tool-empty"),
    pytest.param(MessageRole.TOOL, {"name": "weather"}, id="tool-name-only"),
    pytest.param(MessageRole.FUNCTION, {"name": "weather"}, id="function-name-only"),
]


@pytest.mark.parametrize(("role", "kwargs"), NO_ID)
def test_a_tool_result_without_a_call_id_is_refused_and_nothing_is_stored(
    context_memory: ContextMemory, role: MessageRole, kwargs: dict[str, Any]
) -> None:
    memory = memory_on(context_memory, token_limit=2000)
    memory.put(user("Weather in Lisbon?"))
    batch = [calling(), result(role=role, **kwargs), user("Thanks")]
    expected = (
        rf"message 1 is a tool result \({role.value} role\) without a tool_call_id.*"
        r'additional_kwargs=\{"tool_call_id": \.\.\.\}.*assistant\'s tool call'
    )
    with pytest.raises(InvalidItemError, match=expected):
        memory.put_messages(batch)
    with pytest.raises(InvalidItemError, match="message 0 is a tool result"):
        memory.put(result(role=role, **kwargs))
    with pytest.raises(InvalidItemError, match="message 2 is a tool result"):
        memory.set([user("Weather?"), calling(), result(role=role, **kwargs)])
    assert [m.content for m in memory.get_all()] == ["Weather in Lisbon?"]  # nothing of it


def test_the_result_given_again_with_its_call_id_completes_the_step(
    context_memory: ContextMemory,
) -> None:
    memory = memory_on(context_memory, token_limit=2000)
    memory.put_messages([user("Weather in Lisbon?"), calling()])
    with pytest.raises(InvalidItemError, match="message 0 is a tool result"):
        memory.put(result())
    memory.put(result(tool_call_id="c1"))
    memory.put(user("Thanks"))
    got = memory.get()
    assert [m.role for m in got] == [
        MessageRole.USER,
        MessageRole.ASSISTANT,
        MessageRole.TOOL,
        MessageRole.USER,
    ]
    assert got[2].additional_kwargs["tool_call_id"] == "c1" and not tool_call_problems(got)
    context = memory.last_context
    assert context is not None
    orphans = {PruneReason.ORPHAN_TOOL_CALL, PruneReason.ORPHAN_TOOL_RESULT}
    assert not [p for p in context.pruned if p.reason in orphans], context.explain()


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf], ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("form", ["block", "kwargs"])
def test_nan_or_infinity_in_tool_call_kwargs_is_refused_naming_the_call(
    context_memory: ContextMemory, value: float, form: str
) -> None:
    memory = memory_on(context_memory, token_limit=2000)
    kwargs = {"city": "Lisbon", "days": [1.0, value]}
    if form == "block":
        asking = calling("c7", kwargs)
    else:  # an OpenAI-style call in additional_kwargs, its arguments a dict
        call = {"id": "c7", "function": {"name": "weather", "arguments": kwargs}}
        asking = ChatMessage(role="assistant", content="", additional_kwargs={"tool_calls": [call]})
    expected = (
        r"message 1: the arguments of tool call 'weather' \(id 'c7'\) hold NaN or infinity.*"
        "give null or a string"
    )
    with pytest.raises(InvalidItemError, match=expected):
        memory.put_messages([user("Weather?"), asking, result(tool_call_id="c7")])
    assert memory.get_all() == []


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_arguments_text_holding_nan_is_kept_and_comes_back_as_text(
    context_memory: ContextMemory, token: str
) -> None:
    memory = memory_on(context_memory, token_limit=2000)
    text = f'{{"days": {token}}}'
    memory.put_messages([user("Weather?"), calling("c1", text), result(tool_call_id="c1")])
    memory.put(user("Thanks"))
    for messages in (memory.get_all(), memory.get()):
        blocks = [b for m in messages for b in m.blocks if isinstance(b, ToolCallBlock)]
        assert [b.tool_kwargs for b in blocks] == [text]  # the text, never {"days": nan}
        assert not tool_call_problems(messages)
