"""Scale: does the cost of one `assemble` depend on its own session, or on everything stored?

One probe user (5 sessions x 200 messages, a few facts planted early in each session) is stored
alone (the baseline: 1,000 records) and together with thousands of other users (100, 200 or
300 messages each, in sessions of up to 200) in stores of ``--sizes`` records in total. For
each backend, embedded (a folder per store) and ``chroma run`` servers (started by this script
on 127.0.0.1 on free ports, one per store folder, stopped after), every store is opened at once
and the script times ``ContextMemory.assemble(session, query, budget=4096)`` for the probe
user's latest session over ``--queries`` distinct queries (facts and generic questions),
interleaved: query by query, each store in turn, so the machine's load weighs on every size
alike. The first call on each freshly opened store is shown apart ("first"), then p50 and p95
of the others, the ratio of p50 to the single-user store's p50 on the same backend, the build
time and ``os.getloadavg()`` at the end of the measurement.

Then, for the single-user store and the largest one, it counts the Chroma calls one assemble
makes and their time per kind (``collection.method[where fields]``), from the chromadb
``Collection`` methods wrapped for a few extra assembles (the timed ones are not wrapped).

With ``--embedder hash`` (the default), embeddings are free and deterministic (a seeded
pseudo-random unit vector of 384 dimensions per text) so only storage and assembly are
measured: retrieval finds nothing by meaning, only by the words of the session's BM25 index.
``--embedder default`` uses ctxbudget's default embedder (each query embedded on every call).
Stores are written with `ChromaStore.add` in batches of ``--batch`` records (with their token
counts, as ``ContextMemory`` stores them), streamed; with ``--cache DIR`` they are kept in
DIR/scale-<size> and reused (building 500,000 records takes about 40 minutes).

With ``--mechanisms all`` (or a comma list of session-copy, incremental, query-vectors,
layouts), each store is assembled from by memories with one speed mechanism off
(`mechanisms.py`) beside the default one, all interleaved (query by query, each store, each variant in turn): then a table of
each mechanism on and off per size, and of each variant's p50 at the largest size over its p50 at
1,000 records (the default output is not printed then).

With ``--workers N`` (server backend only), size by size, a copy of each store (the workers
write: the cache stays as built) is served by ``chroma run`` and the probe's assembles are
timed alone and with N worker processes writing and assembling for other users on the same
server, in alternating blocks (``_scale_workers.py``): a table of p50 and p95 alone and with,
their ratios, the workers' turns per second, the load average; and where the extra time goes
(in the Chroma calls or outside them, against a pure-CPU loop's slowdown). ``--other-server``
adds the same workers on a second server (the machine's contention only) and on the probe's
server in a collection of their own (the server shared, not the collection). ``--probe-user``:
the probe names its user (``assemble(..., user_id=)``), as the workers and most apps do.

Run: nice -n 5 .venv/bin/python benchmarks/bench_scale.py --sizes 10000,100000,500000
     --cache /tmp/scale-cache [--backends embedded,server] [--queries 30] [--batch 5000]
     [--embedder hash|default] [--mechanisms all]
     [--workers 4 [--blocks 6] [--other-server] [--probe-user]]
(a smoke run: --sizes 2000,5000 --backends embedded).
"""

from __future__ import annotations

import os

os.environ["ANONYMIZED_TELEMETRY"] = "False"
os.environ["ORT_DISABLE_TELEMETRY"] = "1"
os.environ["HF_HUB_OFFLINE"] = "1"

import argparse
import json
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import chromadb
from _common import (
    WORDS,
    ChromaCalls,
    HashEmbedder,
    counting_chroma_calls,
    machine,
    pct,
    sentence,
)
from _scale_workers import Server, WorkerSpec, WorkersResult, measure, tables
from mechanisms import (
    FreshIndexes,
    NoQueryVectors,
    Pair,
    WholeWindow,
    no_shared_layouts,
    on_off_table,
)

from ctxbudget.embed.base import Embedder, default_embedder
from ctxbudget.errors import CtxBudgetError
from ctxbudget.memory.context import ContextMemory
from ctxbudget.store.chroma_store import LAYOUT_VERSION, ChromaStore, Record
from ctxbudget.testing import chroma_server
from ctxbudget.tokens.counter import TokenCounter

BASELINE = 1_000
OTHER_SIZES = (100, 200, 300)  # messages of each other user
SESSIONS = 5
SESSION_LENGTH = 200
DIMENSION = 384
START = 1_700_000_000.0
COLLECTION = "scale"
PROBE = 0  # user index of the probe user
PROBE_SESSION = f"u{PROBE:06d}-s{SESSIONS - 1}"  # the probe user's latest session
CALL_SAMPLES = 5  # extra assembles with the Chroma calls counted

FACTS = [  # (what the probe user says early in a session, a question asking for it)
    ("My locker code at the climbing gym is 7391.", "What is my locker code at the gym?"),
    ("My cat Pimenta takes her thyroid pill at eight.", "When does my cat take her pill?"),
    ("The wifi password at my aunt's house is heron-42.", "What's the wifi password at my aunt's?"),
    ("My passport expires in March 2031.", "When does my passport expire?"),
    ("I'm allergic to penicillin.", "Which antibiotic am I allergic to?"),
    ("My dentist moved her clinic to Rua das Flores 112.", "Where is my dentist's clinic now?"),
    ("The spare garage key is under the blue flowerpot.", "Where is the spare garage key?"),
    ("I drive a green 2012 Volvo estate.", "What car do I drive?"),
    ("My blood type is O negative.", "What is my blood type?"),
    ("The insurance claim reference is CLM-20931.", "What's the insurance claim reference?"),
]
ASKS = ("What about", "Remind me of", "Any news on", "What did we say about", "Summarize")


# -- the data ----------------------------------------------------------------------------------
def user_sessions(user: int, messages: int) -> Iterator[tuple[str, list[tuple[str, str]]]]:
    """A user's sessions as (session id, [(role, text)]): 200 messages each, ``messages`` in all.

    Seeded by the user, so the probe user is the same in every store; the probe user states two
    facts early in each session (user turns 4 and 10).
    """
    rng = random.Random(user)
    left = messages
    for s in range(-(-messages // SESSION_LENGTH)):
        length = min(SESSION_LENGTH, left)
        left -= length
        turns = []
        for i in range(length):
            role = "user" if i % 2 == 0 else "assistant"
            if user == PROBE and i in (4, 10):
                text = FACTS[(2 * s + (i == 10)) % len(FACTS)][0]
            else:
                text = " ".join(sentence(rng, 4, 24) for _ in range(rng.randint(1, 2)))
            turns.append((role, text))
        yield f"u{user:06d}-s{s}", turns


def population(total: int) -> list[tuple[int, int]]:
    """(user, messages) for a store of ``total`` records: the probe user first (1,000), then
    users of 100, 200 or 300 messages (200 on average: 2,500 users in 500,000 records)."""
    rng = random.Random(total)
    users = [(PROBE, BASELINE)]
    left = total - BASELINE
    while left > 0:
        users.append((len(users), min(rng.choice(OTHER_SIZES), left)))
        left -= users[-1][1]
    return users


def record_batches(total: int, counter: TokenCounter, batch: int) -> Iterator[list[Record]]:
    """Every record of the store, in batches of about ``batch``, with their token counts."""
    pending: list[Record] = []
    for user, messages in population(total):
        for s, (sid, turns) in enumerate(user_sessions(user, messages)):
            counts = counter.count_many([text for _, text in turns])
            for i, ((role, text), tokens) in enumerate(zip(turns, counts, strict=True)):
                pending.append(
                    Record(
                        id=f"m{i:03d}",
                        kind="message",
                        text=text,
                        session_id=sid,
                        user_id=f"u{user:06d}",
                        role=role,
                        timestamp=START + s * 86_400 + 60 * i,
                        tokens={counter.name: tokens},
                    )
                )
        if len(pending) >= batch:
            yield pending
            pending = []
    if pending:
        yield pending


def queries(n: int, seed: int = 5) -> list[str]:
    """``n`` distinct queries: the facts' questions, then generic questions over the vocabulary."""
    rng = random.Random(seed)
    out = [question for _, question in FACTS][: n // 2]
    while len(out) < n:
        query = f"{rng.choice(ASKS)} the {' '.join(rng.sample(WORDS[15:], 3))}?"
        if query not in out:
            out.append(query)
    rng.shuffle(out)
    return out


# -- building (and reusing) a store --------------------------------------------------------------
EMBEDDER: list[Embedder] = [HashEmbedder(DIMENSION)]  # --embedder default: the default one


def open_store(where: Path | str) -> ChromaStore:
    if isinstance(where, Path):
        return ChromaStore(where, embedder=EMBEDDER[0], collection=COLLECTION)
    return ChromaStore(url=where, embedder=EMBEDDER[0], collection=COLLECTION)


def ensure_built(root: Path, total: int, counter: TokenCounter, batch: int) -> tuple[float, bool]:
    """Build the store of ``total`` records in ``root / "data"`` unless it is there already.

    Returns the build's seconds (from ``root / "build.json"`` when reused) and whether it was.
    """
    info = root / "build.json"
    if info.is_file():
        built = json.loads(info.read_text())
        # Written once the build finished and counted; counting again would open every user's
        # collection (minutes at 500k records), so it is trusted.
        if built.get("layout") == LAYOUT_VERSION and built.get("records") == total:
            return float(built["seconds"]), True
        print(f"  {root}: another layout or size, building again", flush=True)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    start = last = time.perf_counter()
    done = 0
    with open_store(root / "data") as store:
        for records in record_batches(total, counter, batch):
            store.add(records)
            done += len(records)
            if time.perf_counter() - last > 30 or done == total:
                last = time.perf_counter()
                rate = done / (last - start)
                print(f"  building {total:,}: {done:,} records, {rate:,.0f}/s", flush=True)
        count = store.count()
    seconds = time.perf_counter() - start
    if count != total:
        print(f"  WARNING: the store of {total:,} holds {count:,} records", flush=True)
    info.write_text(json.dumps({"seconds": seconds, "records": total, "layout": LAYOUT_VERSION}))
    return seconds, False


# -- measuring ---------------------------------------------------------------------------------
@dataclass
class Row:
    backend: str
    records: int
    users: int
    first: float
    samples: list[float]
    build: float
    cached: bool
    load: tuple[float, float, float]
    calls: ChromaCalls
    assembles_ms: float  # wall time of the CALL_SAMPLES counted assembles


def run_backend(
    backend: str,
    roots: dict[int, Path],
    builds: dict[int, tuple[float, bool]],
    args: argparse.Namespace,
) -> list[Row]:
    """Every store of one backend open at once, the timed assembles interleaved across them.

    Query by query, each store answers in turn, so a change of the machine's load during the
    run weighs on every size alike and the ratios compare like with like.
    """
    asked = queries(args.queries + 1)
    with ExitStack() as stack:
        memories: dict[int, ContextMemory] = {}
        for total, root in roots.items():
            store = stack.enter_context(open_store(stack.enter_context(located(backend, root))))
            memories[total] = ContextMemory(store=store, write_behind=False)
        first: dict[int, float] = {}
        for total, memory in memories.items():
            start = time.perf_counter()
            memory.assemble(PROBE_SESSION, asked[0], budget=args.budget)
            first[total] = (time.perf_counter() - start) * 1e3
        samples: dict[int, list[float]] = {total: [] for total in memories}
        for query in asked[1:]:
            for total, memory in memories.items():
                start = time.perf_counter()
                memory.assemble(PROBE_SESSION, query, budget=args.budget)
                samples[total].append((time.perf_counter() - start) * 1e3)
        load = os.getloadavg()
        rows = []
        for total, memory in memories.items():
            calls, wall = count_calls(memory, asked, args.budget)
            users = len(population(total))
            rows.append(
                Row(
                    backend,
                    total,
                    users,
                    first[total],
                    samples[total],
                    *builds[total],
                    load,
                    calls,
                    wall,
                )
            )
    return rows


def count_calls(memory: ContextMemory, asked: list[str], budget: int) -> tuple[ChromaCalls, float]:
    with counting_chroma_calls() as calls:
        start = time.perf_counter()
        for query in asked[1 : 1 + CALL_SAMPLES]:
            memory.assemble(PROBE_SESSION, query, budget=budget)
        wall = (time.perf_counter() - start) * 1e3
    return calls, wall


@contextmanager
def located(backend: str, root: Path) -> Iterator[Path | str]:
    """Where the store is: its folder (embedded), or a server started on it for the block."""
    if backend == "embedded":
        yield root / "data"
        return
    with chroma_server(root) as server:
        yield server.url


def run_workers(roots: dict[int, Path], args: argparse.Namespace) -> list[WorkersResult]:
    """Size by size, on a served copy of the store: the probe alone vs with the workers (and,
    with ``--other-server``, vs with workers on a second server serving another copy)."""
    asked = queries(args.queries + 1)
    results = []
    for total, root in roots.items():
        scratch = Path(tempfile.mkdtemp(prefix="ctxbudget-scale-workers-"))
        others = tuple(f"u{user:06d}" for user, _ in population(total)[1:])
        names = ["same server", *(["other server"] if args.other_server else [])]
        try:
            with ExitStack() as stack:
                servers = {}
                for number, name in enumerate(names):
                    shutil.copytree(root / "data", scratch / f"server-{number}" / "data")
                    servers[name] = stack.enter_context(chroma_server(scratch / f"server-{number}"))
                specs = {
                    name: WorkerSpec(
                        server.url,
                        COLLECTION,
                        DIMENSION,
                        args.embedder,
                        others,
                        str(scratch / f"journals-{number}"),
                        args.budget,
                    )
                    for number, (name, server) in enumerate(servers.items())
                }
                mine = servers["same server"]
                if args.other_server:  # the probe's server, another collection: no lock shared
                    specs["same server, own collection"] = WorkerSpec(
                        mine.url,
                        f"{COLLECTION}-workers",
                        DIMENSION,
                        args.embedder,
                        (),
                        str(scratch / "journals-own"),
                        args.budget,
                    )
                store = stack.enter_context(open_store(mine.url))
                probe = ContextMemory(store=store, write_behind=False)
                pid = None if mine.process is None else mine.process.pid
                found = measure(
                    total,
                    probe,
                    PROBE_SESSION,
                    asked,
                    args.workers,
                    specs,
                    args.blocks,
                    Server(mine.url, pid),
                    f"u{PROBE:06d}" if args.probe_user else None,
                )
                probe.flush()
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        results.append(found)
        base = statistics.median(found.conditions["alone"].wall)
        line = ", ".join(
            f"{name} {statistics.median(c.wall):.1f} ms ({statistics.median(c.wall) / base:.2f}x)"
            for name, c in found.conditions.items()
        )
        print(f"  {total:,}: p50 {line}", flush=True)
        print(f"\n{tables([found])}\n", flush=True)
    return results


# -- --mechanisms: each speed mechanism on and off ---------------------------------------------------
ON = "all on (default)"
VARIANTS = {  # name -> what turns the mechanism off on one memory
    ON: None,
    "session copy off": lambda m: setattr(m, "_indexes", FreshIndexes()),
    "incremental reads off": lambda m: setattr(m, "_indexes", WholeWindow()),
    "query vectors off": lambda m: setattr(m, "_vectors", NoQueryVectors()),
    "shared layouts off": no_shared_layouts,
}
PAIRS = {
    "session-copy": Pair("session copy (SessionIndexes)", ON, "session copy off"),
    "incremental": Pair("incremental reads (held=)", ON, "incremental reads off"),
    "query-vectors": Pair("query vectors (QueryVectors)", ON, "query vectors off"),
    "layouts": Pair("shared layouts (ContextMemory.layouts_for)", ON, "shared layouts off"),
}


def run_mechanisms(
    backend: str, roots: dict[int, Path], args: argparse.Namespace
) -> tuple[dict[int, dict[str, list[float]]], dict[int, dict[str, list[float]]], str]:
    """p50 samples by store size and variant: every store open at once, a memory per variant on
    each, the timed assembles interleaved (query by query, each store, each variant in turn,
    the variants' order rotated each query); and the load average at the end."""
    chosen = list(PAIRS) if args.mechanisms == "all" else args.mechanisms.split(",")
    unknown = set(chosen) - set(PAIRS)
    if unknown:
        raise SystemExit(f"--mechanisms: unknown {sorted(unknown)}; known: {list(PAIRS)}")
    names = [ON, *(PAIRS[name].off for name in chosen)]
    asked = queries(args.queries + 1)
    with ExitStack() as stack:
        memories: dict[int, dict[str, ContextMemory]] = {}
        for total, root in roots.items():
            store = stack.enter_context(open_store(stack.enter_context(located(backend, root))))
            memories[total] = {}
            for name in names:
                memory = ContextMemory(store=store, write_behind=False)
                switch = VARIANTS[name]
                if switch is not None:
                    switch(memory)
                memories[total][name] = memory
        for by_name in memories.values():  # the first calls: reading the session, the index
            for memory in by_name.values():
                memory.assemble(PROBE_SESSION, asked[0], budget=args.budget)
        samples: dict[int, dict[str, list[float]]] = {t: {n: [] for n in names} for t in memories}
        cpu: dict[int, dict[str, list[float]]] = {t: {n: [] for n in names} for t in memories}
        for number, query in enumerate(asked[1:]):
            for total, by_name in memories.items():
                shift = number % len(names)
                for name in names[shift:] + names[:shift]:
                    memory = by_name[name]
                    start, used = time.perf_counter(), time.process_time()
                    memory.assemble(PROBE_SESSION, query, budget=args.budget)
                    samples[total][name].append((time.perf_counter() - start) * 1e3)
                    cpu[total][name].append((time.process_time() - used) * 1e3)
                    memory.inclusion_log.flush()  # its background write weighs on no other call
        load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
        for by_name in memories.values():
            for memory in by_name.values():
                memory.flush()
    return samples, cpu, load


def mechanisms_tables(
    backend: str,
    samples: dict[int, dict[str, list[float]]],
    load: str,
    chosen: list[str],
    clock: str = "wall clock",
) -> str:
    sizes = sorted(samples)
    names = list(samples[sizes[0]])
    out = [f"### {backend}, {clock}: assemble p50 ms by variant and store size (load {load})", ""]
    out.append(
        "| variant | " + " | ".join(f"{n:,}" for n in sizes) + f" | {sizes[-1]:,} / {sizes[0]:,} |"
    )
    out.append("|---|" + "--:|" * (len(sizes) + 1))
    for name in names:
        p50 = [statistics.median(samples[n][name]) for n in sizes]
        cells = " | ".join(f"{x:.1f}" for x in p50)
        out.append(f"| {name} | {cells} | {p50[-1] / p50[0]:.2f} |")
    for total in sizes:
        out += ["", f"{backend}, {total:,} records:", ""]
        out.append(on_off_table([PAIRS[c] for c in chosen], samples[total], load))
    return "\n".join(out)


# -- printing ----------------------------------------------------------------------------------
def table(rows: list[Row]) -> str:
    base = {r.backend: statistics.median(r.samples) for r in rows if r.records == BASELINE}
    out = [
        "| backend | records | users | first ms | assemble p50 ms | p95 ms | p50 / 1-user p50 "
        "| build | load avg (1, 5, 15 min) |",
        "|---|--:|--:|--:|--:|--:|--:|--:|---|",
    ]
    for r in rows:
        p50 = statistics.median(r.samples)
        ratio = f"{p50 / base[r.backend]:.2f}" if r.backend in base else "?"
        rate = f"{r.records / r.build:,.0f} rec/s" if r.build else "?"
        build = (
            f"{r.build:,.{0 if r.build >= 100 else 1}f} s ({rate}){' cached' if r.cached else ''}"
        )
        load = ", ".join(f"{x:.2f}" for x in r.load)
        out.append(
            f"| {r.backend} | {r.records:,} | {r.users:,} | {r.first:.1f} | {p50:.1f} "
            f"| {pct(r.samples, 0.95):.1f} | {ratio} | {build} | {load} |"
        )
    return "\n".join(out)


def calls_table(small: Row, large: Row) -> str:
    n = CALL_SAMPLES
    kinds = sorted(set(small.calls.count) | set(large.calls.count))
    heads = [f"{r.records:,} records" for r in (small, large)]
    out = [
        f"{large.backend}: Chroma calls per assemble (mean of {n} assembles), by kind",
        "",
        f"| call | {heads[0]}: calls | ms/call | {heads[1]}: calls | ms/call |",
        "|---|--:|--:|--:|--:|",
    ]

    def cells(r: Row, kind: str) -> str:
        count = r.calls.count.get(kind, 0)
        if not count:
            return "- | -"
        return f"{count / n:.1f} | {r.calls.ms[kind] / count:.2f}"

    for kind in kinds:
        out.append(f"| {kind} | {cells(small, kind)} | {cells(large, kind)} |")
    totals = []
    for r in (small, large):
        chroma = sum(r.calls.ms.values()) / n
        totals.append(
            (
                f"{sum(r.calls.count.values()) / n:.1f} | {chroma:.1f} ms",
                r.assembles_ms / n - chroma,
            )
        )
    out.append(f"| all Chroma calls (calls, ms) | {totals[0][0]} | {totals[1][0]} |")
    out.append(f"| assemble outside Chroma (ms) | {totals[0][1]:.1f} | | {totals[1][1]:.1f} | |")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000,500000", help="total records per store")
    parser.add_argument("--backends", default="embedded,server")
    parser.add_argument("--cache", type=Path, help="keep the built stores here and reuse them")
    parser.add_argument("--queries", type=int, default=30, help="timed assembles per store")
    parser.add_argument("--batch", type=int, default=5_000, help="records per ChromaStore.add")
    parser.add_argument("--budget", type=int, default=4096)
    parser.add_argument(
        "--embedder",
        choices=["hash", "default"],
        default="hash",
        help="hash: free vectors (storage and assembly only); default: ctxbudget's default "
        "embedder (queries embedded on every call, as in production)",
    )
    parser.add_argument(
        "--mechanisms",
        help=f"'all' or a comma list of {','.join(PAIRS)}: each on and off, interleaved",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=0,
        help="time the probe alone vs with N worker processes on the same server (server only)",
    )
    parser.add_argument("--blocks", type=int, default=6, help="--workers: alternating blocks")
    parser.add_argument(
        "--probe-user",
        action="store_true",
        help="--workers: the probe names its user (user_id=), as the workers and most apps do",
    )
    parser.add_argument(
        "--other-server",
        action="store_true",
        help="--workers: also time the probe with the workers on a second server (machine "
        "contention only)",
    )
    args = parser.parse_args()
    if args.embedder == "default":
        EMBEDDER[0] = default_embedder()
    sizes = sorted({BASELINE, *(int(s.replace("_", "")) for s in args.sizes.split(","))})
    if sizes[0] < BASELINE:
        parser.error(f"every size must be at least {BASELINE:,} (the probe user's records)")
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if not set(backends) <= {"embedded", "server"} or not backends:
        parser.error("--backends: embedded, server or both")

    print(f"# bench_scale: {machine()}, chromadb {chromadb.__version__}")
    print(
        f"probe: user u{PROBE:06d}, session {PROBE_SESSION} ({SESSIONS} sessions x "
        f"{SESSION_LENGTH} messages); {args.queries} timed assembles (budget {args.budget}) "
        f"after a first one; embedder {EMBEDDER[0].name}; sizes {sizes}; backends {backends}",
        flush=True,
    )
    cache = args.cache or Path(tempfile.mkdtemp(prefix="ctxbudget-bench-scale-"))
    counter = TokenCounter.for_model("gpt-4o")
    rows: list[Row] = []
    try:
        roots: dict[int, Path] = {}
        builds: dict[int, tuple[float, bool]] = {}
        for total in sizes:
            suffix = "" if args.embedder == "hash" else "-default"
            roots[total] = cache / f"scale-{total}{suffix}"
            builds[total] = ensure_built(roots[total], total, counter, args.batch)
        if args.workers:
            print(f"--workers {args.workers}: server backend only", flush=True)
            print()
            print(tables(run_workers(roots, args)), flush=True)
            return
        if args.mechanisms:
            chosen = list(PAIRS) if args.mechanisms == "all" else args.mechanisms.split(",")
            for backend in backends:
                try:
                    found, cpu, load = run_mechanisms(backend, roots, args)
                except CtxBudgetError as exc:  # a server timing out: go on with the rest
                    print(f"  {backend}: FAILED: {exc}", flush=True)
                    continue
                print()
                print(mechanisms_tables(backend, found, load, chosen), flush=True)
                print()
                print(mechanisms_tables(backend, cpu, load, chosen, "CPU time"), flush=True)
            return
        for backend in backends:
            try:
                done = run_backend(backend, roots, builds, args)
            except CtxBudgetError as exc:  # a server timing out, say: go on with the rest
                print(f"  {backend}: FAILED: {exc}", flush=True)
                continue
            rows += done
            for r in done:
                print(
                    f"  {backend} {r.records:,}: first {r.first:.1f} ms, p50 "
                    f"{statistics.median(r.samples):.1f} ms, p95 {pct(r.samples, 0.95):.1f} ms",
                    flush=True,
                )
    finally:
        if args.cache is None:
            shutil.rmtree(cache, ignore_errors=True)
    rows.sort(key=lambda r: (backends.index(r.backend), r.records))
    print()
    print(table(rows))
    for backend in backends:
        mine = [r for r in rows if r.backend == backend]
        if len(mine) > 1 and mine[0].records == BASELINE:
            print()
            print(calls_table(mine[0], mine[-1]))


if __name__ == "__main__":
    main()
