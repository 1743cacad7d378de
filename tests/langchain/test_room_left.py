"""The middleware sizes the memory's search to the room its own messages leave (`room_left`).

The agent's system prompt, pinned facts and conversation are offered with every call and packed
before memories, so `ContextMemory.candidates` is asked for what is left of the budget (never
less than the retrieved tier's floor): a long state means fewer candidates to build and pack,
not fewer memories sent.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from lc_fakes import RecordingChatModel

from ctxbudget import Budget, ContextItem, Tier, TokenCounter
from ctxbudget.core.render import Layout
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.reading.candidates import room_left
from langchain_ctxbudget import CtxBudgetMiddleware

FAST = settings(max_examples=150, deadline=None, derandomize=True)
TIERS = [Tier.SYSTEM, Tier.QUERY, Tier.PINNED, Tier.RECENT, Tier.RETRIEVED, Tier.SUMMARY, 99]


@FAST
@given(
    window=st.integers(50, 20_000),
    reserve_share=st.floats(0.0, 0.5),
    floor=st.one_of(st.none(), st.floats(0.01, 0.9)),
    held=st.lists(
        st.tuples(st.sampled_from(TIERS), st.text(max_size=60), st.sampled_from([None, "user"])),
        max_size=25,
    ),
)
def test_the_room_is_the_budget_less_what_packs_before_memories(
    window: int,
    reserve_share: float,
    floor: float | None,
    held: list[tuple[int, str, str | None]],
) -> None:
    counter = TokenCounter.for_model("gpt-4o")
    layout = Layout("messages", counter)
    floors = {} if floor is None else {Tier.RETRIEVED: floor}
    budget = Budget(window=window, reserve=int(window * reserve_share), floors=floors)
    items = [
        ContextItem(f"i{n}", text, tier=tier, role=role if tier == Tier.RECENT else None)
        for n, (tier, text, role) in enumerate(held)
    ]

    room = room_left(budget, layout, items)

    before = sum(layout.cost(it, layout.section_of(it)) for it in items if it.tier < Tier.RETRIEVED)
    assert room == max(1, budget.available - before, budget.floor_tokens(Tier.RETRIEVED))
    assert room >= budget.floor_tokens(Tier.RETRIEVED)
    # Items that pack with or after memories leave the room as it is.
    later = [it for it in items if it.tier >= Tier.RETRIEVED]
    assert room_left(budget, layout, later) == budget.available


def test_a_long_state_asks_for_less_and_still_sends_the_memories(memory: ContextMemory) -> None:
    fact = "The ferry to Madeira leaves from the Alcântara pier on Tuesdays."
    memory.add_messages(
        "s1",
        [{"role": "user", "content": fact, "id": "old-0"}]
        + [
            {"role": "user" if i % 2 else "assistant", "content": f"Small talk {i}.", "id": f"o{i}"}
            for i in range(1, 60)
        ],
    )
    memory.flush()
    asked: list[Any] = []
    gather = memory.candidates

    def spy(*args: Any, **kwargs: Any) -> Any:
        asked.append(kwargs["budget"])
        return gather(*args, **kwargs)

    memory.candidates = spy  # type: ignore[method-assign]
    rooms = []
    for length in (1, 80):
        state: list[BaseMessage] = [
            (HumanMessage if i % 2 == 0 else AIMessage)(f"Turn {i} of this thread.", id=f"t{i}")
            for i in range(length - 1)
        ]
        model = RecordingChatModel(messages=iter([AIMessage("ok")]))
        middleware = CtxBudgetMiddleware(model="gpt-4o", budget=2000, memory=memory)
        agent = create_agent(model, tools=[], middleware=[middleware], context_schema=dict)
        question = HumanMessage("When does the ferry to Madeira leave?", id=f"q{length}")
        agent.invoke(
            {"messages": [*state, question]}, context={"session_id": "s1", "user_id": "u1"}
        )
        sent = " ".join(str(m.content) for m in model.calls[-1][0])
        assert fact in sent  # the memory reaches the model whatever the state's length
        rooms.append(asked[-1])
    budget = middleware._call_budget(TokenCounter.for_model("gpt-4o"), None, [])
    assert rooms[0] <= budget.available and rooms[1] < rooms[0]
    assert rooms[1] >= budget.floor_tokens(Tier.RETRIEVED)
