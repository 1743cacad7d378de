"""Entities in documents: what indexing adds to `add_documents`, and what a call pays to use it.

Two embedded stores (folders of their own) get the same documents, in batches that alternate
between them so both see the same machine load: one memory with `MemoryConfig(entities=True)`
(each chunk's entities indexed as it is stored), one without (the baseline). Every document is
one chunk of synthetic prose naming two or three of ``--names`` synthetic people and firms, so
each name is in about ``chunks * 2.5 / names`` chunks. For each corpus size (``--sizes``, the
stores grow from one to the next), the script reports:

- ``add_documents`` ms per chunk, entities on and off, and their ratio;
- ``candidates`` of ``--queries`` questions naming one entity (on, off, alternating), median ms;
- the documents' part alone (`document_matches`: the index lookup by id and the chunks read),
  median ms: what the scale promise is about, so it must stay flat as the corpus grows;
- how often the chunks naming the asked entity are among the candidates (on and off).

Run: .venv/bin/python benchmarks/bench_doc_entities.py [--sizes 1000,10000] [--names 400]
     [--queries 60]
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
import time
from pathlib import Path

from _common import machine, sentence

from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.entities.documents import document_matches
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.store.chroma_store import ChromaStore

_SYLLABLES = ["ka", "lo", "mi", "ren", "sa", "tor", "vel", "dun", "pra", "quin", "zo", "mar"]
_BATCH = 500


def name(rng: random.Random) -> str:
    def word() -> str:
        return "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3))).title()

    return f"{word()} {word()}" + (" Labs" if rng.random() < 0.3 else "")


def document(rng: random.Random, names: list[str]) -> tuple[str, list[str]]:
    chosen = rng.sample(names, rng.randint(2, 3))
    parts = [sentence(rng, 8, 20)]
    for who in chosen:
        parts.append(f"{who} {sentence(rng, 5, 12).lower()}")
    return " ".join(parts), chosen


def loadavg() -> str:
    path = Path("/proc/loadavg")
    return " ".join(path.read_text().split()[:3]) if path.exists() else "n/a"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--names", type=int, default=400)
    parser.add_argument("--queries", type=int, default=60)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rng = random.Random(5)
    names = sorted({name(rng) for _ in range(args.names * 2)})[: args.names]
    root = Path(tempfile.mkdtemp(prefix="bench-doc-entities-"))
    memories = {
        flag: ContextMemory(
            store=ChromaStore(root / flag),
            config=MemoryConfig(entities=flag == "on"),
            inclusion_log=False,
        )
        for flag in ("on", "off")
    }
    print(machine())
    print(f"names {len(names)}, load before {loadavg()}")
    stored = 0
    naming: dict[str, set[str]] = {n: set() for n in names}
    try:
        for size in sizes:
            add_ms: dict[str, list[float]] = {"on": [], "off": []}
            while stored < size:
                batch = []
                for _ in range(min(_BATCH, size - stored)):
                    text, chosen = document(rng, names)
                    doc_id = f"d{stored}"
                    batch.append((doc_id, text))
                    for who in chosen:
                        naming[who].add(f"{doc_id}#0")
                    stored += 1
                for flag in ("on", "off") if len(add_ms["on"]) % 2 == 0 else ("off", "on"):
                    start = time.perf_counter()
                    memories[flag].add_documents(batch, collection="kb", progress=False)
                    add_ms[flag].append((time.perf_counter() - start) * 1000 / len(batch))
            session = f"s{size}"
            for memory in memories.values():
                memory.add_message(session, "user", "Hello, I have questions about our partners.")
            named = [n for n in names if naming[n]]  # asked: names some chunk holds
            asked = [rng.choice(named) for _ in range(args.queries)]
            call: dict[str, list[float]] = {"on": [], "off": []}
            found: dict[str, int] = {"on": 0, "off": 0}
            lookup: list[float] = []
            for n, who in enumerate(asked):
                query = f"What do the documents say about {who}?"
                for flag in ("on", "off") if n % 2 == 0 else ("off", "on"):
                    memory = memories[flag]
                    start = time.perf_counter()
                    got = memory.candidates(session, query, budget=2000)
                    call[flag].append((time.perf_counter() - start) * 1000)
                    ids = {it.id.split('","')[-1].rstrip('"]') for it in got.retrieved}
                    found[flag] += bool(naming[who] & ids)
                on = memories["on"]
                start = time.perf_counter()
                document_matches(on.store, on.namespace, query, True, on.config)
                lookup.append((time.perf_counter() - start) * 1000)
            on_add, off_add = (statistics.median(add_ms[f]) for f in ("on", "off"))
            on_call, off_call = (statistics.median(call[f]) for f in ("on", "off"))
            print(f"\n== {size:,} chunks (load {loadavg()})")
            print(
                f"add_documents ms/chunk: on {on_add:.2f}, off {off_add:.2f}, "
                f"ratio {on_add / off_add:.2f}"
            )
            print(
                f"candidates median ms: on {on_call:.1f}, off {off_call:.1f}, "
                f"ratio {on_call / off_call:.2f}"
            )
            print(f"document_matches median ms: {statistics.median(lookup):.2f}")
            print(
                f"a chunk naming the asked entity among candidates: on {found['on']}/{len(asked)},"
                f" off {found['off']}/{len(asked)}"
            )
    finally:
        for memory in memories.values():
            memory.close()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
