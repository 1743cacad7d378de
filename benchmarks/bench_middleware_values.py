"""`CtxBudgetMiddleware(values=...)`: what offering the agent's store items costs per model call.

A real ``create_agent`` agent whose chat model is LangChain's fake; the session holds
``--history`` messages of user u1 and the store (`CtxBudgetStore`, same memory) ``--values``
items of u1 under ("memories", "u1") and as many shared ones under ("notes",). Each timed turn
is one question and ``--tool-calls`` tool calls, so 1 + tool-calls model calls; the calls after
the first reuse the question's candidates (`langchain_ctxbudget.recall`) while their stamps
hold.

Variants, turn by turn (each turn every variant, the order rotated; each on its own copy of one
folder), with the load average:

- ``memory, no values``: the middleware with memory, as before issue 43;
- ``values=("memories", "{user_id}")``: the user's items, with the candidates (kept while the
  user's stamp holds: one values search per question);
- ``values=("notes",)``: shared items, with the candidates too (kept while the shared items'
  stamp, read with the session's, holds);

and, alone, ``search_values`` of the user's namespace with a new query each time (what one
values search per call would cost) and one query embedding.

Run: nice -n 5 .venv/bin/python benchmarks/bench_middleware_values.py [--turns 30]
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_middleware import ToolFake, conversation, load, lookup, one_embedding, sentence
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from ctxbudget import ContextMemory
from langchain_ctxbudget import CtxBudgetMiddleware
from langchain_ctxbudget.store import CtxBudgetStore

VARIANTS: dict[str, tuple[str, ...] | None] = {
    "memory, no values": None,
    "values=('memories', '{user_id}')": ("memories", "{user_id}"),
    "values=('notes',) (shared)": ("notes",),
}


def template_folder(root: Path, history: list[BaseMessage], values: int) -> Path:
    folder = root / "template"
    memory = ContextMemory(folder, write_behind=False)
    memory.add_messages(
        "s1",
        [
            {"role": "user" if m.type == "human" else "assistant", "content": m.text, "id": m.id}
            for m in history
        ],
        user_id="u1",
        progress=False,
    )
    store = CtxBudgetStore(memory, user_at=1)
    rng = random.Random(5)
    for n in range(values):
        store.put(("memories", "u1"), f"fact-{n}", {"text": sentence(rng, 6, 20)})
        store.put(("notes",), f"note-{n}", {"text": sentence(rng, 6, 20)})
    memory.close()
    return folder


class Variant:
    def __init__(self, name: str, template: Path, history: list[BaseMessage], args: Any) -> None:
        self.name = name
        self.rng = random.Random(7)  # the same questions and answers in every variant
        answers = [
            reply
            for turn in range(args.turns + 5)
            for reply in [
                *(
                    AIMessage(
                        "",
                        tool_calls=[
                            {"name": "lookup", "args": {"topic": "x"}, "id": f"c{turn}-{n}"}
                        ],
                    )
                    for n in range(args.tool_calls)
                ),
                AIMessage(sentence(self.rng, 10, 30)),
            ]
        ]
        self.folder = tempfile.TemporaryDirectory()
        shutil.copytree(template, Path(self.folder.name) / "mem")
        self.memory = ContextMemory(Path(self.folder.name) / "mem")
        middleware = CtxBudgetMiddleware(
            model="gpt-4o", budget=8192, reserve=1024, memory=self.memory, values=VARIANTS[name]
        )
        self.agent = create_agent(
            ToolFake(messages=iter(answers)),
            tools=[lookup] if args.tool_calls else [],
            middleware=[middleware],
            store=CtxBudgetStore(self.memory, user_at=1),
        )
        self.state = list(history[-args.state :])
        self.keep = args.state
        self.times: list[float] = []
        self.cpu: list[float] = []  # this process's CPU time (all its threads) in the turn

    def turn(self, number: int) -> None:
        messages = [*self.state, HumanMessage(sentence(self.rng, 6, 30), id=f"q{number}")]
        config = {"configurable": {"thread_id": "s1", "user_id": "u1"}}
        start, cpu = time.perf_counter(), time.process_time()
        result = self.agent.invoke({"messages": messages}, config)
        took = (time.perf_counter() - start) * 1000.0
        cpu = (time.process_time() - cpu) * 1000.0
        self.state = list(result["messages"])[-self.keep :]
        if number >= 2:  # the first turns load the model and warm the caches
            self.times.append(took)
            self.cpu.append(cpu)
        self.memory.flush()

    def close(self) -> None:
        self.memory.close()
        self.folder.cleanup()


def values_searches(template: Path, repeat: int) -> list[float]:
    """ms of one search of the user's values with a new query (no cache helps)."""
    with tempfile.TemporaryDirectory() as root:
        shutil.copytree(template, Path(root) / "mem")
        memory = ContextMemory(Path(root) / "mem")
        rng = random.Random(23)
        memory.search_values(("memories", "u1"), query="warm up", limit=5, user_id="u1")
        times = []
        for _ in range(repeat):
            query = f"{sentence(rng, 6, 30)} {rng.random()}"
            start = time.perf_counter()
            memory.search_values(("memories", "u1"), query=query, limit=5, user_id="u1")
            times.append((time.perf_counter() - start) * 1000.0)
        memory.close()
    return times


def p50(xs: list[float]) -> float:
    return statistics.median(xs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--history", type=int, default=400)
    parser.add_argument("--state", type=int, default=20)
    parser.add_argument("--values", type=int, default=200)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--tool-calls", type=int, default=1)
    args = parser.parse_args()
    history = conversation(args.history, random.Random(3))
    with tempfile.TemporaryDirectory() as root:
        template = template_folder(Path(root), history, args.values)
        began = load()
        variants = [Variant(name, template, history, args) for name in VARIANTS]
        erng = random.Random(19)
        embeddings = []
        for number in range(args.turns + 2):
            shift = number % len(variants)
            for variant in variants[shift:] + variants[:shift]:
                variant.turn(number)
            if number >= 2:
                embeddings.append(one_embedding(erng))
        for variant in variants:
            variant.close()
        searches = values_searches(template, args.turns)
        ended = load()
    calls = 1 + args.tool_calls
    print(
        f"{args.history} messages, {args.values} items per namespace, {args.turns} turns of "
        f"{calls} model calls; load {began} -> {ended}"
    )
    base, base_cpu = p50(variants[0].times), p50(variants[0].cpu)
    print(f"{'variant':36} {'turn p50 ms':>11} {'p90 ms':>7} {'+ms':>7} {'CPU p50':>8} {'+CPU':>7}")
    for variant in variants:
        times = sorted(variant.times)
        p90 = times[int(0.9 * (len(times) - 1))]
        cpu = p50(variant.cpu)
        print(
            f"{variant.name:36} {p50(times):11.1f} {p90:7.1f} {p50(times) - base:+7.1f} "
            f"{cpu:8.1f} {cpu - base_cpu:+7.1f}"
        )
    print(f"one search_values (query, k=5) p50 {p50(searches):.1f} ms (would be per model call)")
    print(f"one query embedding p50 {p50(embeddings):.1f} ms")


if __name__ == "__main__":
    main()
