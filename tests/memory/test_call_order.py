"""`CallOrder`: async calls run in the order they were called, whatever is cancelled when.

The calls stand in for a door's work on a worker thread (`ContextMemory.arun`): cancelled
while running, such a call still ends its work before it raises. The invariants: a write runs
alone; a call that runs starts after every earlier call it must follow has ended, even when a
call between them was cancelled while it waited (until 2026-12-01 that let the next write run
beside a slow one before it: `CtxBudgetStore`'s last put lost to an earlier one).
"""

from __future__ import annotations

import asyncio
from functools import partial

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget.memory.ordering import CallOrder

# (writes, steps the work takes, the driver's step at which it is cancelled, or None)
CALLS = st.lists(
    st.tuples(st.booleans(), st.integers(0, 4), st.none() | st.integers(0, 8)),
    min_size=1,
    max_size=10,
)


async def _played(plan: list[tuple[bool, int, int | None]]) -> list[tuple[str, int]]:
    order = CallOrder()
    events: list[tuple[str, int]] = []

    async def work(i: int, steps: int) -> int:
        events.append(("start", i))
        cancelled = False
        for _ in range(steps):
            try:
                await asyncio.sleep(0)
            except asyncio.CancelledError:  # work on a thread ends before the call raises
                cancelled = True
        events.append(("end", i))
        if cancelled:
            raise asyncio.CancelledError
        return i

    tasks = [
        asyncio.ensure_future(order.run(partial(work, i, steps), writes=writes))
        for i, (writes, steps, _) in enumerate(plan)
    ]
    for step in range(10):
        for task, (_, _, when) in zip(tasks, plan, strict=True):
            if when == step:
                task.cancel()
        await asyncio.sleep(0)
    await asyncio.gather(*tasks, return_exceptions=True)
    return events


@settings(max_examples=200, deadline=None)
@given(CALLS)
def test_a_call_starts_after_every_earlier_call_it_follows_has_ended(
    plan: list[tuple[bool, int, int | None]],
) -> None:
    events = asyncio.run(_played(plan))
    at = {event: n for n, event in enumerate(events)}
    ran = sorted(i for kind, i in events if kind == "start")
    for j in ran:
        for i in ran:
            if i < j and (plan[i][0] or plan[j][0]):  # a write follows all, a read the writes
                assert at[("end", i)] < at[("start", j)], (plan, events)


async def test_a_cancelled_waiter_does_not_let_the_next_write_overtake_a_running_one() -> None:
    order = CallOrder()
    gate = asyncio.Event()
    done: list[str] = []

    async def slow() -> None:
        await gate.wait()
        done.append("slow")

    async def quick(name: str) -> None:
        done.append(name)

    first = asyncio.ensure_future(order.run(slow, writes=True))
    cancelled = asyncio.ensure_future(order.run(partial(quick, "cancelled"), writes=True))
    last = asyncio.ensure_future(order.run(partial(quick, "last"), writes=True))
    await asyncio.sleep(0.01)
    cancelled.cancel()
    await asyncio.sleep(0.01)
    assert done == []  # "last" still waits for "slow"
    gate.set()
    await asyncio.gather(first, last)
    assert cancelled.cancelled() and done == ["slow", "last"]
