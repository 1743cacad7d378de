"""Async `ContextMemory` under 20 concurrent conversations: the event loop's lag and throughput.

Each conversation is a session already holding ``--history`` messages; a turn stores the user's
question, assembles the context for it (``--budget`` tokens) and stores an answer, as a chat
backend does. Side by side in one run, on one store:

- **async**: every conversation a task on one event loop (``aadd_message``, ``aassemble``),
  while a ticker task sleeps 1 ms at a time; its lag (how late each tick wakes) is what every
  other request on that loop would wait. Target: p99 under 20 ms.
- **threads**: the same turns through the sync API from one thread per conversation (no loop).
- **async, N workers**: the async run again with ``--workers`` threads per memory (the default
  is ``ctxbudget.memory.awaitable.ASYNC_WORKERS``).

Each on an embedded store and on a ``chroma run`` server serving a copy of the same folder
(``--backends``; the server's memory journals in a local folder, ``write_behind=``).
Reports turns per second, a turn's p50/p95, and the ticker's lag p50/p99/max, with the load.
The sessions are built once into ``--cache`` (the real default embedder; every session holds
the same lines, embedded once).

``--ingest N`` (issue 40) measures something else: the loop's lag while one ``aadd_messages``
stores N new messages of a new session into a new embedded store (the default: write-behind,
the default embedder), then ``aflush``; with writes to Chroma in calls of at most 16 or 64
records and unbounded (the default; ``--bounds``, `mechanisms.write_batch`), interleaved, ``--rounds`` times each. Reports each variant's lag
p50/p99/max by tick, the p99 by time (each tick weighted by how long it lasted: what a request
arriving at a random moment meets), the share of the run the loop was stalled over 20 ms, and
messages per second (medians over the rounds), with the load before and after.

``--write-bounds none,sync100,...`` (issue 40) runs only the embedded async (default) variant,
under each change a token names (`_async_variants`: records per write call, the context log's
calls, spacing of the background writers' calls, Chroma's index sync interval, paged session
reads), interleaved ``--rounds`` times on copies of the same sessions; ``--log`` turns the
context log on (the memory's default; off elsewhere here). Reports per variant the lag p50/p99/
max by tick, the p99 by time, the share stalled over 20 ms and turns/s, with the load;
``--stalls`` also times every Chroma call (`Connection.call`, by action, caller and thread) and
embedder call, and gives the stalled time to what ran then (`_async_stalls`).

Run: nice -n 5 .venv/bin/python benchmarks/bench_async.py [--conversations 20] [--history 2000]
     [--turns 10] [--workers 4] [--cache /tmp/async-cache]
     .venv/bin/python benchmarks/bench_async.py --ingest 2000 [--rounds 5]
     .venv/bin/python benchmarks/bench_async.py --write-bounds none,16,sync100 [--rounds 3]
     [--log] [--stalls]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from _async_stalls import lag_summary, load, write_bounds
from _common import machine, pct, sentence
from mechanisms import write_batch

from ctxbudget import ContextMemory
from ctxbudget.embed.base import default_embedder
from ctxbudget.memory import awaitable
from ctxbudget.store import writes
from ctxbudget.testing import ChromaServer


def build(folder: Path, conversations: int, history: int) -> None:
    """``conversations`` sessions of ``history`` messages each, stored and flushed."""
    marker = folder / f"built-{conversations}-{history}"
    if marker.exists():
        return
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    model = default_embedder()
    known: dict[str, list[float]] = {}

    def embed(texts: list[str]) -> list[list[float]]:  # every session says the same lines
        new = [t for t in dict.fromkeys(texts) if t not in known]
        known.update(zip(new, model.embed_documents(new), strict=True))
        return [known[t] for t in texts]

    with ContextMemory(folder / "store", embedder=embed, inclusion_log=False) as memory:
        for c in range(conversations):
            rng = random.Random(5)
            lines = [
                {
                    "role": ("user", "assistant")[i % 2],
                    "content": sentence(rng, 6, 40),
                    "timestamp": 1.7e9 + 60 * i,
                }
                for i in range(history)
            ]
            memory.add_messages(f"c{c}", lines, user_id=f"u{c}", progress=False)
            print(f"  built conversation {c + 1}/{conversations}", flush=True)
        memory.flush()
    marker.touch()


def copy_store(cache: Path) -> Path:
    where = Path(tempfile.mkdtemp(prefix="bench-async-"))
    shutil.copytree(cache / "store", where / "store")
    return where


def open_memory(folder: Path, url: str | None, log: bool = False) -> ContextMemory:
    """The embedded store in ``folder``, or the server at ``url`` (journal in ``folder``)."""
    if url is None:
        return ContextMemory(folder / "store", inclusion_log=log)
    return ContextMemory(chroma_url=url, write_behind=folder / "journal", inclusion_log=log)


async def async_run(
    folder: Path,
    conversations: int,
    turns: int,
    budget: int,
    workers: int | None,
    url: str | None,
    log: bool = False,
) -> dict[str, list[float]]:
    memory = open_memory(folder, url, log)
    if workers is not None:
        memory._async = awaitable.AsyncRunner(workers)  # noqa: SLF001 - the variant measured
    lags: list[float] = []
    starts: list[float] = []  # each tick's start (perf_counter s): `_async_stalls.attribute`
    done = asyncio.Event()

    async def ticker() -> None:
        while not done.is_set():
            start = time.perf_counter()
            await asyncio.sleep(0.001)
            starts.append(start)
            lags.append((time.perf_counter() - start) * 1000.0 - 1.0)

    async def conversation(c: int) -> list[float]:
        rng = random.Random(c)
        times = []
        for turn in range(turns):
            question = sentence(rng, 6, 20)
            start = time.perf_counter()
            await memory.aadd_message(f"c{c}", "user", question, user_id=f"u{c}")
            await memory.aassemble(f"c{c}", question, budget=budget, user_id=f"u{c}")
            await memory.aadd_message(f"c{c}", "assistant", sentence(rng, 10, 30), user_id=f"u{c}")
            if turn:  # the first turn reads each session into memory
                times.append((time.perf_counter() - start) * 1000.0)
        return times

    # Warm the model and the session copies first, then measure.
    await memory.aassemble("c0", "warm up", budget=budget, user_id="u0")
    tick = asyncio.create_task(ticker())
    start = time.perf_counter()
    per = await asyncio.gather(*(conversation(c) for c in range(conversations)))
    wall = time.perf_counter() - start
    done.set()
    await tick
    await memory.aclose()
    turns_all = [t for times in per for t in times]
    return {
        "turns": turns_all,
        "lag": lags,
        "starts": starts,
        "rate": [len(turns_all) / wall],
        "wall": [wall],
    }


def thread_run(
    folder: Path, conversations: int, turns: int, budget: int, url: str | None
) -> dict[str, list[float]]:
    memory = open_memory(folder, url)
    memory.assemble("c0", "warm up", budget=budget, user_id="u0")
    per: list[list[float]] = [[] for _ in range(conversations)]

    def conversation(c: int) -> None:
        rng = random.Random(c)
        for turn in range(turns):
            question = sentence(rng, 6, 20)
            start = time.perf_counter()
            memory.add_message(f"c{c}", "user", question, user_id=f"u{c}")
            memory.assemble(f"c{c}", question, budget=budget, user_id=f"u{c}")
            memory.add_message(f"c{c}", "assistant", sentence(rng, 10, 30), user_id=f"u{c}")
            if turn:
                per[c].append((time.perf_counter() - start) * 1000.0)

    threads = [threading.Thread(target=conversation, args=(c,)) for c in range(conversations)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    memory.close()
    turns_all = [t for times in per for t in times]
    return {"turns": turns_all, "lag": [], "rate": [len(turns_all) / wall]}


async def ingest_run(folder: Path, messages: int) -> dict[str, float]:
    """Lag and rate while ``aadd_messages`` stores ``messages`` new messages, then ``aflush``."""
    memory = ContextMemory(folder / "store", inclusion_log=False)
    await memory.aadd_message("warm", "user", "warm up", user_id="w")  # the model, the store
    await memory.aflush()
    rng = random.Random(3)
    lines = [
        {
            "role": ("user", "assistant")[i % 2],
            "content": sentence(rng, 6, 40),
            "timestamp": 1.7e9 + 60 * i,
        }
        for i in range(messages)
    ]
    lags: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        while not done.is_set():
            start = time.perf_counter()
            await asyncio.sleep(0.001)
            lags.append((time.perf_counter() - start) * 1000.0 - 1.0)

    tick = asyncio.create_task(ticker())
    start = time.perf_counter()
    await memory.aadd_messages("s", lines, user_id="u", progress=False)
    await memory.aflush()
    wall = time.perf_counter() - start
    done.set()
    await tick
    await memory.aclose()
    return {**lag_summary(lags, wall), "rate": messages / wall}


def ingest(messages: int, rounds: int, bounds: list[int | None]) -> None:
    """The ingest table: writes in Chroma calls of each bound (None: unbounded), interleaved.

    `ctxbudget.store.writes.EMBEDDED_WRITE_BATCH` is the default bound (None: unbounded).
    """
    default = writes.EMBEDDED_WRITE_BATCH
    names = {
        bound: ("unbounded" if bound is None else f"bound {bound}")
        + (" (default)" if bound == default else "")
        for bound in bounds
    }
    reference = default if default in bounds else bounds[0]  # the rates' reference
    results: dict[int | None, list[dict[str, float]]] = {bound: [] for bound in bounds}
    before = load()
    for r in range(rounds):
        for bound in bounds if r % 2 == 0 else list(reversed(bounds)):
            folder = Path(tempfile.mkdtemp(prefix="bench-ingest-"))
            try:
                with write_batch(bound):
                    result = asyncio.run(ingest_run(folder, messages))
            finally:
                shutil.rmtree(folder, ignore_errors=True)
            results[bound].append(result)
            print(
                f"  round {r + 1}, {names[bound]}: lag p50 {result['p50']:.1f}, p99 "
                f"{result['p99']:.1f}, by time p99 {result['timed_p99']:.1f}, max "
                f"{result['max']:.1f} ms; {result['stalled']:.0f}% stalled; "
                f"{result['rate']:.0f} msg/s; load {load()}",
                flush=True,
            )
    med = {
        bound: {key: statistics.median(x[key] for x in runs) for key in runs[0]}
        for bound, runs in results.items()
    }
    print(
        f"\n## Loop lag while aadd_messages stores {messages:,} messages (embedded, write-behind),"
        f" medians of {rounds} interleaved rounds; load {before} before, {load()} after\n"
    )
    print(
        "| Chroma call of a write | lag p50 ms | p99 ms (by tick) | p99 ms (by time) | max ms "
        f"| time stalled > 20 ms | messages/s | rate / {names[reference]}'s |"
    )
    print("|---|--:|--:|--:|--:|--:|--:|--:|")
    first = med[reference]["rate"]
    for bound, m in med.items():
        print(
            f"| {names[bound]} | {m['p50']:.1f} | {m['p99']:.1f} | {m['timed_p99']:.1f} | "
            f"{m['max']:.1f} | {m['stalled']:.0f}% | {m['rate']:.0f} | {m['rate'] / first:.2f} |"
        )


def row(name: str, result: dict[str, list[float]]) -> str:
    turns, lag = result["turns"], result["lag"]
    lags = (
        f"{statistics.median(lag):.1f} | {pct(lag, 0.99):.1f} | {max(lag):.1f}"
        if lag
        else "- | - | -"
    )
    return (
        f"| {name} | {result['rate'][0]:.1f} | {statistics.median(turns):.0f} | "
        f"{pct(turns, 0.95):.0f} | {lags} | {load()} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--conversations", type=int, default=20)
    parser.add_argument("--history", type=int, default=2000, help="messages per session")
    parser.add_argument("--turns", type=int, default=10, help="turns per conversation")
    parser.add_argument("--budget", type=int, default=4096)
    parser.add_argument("--workers", type=int, default=4, help="the second async variant's")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "async-cache")
    parser.add_argument("--backends", default="embedded,server", help="comma list")
    parser.add_argument("--ingest", type=int, default=0, help="messages: the ingest table")
    parser.add_argument("--rounds", type=int, default=5, help="of --ingest, per variant")
    parser.add_argument(
        "--bounds", default="16,64,none", help="of --ingest: records per Chroma call, or none"
    )
    parser.add_argument(
        "--write-bounds",
        default="",
        help="the embedded async run's variants, interleaved --rounds times: none,16,8,4 "
        "(records per write call), allN, spaceN, switchN (_async_stalls.variant)",
    )
    parser.add_argument("--stalls", action="store_true", help="of --write-bounds: their causes")
    parser.add_argument("--log", action="store_true", help="of --write-bounds: context log on")
    args = parser.parse_args()
    print(machine())
    if args.write_bounds:
        build(args.cache, args.conversations, args.history)

        def embedded_run(folder: Path) -> Coroutine[Any, Any, dict[str, list[float]]]:
            turns, budget = args.turns, args.budget
            return async_run(folder, args.conversations, turns, budget, None, None, args.log)

        write_bounds(
            args, args.write_bounds.split(","), lambda: copy_store(args.cache), embedded_run
        )
        return
    if args.ingest:
        bounds = [None if b == "none" else int(b) for b in args.bounds.split(",")]
        ingest(args.ingest, args.rounds, bounds)
        return
    build(args.cache, args.conversations, args.history)
    rows = []
    variants = [
        (f"async ({awaitable.ASYNC_WORKERS} workers, default)", None),
        ("threads (sync API)", "threads"),
        (f"async ({args.workers} workers)", args.workers),
    ]
    for backend in args.backends.split(","):
        for name, variant in variants:
            folder = copy_store(args.cache)
            server = None
            if backend == "server":  # the same folder, served by `chroma run`
                server = ChromaServer(folder / "server")
                shutil.move(folder / "store", server.data)
                server.start()
            url = None if server is None else server.url
            try:
                if variant == "threads":
                    result = thread_run(folder, args.conversations, args.turns, args.budget, url)
                else:
                    workers = variant if isinstance(variant, int) else None
                    run = async_run(
                        folder, args.conversations, args.turns, args.budget, workers, url
                    )
                    result = asyncio.run(run)
            finally:
                if server is not None:
                    server.stop()
                shutil.rmtree(folder, ignore_errors=True)
            rows.append(row(f"{backend}: {name}", result))
            print(rows[-1], flush=True)
    print(
        f"\n## {args.conversations} conversations at once, sessions of {args.history:,} messages, "
        f"{args.turns} turns each (store question, assemble {args.budget:,} tokens, store answer)\n"
    )
    print("| variant | turns/s | turn p50 ms | p95 ms | loop lag p50 ms | p99 ms | max ms | load |")
    print("|---|--:|--:|--:|--:|--:|--:|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
