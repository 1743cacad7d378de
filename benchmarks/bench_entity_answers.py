"""A model-backed entity extractor: what an assembly waits for, asked when read vs when stored.

A chat loop over one session, with entity memory on and a stand-in for a model as the
extractor (the only fake: its latency is ``--call`` ms per request plus ``--per`` ms per
message, slept, as a model's grows with what it reads). Each turn stores the user's message,
assembles (timed), then stores the assistant's reply, and the user then takes ``--think`` ms
before the next message. Two memories run the same loop, turn by turn alternately so both see
the same machine load:

- **when read** (the baseline, as before): the extractor is asked at the first assembly after
  new messages (`EntityIndexes.prepare` turned into a no-op for this memory);
- **when stored**: `ContextMemory.add_messages` hands messages to the extractor on a thread of
  its own; an assembly awaits what is being asked and asks about what is still queued.

It reports the median and p95 ``assemble`` ms of each (the first turn, which loads the
embedding model, left out), their ratio, and how many messages each asked about: each once, and
when read the last reply is never asked about (no assembly reads it).

Run: .venv/bin/python benchmarks/bench_entity_answers.py [--turns 30] [--call 150] [--per 60]
     [--think 400]
"""

from __future__ import annotations

import os

os.environ["ANONYMIZED_TELEMETRY"] = "False"
os.environ["ORT_DISABLE_TELEMETRY"] = "1"
os.environ["HF_HUB_OFFLINE"] = "1"

import argparse
import random
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from _common import machine, pct, sentence

from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.entities import Mention
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.store.chroma_store import ChromaStore

PEOPLE = ["Caroline", "Melanie", "Jon", "Gina", "Deborah", "Lisbon", "Porto", "Nordic Freight"]


class Model:
    """Names the capitalized names it knows, after sleeping like a model would."""

    def __init__(self, call: float, per: float) -> None:
        self.call, self.per = call, per
        self.asked = 0
        self.lock = threading.Lock()

    def extract(self, texts: Sequence[str], *, speakers: Sequence[str | None]) -> object:
        time.sleep(self.call + self.per * len(texts))
        with self.lock:
            self.asked += len(texts)
        return [[Mention(n) for n in PEOPLE if n in t] for t in texts]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--call", type=float, default=150.0, help="ms per extractor request")
    parser.add_argument("--per", type=float, default=60.0, help="ms per message in a request")
    parser.add_argument("--think", type=float, default=400.0, help="ms between turns")
    args = parser.parse_args()
    print(f"# {machine()}; load average {os.getloadavg()[0]:.2f}")
    print(
        f"# {args.turns} turns; extractor {args.call:.0f} ms + {args.per:.0f} ms per message; "
        f"{args.think:.0f} ms between turns"
    )
    folder = Path(tempfile.mkdtemp(prefix="bench-entity-answers-"))
    config = MemoryConfig(entities=True)
    models = {k: Model(args.call / 1e3, args.per / 1e3) for k in ("read", "stored")}
    memories = {
        k: ContextMemory(store=ChromaStore(folder / k), config=config, entity_extractor=models[k])
        for k in models
    }
    memories["read"]._entities.prepare = lambda records: None  # type: ignore[method-assign]
    rng = random.Random(5)
    waits: dict[str, list[float]] = {k: [] for k in models}
    try:
        for turn in range(args.turns):
            said = f"{rng.choice(PEOPLE)} {sentence(rng, 6, 18).lower()}"
            reply = f"About {rng.choice(PEOPLE)}: {sentence(rng, 8, 24).lower()}"
            order = list(models) if turn % 2 == 0 else list(reversed(models))
            for key in order:
                memory = memories[key]
                memory.add_message("s1", "user", said)
                started = time.perf_counter()
                memory.assemble("s1", said, budget=1500)
                waits[key].append((time.perf_counter() - started) * 1e3)
                memory.add_message("s1", "assistant", reply)
            time.sleep(args.think / 1e3)
    finally:
        for memory in memories.values():
            memory.close()
        shutil.rmtree(folder, ignore_errors=True)
    print("| extractor asked | assemble p50 ms | p95 ms | messages asked about |")
    print("|---|---:|---:|---:|")
    for key, label in (("read", "when read (before)"), ("stored", "when stored")):
        w = waits[key][1:]  # the first turn loads the model files
        print(
            f"| {label} | {statistics.median(w):.0f} | {pct(w, 0.95):.0f} | "
            f"{models[key].asked} of {2 * args.turns} |"
        )
    ratio = statistics.median(waits["stored"][1:]) / statistics.median(waits["read"][1:])
    print(f"# median ratio when stored / when read: {ratio:.2f}; load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
