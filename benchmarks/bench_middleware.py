"""`CtxBudgetMiddleware` per model call: without memory, and with memory (write-behind or not).

A real ``create_agent`` agent whose chat model is LangChain's fake (it answers at once), so
what is timed is the agent's own work plus the middleware's. The session already holds
``--history`` messages in memory (and the agent's state carries the last ``--state`` of them);
each timed turn adds one user message and runs the agent (one model call, no tools). The
middleware's overhead is the turn time minus the same turn without the middleware.

Side by side in one run, with the load average: no middleware (baseline), the middleware
without memory, with memory and write-behind (the default), with memory written synchronously.

Run: nice -n 5 .venv/bin/python benchmarks/bench_middleware.py [--history 2000] [--turns 40]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import machine, pct
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from ctxbudget import ContextMemory
from langchain_ctxbudget import CtxBudgetMiddleware

WORDS = (
    "the a to and of in we you it is for on that this with plan trip Lisbon Porto train budget "
    "booking dinner vegetarian museum weekend river coffee tickets hotel ferry beach market"
).split()


def sentence(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high))).capitalize() + "."


def conversation(count: int, rng: random.Random) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    for i in range(count):
        text = sentence(rng, 6, 40)
        out.append(HumanMessage(text, id=f"h{i}") if i % 2 == 0 else AIMessage(text, id=f"a{i}"))
    return out


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.1f} (5 min {five:.1f})"


def run(mode: str, history: list[BaseMessage], args: argparse.Namespace) -> list[float]:
    rng = random.Random(7)
    answers = iter([AIMessage(sentence(rng, 10, 30)) for _ in range(args.turns + 5)])
    model = GenericFakeChatModel(messages=answers)
    memory = None
    folder = tempfile.TemporaryDirectory()
    middleware: list[Any] = []
    if mode != "no middleware":
        if mode.startswith("memory"):
            memory = ContextMemory(
                Path(folder.name) / "mem", write_behind=mode == "memory, write-behind (default)"
            )
            memory.add_messages(
                "s1",
                [
                    {
                        "role": m.type.replace("human", "user").replace("ai", "assistant"),
                        "content": m.text,
                        "id": m.id,
                    }
                    for m in history
                ],
                progress=False,
            )
            memory.flush()
        middleware = [CtxBudgetMiddleware(model="gpt-4o", budget=8192, reserve=1024, memory=memory)]
    agent = create_agent(model, tools=[], middleware=middleware)
    config = {"configurable": {"thread_id": "s1"}}
    state = list(history[-args.state :])
    times: list[float] = []
    for turn in range(args.turns + 2):
        messages = [*state, HumanMessage(sentence(rng, 6, 30), id=f"q{turn}")]
        start = time.perf_counter()
        result = agent.invoke({"messages": messages}, config)
        took = (time.perf_counter() - start) * 1000.0
        state = list(result["messages"])[-args.state :]
        if turn >= 2:  # the first turns load the model and warm the caches
            times.append(took)
        time.sleep(args.pause)
    if memory is not None:
        memory.close()
    folder.cleanup()
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--history", type=int, default=2000, help="messages already in memory")
    parser.add_argument("--state", type=int, default=40, help="messages the agent's state holds")
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--pause", type=float, default=0.2, help="s between turns (the user)")
    args = parser.parse_args()
    print(machine())
    print()
    history = conversation(args.history, random.Random(3))
    modes = [
        "no middleware",
        "middleware, no memory",
        "memory, write-behind (default)",
        "memory, synchronous writes",
    ]
    results = {mode: run(mode, history, args) for mode in modes}
    base = statistics.median(results["no middleware"])
    print(
        f"## One agent turn (one model call), session of {args.history:,} messages in memory, "
        f"{args.state} in the agent's state, {args.turns} turns"
    )
    print()
    print("| mode | turn p50 ms | p95 ms | middleware overhead p50 ms | load |")
    print("|---|---:|---:|---:|---|")
    for mode, times in results.items():
        p50 = statistics.median(times)
        print(f"| {mode} | {p50:.1f} | {pct(times, 0.95):.1f} | {p50 - base:.1f} | {load()} |")


if __name__ == "__main__":
    main()
