"""What looking for newer statements costs one `ContextMemory.assemble` (issue 42, item 3).

One LoCoMo conversation (the first of the file given, kept outside the repository) is stored
once in an embedded store; its questions are assembled (compact format) under each budget with
`MemoryConfig(newer_statements=True)` (the default) and ``False``, interleaved, timing the
process CPU of each call (a shared machine's wall clock says little). It also counts how many
retrieved candidates name a successor (`ContextItem.newer`).

Run: .venv/bin/python benchmarks/bench_newer.py /work/shared/data/locomo/locomo_dev.json
     [--questions 60] [--budgets 1000,8000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

from _common import machine

from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.store.chroma_store import ChromaStore


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("data")
    parser.add_argument("--questions", type=int, default=60)
    parser.add_argument("--budgets", default="1000,8000")
    args = parser.parse_args()
    with open(args.data, encoding="utf-8") as handle:
        first = json.load(handle)[0]
    conversation = first["conversation"]
    messages = []
    number = 1
    while f"session_{number}" in conversation:
        for turn in conversation[f"session_{number}"]:
            name = turn["speaker"].replace(" ", "_")
            messages.append(
                {"id": turn["dia_id"], "role": "user", "content": turn["text"], "name": name}
            )
        number += 1
    questions = [q["question"] for q in first["qa"]][: args.questions]
    with tempfile.TemporaryDirectory() as folder:
        store = ChromaStore(folder)
        memories = {
            "on": ContextMemory(store=store, inclusion_log=False, write_behind=False),
            "off": ContextMemory(
                store=store,
                config=MemoryConfig(newer_statements=False),
                inclusion_log=False,
                write_behind=False,
            ),
        }
        memories["on"].add_messages("c", messages, progress=False)
        print(
            f"{machine()}, load {os.getloadavg()[0]:.1f}; {len(messages)} turns, {len(questions)} questions"
        )
        for budget in [int(b) for b in args.budgets.split(",")]:
            times: dict[str, list[float]] = {"on": [], "off": []}
            for memory in memories.values():
                for question in questions[:3]:
                    memory.assemble("c", question, budget=budget, format="compact")
            for _ in range(2):
                for name, memory in memories.items():
                    for question in questions:
                        start = time.process_time()
                        memory.assemble("c", question, budget=budget, format="compact")
                        times[name].append((time.process_time() - start) * 1000)
            on, off = statistics.median(times["on"]), statistics.median(times["off"])
            linked = sum(
                1
                for q in questions
                for it in memories["on"].candidates("c", q, budget=budget).retrieved
                if it.newer
            )
            print(
                f"budget {budget:,}: CPU p50 on {on:.2f} ms, off {off:.2f} ms ({on - off:+.2f}); "
                f"candidates naming a successor: {linked} over {len(questions)} questions"
            )
        for memory in memories.values():
            memory.close()
        store.close()


if __name__ == "__main__":
    main()
