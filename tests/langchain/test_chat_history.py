"""`CtxBudgetChatMessageHistory` on a real Chroma (embedded, then a server), sync and async."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory
from lc_fakes import RecordingChatModel

from ctxbudget import StoreInputError
from ctxbudget.memory.context import ContextMemory
from langchain_ctxbudget import CtxBudgetChatMessageHistory

CONVERSATION: list[BaseMessage] = [
    SystemMessage("You are terse.", id="m0"),
    HumanMessage("Weather in Lisbon?", id="m1", name="ana"),
    AIMessage(
        "",
        id="m2",
        tool_calls=[{"name": "weather", "args": {"city": "Lisbon", "days": 2}, "id": "c1"}],
    ),
    ToolMessage("Sunny, 24 C.", tool_call_id="c1", id="m3", name="weather"),
    AIMessage("Sunny and warm.", id="m4"),
]


def same(a: BaseMessage, b: BaseMessage) -> bool:
    keys = ("type", "content", "id", "name")
    if any(getattr(a, k) != getattr(b, k) for k in keys):
        return False
    if isinstance(a, AIMessage) and isinstance(b, AIMessage):
        return [(c["name"], c["args"], c["id"]) for c in a.tool_calls] == [
            (c["name"], c["args"], c["id"]) for c in b.tool_calls
        ]
    if isinstance(a, ToolMessage) and isinstance(b, ToolMessage):
        return a.tool_call_id == b.tool_call_id
    return True


def test_messages_round_trip_with_ids_names_and_tool_calls(any_memory: ContextMemory) -> None:
    history = CtxBudgetChatMessageHistory(any_memory, "s1", user_id="ana")
    history.add_messages(CONVERSATION)
    history.add_user_message("Thanks!")
    history.add_messages([AIMessage("")])  # nothing to keep: not stored
    back = history.messages
    assert len(back) == 6
    assert all(same(a, b) for a, b in zip(back, CONVERSATION, strict=False))
    assert back[-1].content == "Thanks!" and back[-1].id
    assert {r.user_id for r in any_memory.history("s1")} == {"ana"}
    # Another session of the same memory is separate.
    assert CtxBudgetChatMessageHistory(any_memory, "s2").messages == []
    fact = any_memory.pin("s1", "Ana is vegetarian.")
    history.clear()  # the conversation goes, pinned facts stay (as LlamaIndex's reset())
    assert history.messages == []
    assert [it.id for it in any_memory.candidates("s1", "food", budget=500).pinned] == [fact]
    history.clear(pins=True)
    assert any_memory.candidates("s1", "food", budget=500).pinned == ()


async def test_async_methods(any_memory: ContextMemory) -> None:
    history = CtxBudgetChatMessageHistory(any_memory, "a1")
    await history.aadd_messages(CONVERSATION[:2])
    assert [m.id for m in await history.aget_messages()] == ["m0", "m1"]
    await history.aclear()
    assert await history.aget_messages() == []


def test_bad_input_is_refused_before_anything_is_written(memory: ContextMemory) -> None:
    with pytest.raises(StoreInputError):
        CtxBudgetChatMessageHistory(memory, "")
    history = CtxBudgetChatMessageHistory(memory, "s1")
    history.add_messages([HumanMessage("kept", id="x1")])
    with pytest.raises(StoreInputError, match="different content"):
        history.add_messages([HumanMessage("new", id="x2"), HumanMessage("edited", id="x1")])
    assert [m.content for m in history.messages] == ["kept"]


# RunnableWithMessageHistory itself is deprecated in langchain-core 1.x; existing code still uses
# it, which is who this class is for.
@pytest.mark.filterwarnings(
    "ignore:RunnableWithMessageHistory is deprecated. Use LangGraph's built-in persistence "
    "instead.:langchain_core._api.deprecation.LangChainDeprecationWarning"
)
def test_runnable_with_message_history_switches_storage(memory: ContextMemory) -> None:
    model = RecordingChatModel(messages=iter(["Hello Ana!", "You are Ana."]))
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Be brief."), MessagesPlaceholder("history"), ("human", "{question}")]
    )
    chain = RunnableWithMessageHistory(
        prompt | model,
        lambda session_id: CtxBudgetChatMessageHistory(memory, session_id),
        input_messages_key="question",
        history_messages_key="history",
    )
    config = {"configurable": {"session_id": "chat-1"}}
    chain.invoke({"question": "I am Ana."}, config)
    chain.invoke({"question": "Who am I?"}, config)
    second = model.calls[1][0]
    assert [m.content for m in second[1:]] == ["I am Ana.", "Hello Ana!", "Who am I?"]
    assert [r.text for r in memory.history("chat-1")] == [
        "I am Ana.",
        "Hello Ana!",
        "Who am I?",
        "You are Ana.",
    ]


def test_a_call_a_cancelled_run_left_unanswered_is_not_handed_on(memory: ContextMemory) -> None:
    """A run cancelled while its tool ran stored the call and never its result; before
    2026-12-01 every later read handed that call on, and providers refuse such a history."""
    history = CtxBudgetChatMessageHistory(memory, "s1")
    call = AIMessage("", id="a1", tool_calls=[{"name": "slow", "args": {}, "id": "C1"}])
    history.add_messages([HumanMessage("Run the slow tool.", id="q1"), call])
    assert [m.id for m in history.messages] == ["q1", "a1"]  # pending: its result may come
    history.add_messages([HumanMessage("Never mind.", id="q2"), AIMessage("Fine.", id="a2")])
    assert [m.id for m in history.messages] == ["q1", "q2", "a2"]
    assert [r.id for r in memory.history("s1")] == ["q1", "a1", "q2", "a2"]  # all still stored


async def test_gathered_async_adds_store_in_call_order(any_memory: ContextMemory) -> None:
    """Gathered adds keep their call order (as a history that stores in the call's first step)."""
    history = CtxBudgetChatMessageHistory(any_memory, "s")
    turns: list[BaseMessage] = [
        HumanMessage(f"message {i}") if i % 2 == 0 else AIMessage(f"message {i}") for i in range(8)
    ]
    adds = [asyncio.create_task(history.aadd_messages([turn])) for turn in turns]
    reading = asyncio.create_task(history.aget_messages())  # called after them: reads them all
    await asyncio.gather(*adds)
    expected = [f"message {i}" for i in range(8)]
    assert [str(m.content) for m in await reading] == expected
    assert [str(m.content) for m in history.messages] == expected
