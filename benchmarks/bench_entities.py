"""Entity memory: what the built-in extractor costs per message, and what `assemble` costs with
`MemoryConfig(entities=True)` against without, on a LoCoMo conversation.

1. extraction: `RuleExtractor` over every turn of the LoCoMo dev conversations (CPU time per
   message), and over one 20,000-character message;
2. a session's entities from scratch (`EntityIndex` over the conversation, then names merged);
3. `assemble` of each question of one conversation, p50 over the questions, entities off and
   on (the same store, the same questions, warm).

Run: .venv/bin/python benchmarks/bench_entities.py [--conversation 0] [--budget 4096]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from _common import add_locomo_argument, machine, require_locomo, summary, timed

from ctxbudget.eval.locomo import load_locomo
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.entities import RuleExtractor
from ctxbudget.memory.entities.index import EntityIndex
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.store.chroma_store import ChromaStore
from ctxbudget.store.records import Record


class _Copy:
    """What `EntityIndex.catch_up` reads of a session's index: its records and authors."""

    def __init__(self, records: list[Record], authors: list[str | None]) -> None:
        self.records = records
        self.authors = authors


def main() -> None:
    parser = argparse.ArgumentParser()
    add_locomo_argument(parser)
    parser.add_argument("--conversation", type=int, default=0)
    parser.add_argument("--budget", type=int, default=4096)
    parser.add_argument("--questions", type=int, default=60)
    args = parser.parse_args()
    data = load_locomo(require_locomo(args.locomo))
    print(machine())

    turns = [t for c in data.conversations for t in c.turns]
    rules = RuleExtractor()
    texts, speakers = [t.text for t in turns], [t.speaker for t in turns]
    rules.extract(texts[:100], speakers=speakers[:100])
    runs = timed(lambda: rules.extract(texts, speakers=speakers), 5, cpu=True)
    print(
        f"extraction: {len(texts)} LoCoMo turns, mean {statistics.mean(map(len, texts)):.0f} "
        f"characters: {1000 * min(runs) / len(texts):.1f} us per message (CPU, best of 5)"
    )
    long = " ".join(texts)[:20_000]
    print(
        f"extraction of one 20,000-character message: {summary(timed(lambda: rules.mentions(long), 20, cpu=True))}"
    )

    conversation = data.conversations[args.conversation]
    first = conversation.speakers[0]
    records = [
        Record(
            id=t.dia_id,
            kind="message",
            text=t.text,
            session_id="c",
            role="user" if t.speaker == first else "assistant",
            seq=n,
            timestamp=t.timestamp,
        )
        for n, t in enumerate(conversation.turns)
    ]
    copy = _Copy(records, [t.speaker for t in conversation.turns])

    def build() -> None:
        index = EntityIndex(rules, None)
        index.catch_up(copy)  # type: ignore[arg-type]
        index.resolved()

    print(
        f"a session's entities from scratch ({len(records)} turns): "
        f"{summary(timed(build, 10, cpu=True))}"
    )

    root = Path(tempfile.mkdtemp(prefix="bench-entities-"))
    try:
        store = ChromaStore(root / "db")
        off = ContextMemory(store=store, config=MemoryConfig())
        off.add_messages(
            "c",
            [
                {
                    "id": t.dia_id,
                    "role": "user" if t.speaker == first else "assistant",
                    "text": t.text,
                    "name": t.speaker,
                    "timestamp": t.timestamp,
                }
                for t in conversation.turns
            ],
            progress=False,
        )
        off.flush()
        on = ContextMemory(store=store, config=MemoryConfig(entities=True))
        questions = [q.question for q in conversation.questions[: args.questions]]
        for memory in (off, on):
            memory.assemble("c", questions[0], budget=args.budget, format="compact")  # warm
        results: dict[str, list[float]] = {"off": [], "on": []}
        cpu: dict[str, list[float]] = {"off": [], "on": []}
        for question in questions:  # interleaved, so both see the same machine load
            for name, memory in (("off", off), ("on", on)):
                clock, used = time.perf_counter(), time.process_time()
                memory.assemble("c", question, budget=args.budget, format="compact")
                cpu[name].append((time.process_time() - used) * 1000.0)
                results[name].append((time.perf_counter() - clock) * 1000.0)
        for name, samples in results.items():
            print(
                f"assemble, entities {name} ({conversation.sample_id}, budget {args.budget}): "
                f"wall {summary(samples)}; CPU p50 {statistics.median(cpu[name]):.2f} ms"
            )
        cards = on.candidates("c", questions[0], budget=args.budget).entities
        print(f"e.g. {questions[0]!r}: {len(cards)} entity items offered")
        on.close()
        off.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
