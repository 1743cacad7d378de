"""`CtxBudgetMiddleware(values=...)`: the agent's store items offered under the call's budget.

A real ``create_agent`` agent with `CtxBudgetStore` over the same embedded memory (the real
embedding model); the chat model is the suite's fake, which records what it received.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.messages.utils import convert_to_openai_messages
from langchain_core.tools import tool
from lc_fakes import RecordingChatModel
from pytest import MonkeyPatch

from ctxbudget import ConfigurationError, StoreInputError, TokenCounter
from ctxbudget.core.items import Tier
from ctxbudget.embed.local import LocalEmbedder
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.values import ValueQuery
from langchain_ctxbudget import CtxBudgetMiddleware
from langchain_ctxbudget.identity import values_scope, values_template
from langchain_ctxbudget.recall import Recalled, recall
from langchain_ctxbudget.store import CtxBudgetStore

COUNTER = TokenCounter.for_model("gpt-4o")
ANA = {"configurable": {"thread_id": "ana-1", "user_id": "ana"}}


def tokens_of(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> int:
    schemas = sum(COUNTER.count(json.dumps(t, sort_keys=True, ensure_ascii=False)) for t in tools)
    return COUNTER.count_messages(convert_to_openai_messages(messages)) + schemas


def saved_ids(middleware: CtxBudgetMiddleware, thread: str) -> list[str]:
    context = middleware.last_context(thread)
    assert context is not None
    return [it.id for it in context.included if it.tier == Tier.SAVED]


# -- the option ---------------------------------------------------------------------------------
def test_values_is_a_namespace_template_checked_when_the_middleware_is_made(
    memory: ContextMemory,
) -> None:
    with pytest.raises(ConfigurationError, match="needs memory="):
        CtxBudgetMiddleware(model="gpt-4o", values=("memories", "{user_id}"))
    for bad, why in [
        ("memories", "namespace of the agent's store"),
        ((), "namespace of the agent's store"),
        (("memories", ""), "non-empty str without '.'"),
        (("mem.ories", "{user_id}"), "non-empty str without '.'"),
        (("memories", 7), "non-empty str without '.'"),
        (("memories", "{org_id}"), "not a placeholder the middleware fills"),
        (("{user_id}", "{langgraph_user_id}"), "one placeholder"),
    ]:
        with pytest.raises(ConfigurationError, match=why):
            CtxBudgetMiddleware(model="gpt-4o", memory=memory, values=bad)  # type: ignore[arg-type]
    middleware = CtxBudgetMiddleware(
        model="gpt-4o", memory=memory, values=["memories", "{user_id}"]
    )
    assert middleware.values == ("memories", "{user_id}")


LABEL = st.text(st.sampled_from("ab.{}_-é"), max_size=6)


@given(
    st.lists(st.one_of(LABEL, st.sampled_from(["{user_id}", "{langgraph_user_id}"])), max_size=4)
)
def test_a_template_is_taken_exactly_when_langgraph_would_take_its_namespace(
    labels: list[str],
) -> None:
    placeholders = [x for x in labels if x in ("{user_id}", "{langgraph_user_id}")]
    valid = (
        bool(labels)
        and all(x and "." not in x and (not x.startswith("{") or x in placeholders) for x in labels)
        and len(placeholders) <= 1
    )
    try:
        template = values_template(tuple(labels))
    except ConfigurationError:
        assert not valid
        return
    assert valid and template == tuple(labels)
    namespace, owner = values_scope(template, "ana")
    assert owner == ("ana" if placeholders else None)
    assert namespace == tuple("ana" if x in placeholders else x for x in labels)


def test_the_template_names_the_runs_user_or_langmems() -> None:
    assert values_scope(("memories", "{user_id}"), "ana") == (("memories", "ana"), "ana")
    assert values_scope(("facts",), "ana") == (("facts",), None)  # shared values
    # Outside a run, LangMem's placeholder is the run's user too.
    assert values_scope(("memories", "{langgraph_user_id}"), "bo") == (("memories", "bo"), "bo")
    with pytest.raises(StoreInputError, match="names the run's user, but this run has none"):
        values_scope(("memories", "{user_id}"), None)


# -- in an agent --------------------------------------------------------------------------------
def test_saved_values_reach_the_prompt_for_their_user_only(memory: ContextMemory) -> None:
    store = CtxBudgetStore(memory, user_at=1)
    store.put(("memories", "ana"), "diet", {"content": "Ana is allergic to peanuts."})
    store.put(("memories", "bo"), "diet", {"content": "Bo only eats sushi."})
    store.put(("notes",), "shared", {"content": "The office canteen closes at 3pm."})
    model = RecordingChatModel(messages=iter([AIMessage("Noted.")] * 4))
    middleware = CtxBudgetMiddleware(
        model="gpt-4o", budget=2000, memory=memory, values=("memories", "{user_id}")
    )
    agent = create_agent(model, middleware=[middleware], store=store)
    agent.invoke({"messages": [HumanMessage("What should I eat for lunch?")]}, ANA)
    system = model.calls[-1][0][0].text
    assert "Ana is allergic to peanuts." in system
    assert "sushi" not in system and "canteen" not in system  # another user's; shared ones
    assert len(saved_ids(middleware, "ana-1")) == 1

    bo = {"configurable": {"thread_id": "bo-1", "user_id": "bo"}}
    agent.invoke({"messages": [HumanMessage("What should I eat for lunch?")]}, bo)
    system = model.calls[-1][0][0].text
    assert "Bo only eats sushi." in system and "peanuts" not in system

    shared = CtxBudgetMiddleware(model="gpt-4o", budget=2000, memory=memory, values=("notes",))
    agent = create_agent(model, middleware=[shared], store=store)
    bo_2 = {"configurable": {"thread_id": "bo-2", "user_id": "bo"}}
    agent.invoke({"messages": [HumanMessage("When can I eat?")]}, bo_2)
    assert "The office canteen closes at 3pm." in model.calls[-1][0][0].text


def test_many_saved_values_are_packed_within_the_budget(memory: ContextMemory) -> None:
    store = CtxBudgetStore(memory, user_at=1)
    facts = [f"Ana's trip {n} to Porto: " + "train, hotel, dinner " * 12 for n in range(12)]
    for n, fact in enumerate(facts):
        store.put(("memories", "ana"), f"trip-{n}", {"content": fact})
    model = RecordingChatModel(messages=iter([AIMessage("Sure.")]))
    middleware = CtxBudgetMiddleware(
        model="gpt-4o", budget=300, reserve=50, memory=memory, values=("memories", "{user_id}")
    )
    agent = create_agent(model, middleware=[middleware], store=store)
    agent.invoke({"messages": [HumanMessage("Tell me about my trips to Porto")]}, ANA)
    sent, tools = model.calls[-1]
    assert tokens_of(sent, tools) <= 250
    context = middleware.last_context("ana-1")
    assert context is not None
    kept = [it for it in context.included if it.tier == Tier.SAVED]
    cut = [it for it in context.pruned if it.item.tier == Tier.SAVED]
    assert kept and cut  # some fit, the rest was cut for the budget
    assert all(it.text.split(": ", 1)[-1][:20] in sent[0].text for it in kept)


def tools_on(namespace: tuple[str, ...]) -> list[Any]:
    """Tools that save and delete a fact under ``namespace`` ("{user_id}": the run's user)."""

    def where(runtime: ToolRuntime) -> tuple[str, ...]:
        user = runtime.config["configurable"]["user_id"]
        return tuple(user if label == "{user_id}" else label for label in namespace)

    @tool
    def remember(fact: str, runtime: ToolRuntime) -> str:
        """Save a fact about the user."""
        assert runtime.store is not None
        runtime.store.put(where(runtime), "fact", {"content": fact})
        return "saved"

    @tool
    def forget(runtime: ToolRuntime) -> str:
        """Forget the saved fact."""
        assert runtime.store is not None
        runtime.store.delete(where(runtime), "fact")
        return "forgotten"

    return [remember, forget]


def call(name: str, n: int, **args: Any) -> AIMessage:
    calls = [{"name": name, "args": args, "id": f"c{n}", "type": "tool_call"}]
    return AIMessage("", tool_calls=calls)


@pytest.mark.parametrize(
    "namespace", [("memories", "{user_id}"), ("notes",)], ids=["user", "shared"]
)
def test_a_value_saved_or_deleted_in_a_turn_counts_on_the_turns_next_call(
    memory: ContextMemory, namespace: tuple[str, ...]
) -> None:
    # The question's candidates are kept between the calls of a turn (`Recalled`) while their
    # stamps are current: a write to the user's values draws the user's stamp, a write to the
    # shared values the shared values' stamp. None is served from before a tool changed it.
    store = CtxBudgetStore(memory, user_at=1)
    answers = [
        call("remember", 1, fact="Ana's favourite city is Porto."),
        call("forget", 2),
        AIMessage("Done."),
    ]
    model = RecordingChatModel(messages=iter(answers))
    middleware = CtxBudgetMiddleware(model="gpt-4o", budget=2000, memory=memory, values=namespace)
    agent = create_agent(model, tools=tools_on(namespace), middleware=[middleware], store=store)
    agent.invoke({"messages": [HumanMessage("Remember my favourite city, then forget it")]}, ANA)
    systems = [sent[0].text for sent, _ in model.calls]
    assert "favourite city is Porto" not in systems[0]
    assert "Ana's favourite city is Porto." in systems[1]  # saved by the call before
    assert "favourite city is Porto" not in systems[2]  # deleted by the call before


async def test_async_agents_get_the_saved_values_too(memory: ContextMemory) -> None:
    store = CtxBudgetStore(memory, user_at=1)
    await store.aput(("memories", "ana"), "seat", {"content": "Ana always books an aisle seat."})
    model = RecordingChatModel(messages=iter([AIMessage("Booked.")]))
    middleware = CtxBudgetMiddleware(
        model="gpt-4o", budget=2000, memory=memory, values=("memories", "{user_id}")
    )
    agent = create_agent(model, middleware=[middleware], store=store)
    await agent.ainvoke({"messages": [HumanMessage("Book my seat to Porto")]}, ANA)
    assert "seat: " in model.calls[-1][0][0].text
    assert "Ana always books an aisle seat." in model.calls[-1][0][0].text


def test_a_run_whose_langmem_user_is_another_user_is_refused(memory: ContextMemory) -> None:
    store = CtxBudgetStore(memory, user_at=1)
    store.put(("memories", "bo"), "diet", {"content": "Bo only eats sushi."})
    model = RecordingChatModel(messages=iter([AIMessage("Noted.")] * 2))
    middleware = CtxBudgetMiddleware(
        model="gpt-4o", memory=memory, values=("memories", "{langgraph_user_id}")
    )
    agent = create_agent(model, middleware=[middleware], store=store, context_schema=dict)
    mixed = {"configurable": {"thread_id": "t-mixed", "langgraph_user_id": "bo"}}
    with pytest.raises(StoreInputError, match="langgraph_user_id is 'bo'"):
        agent.invoke({"messages": [HumanMessage("Lunch?")]}, mixed, context={"user_id": "ana"})
    assert model.calls == []  # refused before the model was called
    agent.invoke({"messages": [HumanMessage("Lunch?")]}, mixed)  # bo's run: bo's values
    assert "Bo only eats sushi." in model.calls[-1][0][0].text


def test_shared_values_are_kept_until_another_object_puts_or_deletes_one(
    memory: ContextMemory, tmp_path: Path, embedder: LocalEmbedder, monkeypatch: MonkeyPatch
) -> None:
    # Shared values (no user) are kept between calls like the user's: their partition's stamp
    # is read with the session's, so a put or delete by another object on the folder is seen
    # by the next call (never a stale value) and the kept candidates serve otherwise.
    other = ContextMemory(path=tmp_path / "chroma", embedder=embedder)
    other.put_value(("notes",), "canteen", {"content": "The canteen closes at 3pm."})
    memory.add_message("s-shared", "user", "Hello, I work on floor 2.", user_id="ana")
    memory.flush()
    gathered: list[int] = []
    real = memory.candidates

    def counted(*args: Any, **kwargs: Any) -> Any:
        gathered.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(memory, "candidates", counted)
    recalled = Recalled()
    question = [HumanMessage("When does the canteen close? Is there a gym?")]

    def offered() -> str:
        added, _ = recall(
            memory,
            recalled,
            question,
            ["q"],
            ("s-shared", "ana"),
            set(),
            2000,
            False,
            values=ValueQuery(("notes",)),
        )
        return " ".join(item.text for item in added.extras)

    assert "closes at 3pm" in offered()
    assert "closes at 3pm" in offered()
    assert len(gathered) == 1  # the second call was served from the kept candidates
    other.put_value(("notes",), "gym", {"content": "The gym on floor 2 is open to staff."})
    assert "gym on floor 2" in offered()
    assert len(gathered) == 2
    other.delete_value(("notes",), "canteen")
    assert "closes at 3pm" not in offered()
    assert len(gathered) == 3
    assert "gym on floor 2" in offered()
    assert len(gathered) == 3
    other.close()


def test_a_value_that_expires_between_a_turns_calls_is_not_offered_again(
    memory: ContextMemory, monkeypatch: MonkeyPatch
) -> None:
    # An expiry draws no stamp: the kept candidates of the question end with their first
    # saved value's expiry (`Candidates.true_until`), so the call after it gathers again.
    from ctxbudget.memory.values import model as values_model
    from langchain_ctxbudget import recall as recall_module

    shift = [0.0]
    real_ns, real_time = values_model.clock, recall_module.time.time
    monkeypatch.setattr(values_model, "clock", lambda: real_ns() + int(shift[0] * 1e9))

    class Clock:
        @staticmethod
        def time() -> float:
            return real_time() + shift[0]

    monkeypatch.setattr(recall_module, "time", Clock)
    store = CtxBudgetStore(memory, user_at=1)
    store.put(("memories", "ana"), "city", {"content": "Ana's favourite city is Porto."}, ttl=1)

    @tool
    def wait_a_while() -> str:
        """Let two minutes pass."""
        shift[0] += 120.0
        return "waited"

    answers = [AIMessage("Hello Ana."), call("wait_a_while", 1), AIMessage("Done.")]
    model = RecordingChatModel(messages=iter(answers))
    middleware = CtxBudgetMiddleware(
        model="gpt-4o", budget=2000, memory=memory, values=("memories", "{user_id}")
    )
    agent = create_agent(model, tools=[wait_a_while], middleware=[middleware], store=store)
    agent.invoke({"messages": [HumanMessage("Hi, I am Ana.")]}, ANA)  # the session has records
    memory.flush()
    agent.invoke({"messages": [HumanMessage("What is my favourite city? Wait first.")]}, ANA)
    systems = [sent[0].text for sent, _ in model.calls]
    assert "favourite city is Porto" in systems[1]
    assert "favourite city is Porto" not in systems[2]  # expired between the two calls
