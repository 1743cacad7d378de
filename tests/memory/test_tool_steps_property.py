"""`tool_steps_together` over any interleaving of two writers' conversations (a property).

Each writer stores well-formed steps (a user turn; an assistant turn calling 1-3 tools, then
their results, then an answer). The store holds them interleaved in any order that keeps each
writer's own order. Read back, every tool result is right after its call's step (no call
without its results, no result without its call), each writer's messages keep their order,
nothing is lost or added, and a single writer's session comes back unchanged.
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget.memory.reading.tool_steps import tool_steps_together
from ctxbudget.store.records import Record


def writer_steps(writer: str, shapes: list[int]) -> list[Record]:
    """A writer's messages: for each shape, a question, then 0 (an answer) or n tool calls."""
    out: list[Record] = []
    for step, calls in enumerate(shapes):
        key = f"{writer}{step}"
        out.append(Record(id=f"{key}-q", kind="message", text=f"q {key}", role="user"))
        if calls:
            ids = [f"{key}-c{n}" for n in range(calls)]
            made = json.dumps([{"id": i, "name": "look", "args": {}} for i in ids])
            out.append(
                Record(
                    id=f"{key}-call",
                    kind="message",
                    text="",
                    role="assistant",
                    metadata={"_tool_calls": made},
                    tool_calls=tuple(ids),
                )
            )
            out += [
                Record(id=f"{i}-r", kind="message", text=f"r {i}", role="tool", tool_call_id=i)
                for i in ids
            ]
        out.append(Record(id=f"{key}-a", kind="message", text=f"a {key}", role="assistant"))
    return out


shapes = st.lists(st.integers(0, 3), min_size=1, max_size=4)


@st.composite
def interleavings(draw: st.DrawFn) -> tuple[list[Record], list[Record], list[Record]]:
    first = writer_steps("A", draw(shapes))
    second = writer_steps("B", draw(shapes))
    picks = draw(st.permutations([0] * len(first) + [1] * len(second)))
    queues = [list(first), list(second)]
    return first, second, [queues[p].pop(0) for p in picks]


@settings(max_examples=300, deadline=None)
@given(interleavings())
def test_each_result_follows_its_call_and_each_writer_keeps_its_order(
    drawn: tuple[list[Record], list[Record], list[Record]],
) -> None:
    first, second, stored = drawn
    read = tool_steps_together(stored)
    assert sorted(r.id for r in read) == sorted(r.id for r in stored)  # nothing lost or added
    for own in (first, second):
        mine = {r.id for r in own}
        assert [r.id for r in read if r.id in mine] == [r.id for r in own]
    for position, record in enumerate(read):
        if record.tool_calls:  # its results come right after it, in the order they were made
            after = read[position + 1 : position + 1 + len(record.tool_calls)]
            assert [r.tool_call_id for r in after] == list(record.tool_calls)


@given(shapes)
def test_one_writer_is_read_as_stored(shape: list[int]) -> None:
    own = writer_steps("A", shape)
    assert tool_steps_together(own) == own
