"""bench_scale.py --workers N: the probe user's assemble alone vs with N worker processes busy.

Each worker is a process of its own (multiprocessing, spawn) with its own `ContextMemory` on a
``chroma run`` server (its own `ChromaStore`, write-behind journal folder and inclusion log). It
loops over conversations: 70% of them a new user's new session, 30% the first session of an
existing other user of the store (up to 200 messages already there), 3 to 10 turns each; a turn
is ``add_message`` (user), ``assemble`` (budget as the probe's) and ``add_message``
(assistant). After each turn the worker sleeps as long as the turn took, so it is busy at most
half the time (a busy app's request handler, paced).

The probe's queries are split into blocks; each block is timed alone (every worker paused, its
writes flushed) and with each set of workers running (started 3 s before the timing, so they
are in their stride), the conditions' order rotated block by block, so the machine's other load
weighs on all alike. The sets: "same server" (the probe's server and collection: the issue's
case); with ``--other-server`` also "other server" (a second server on a copy of the store: the
workers weigh on the machine only) and "same server, own collection" (the probe's server, a
collection of their own, new users only: the server's CPU is shared, its collection is not).
Beside each timed assemble: the assembling thread's Chroma calls (count, time by kind), the
probe process's CPU time, a pure-CPU loop (the machine's contention on this process) and the
server's heartbeat (its queueing for a request that does nearly no work); per block the
server's CPU time and the machine's busy share (``/proc/stat``).
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import random
import statistics
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import COLLECTION_METHODS, HashEmbedder, pct, sentence

from ctxbudget.embed.base import Embedder, default_embedder
from ctxbudget.memory.context import ContextMemory
from ctxbudget.store.chroma_store import ChromaStore

__all__ = ["Server", "WorkerSpec", "WorkersResult", "measure", "tables"]

RAMP = 3.0  # seconds the workers run before a "with" block is timed
EXISTING_SHARE = 0.3  # of the workers' conversations: an existing other user's first session
CPU_LOOP = 200_000  # iterations of the pure-CPU reference loop


@dataclass(frozen=True)
class WorkerSpec:
    """What a worker needs (picklable: spawn)."""

    url: str
    collection: str
    dimension: int
    embedder: str  # "hash" or "default"
    existing: tuple[str, ...]  # other users of the store (their session "<user>-s0")
    journal: str  # the workers' journal folders go under it
    budget: int


@dataclass
class Condition:
    """The timed assembles of one condition (alone, or with the workers)."""

    wall: list[float] = field(default_factory=list)  # ms
    cpu: list[float] = field(default_factory=list)  # the probe process's CPU ms
    loop: list[float] = field(default_factory=list)  # the pure-CPU loop's ms
    chroma_calls: int = 0  # made by the assembling thread
    chroma_ms: float = 0.0
    kinds: dict[str, list[float]] = field(default_factory=dict)  # Chroma calls: [count, ms]
    busy: list[tuple[float, float]] = field(default_factory=list)  # /proc/stat (busy, total)
    heartbeat: list[float] = field(default_factory=list)  # ms of the server's heartbeat
    server: list[tuple[float, float]] = field(default_factory=list)  # server CPU s, wall s
    turns: int = 0  # the workers' turns while this condition's workers ran
    turn_seconds: float = 0.0  # their total wall time
    turn_cpu: float = 0.0  # their total CPU time (the worker processes', not the server's)
    running: float = 0.0  # seconds this condition's workers ran (from their start to pause)

    def server_cores(self) -> float:
        wall = sum(w for _, w in self.server)
        return sum(c for c, _ in self.server) / wall if wall else float("nan")

    def machine_busy(self) -> float:
        total = sum(t for _, t in self.busy)
        return sum(b for b, _ in self.busy) / total if total else float("nan")


@dataclass
class WorkersResult:
    records: int
    workers: int
    conditions: dict[str, Condition]  # "alone", "same server", "other server"
    load: tuple[float, float, float]


def _cpu_times() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine."""
    try:
        fields = [float(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    except OSError:
        return 0.0, 0.0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)
    return sum(fields) - idle, sum(fields)


@dataclass(frozen=True)
class Server:
    """The ``chroma run`` process: its CPU time, and the time of a trivial request."""

    url: str
    pid: int | None

    def cpu(self) -> float:
        """Seconds of CPU the server has used (user + system), 0 if unknown."""
        if self.pid is None:
            return 0.0
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def heartbeat(self) -> float:
        """Milliseconds of a ``GET /api/v2/heartbeat`` (the server's queueing, nearly no work)."""
        start = time.perf_counter()
        with urllib.request.urlopen(f"{self.url}/api/v2/heartbeat", timeout=30) as answer:
            answer.read()
        return (time.perf_counter() - start) * 1e3


@contextmanager
def _chroma_time() -> Iterator[dict[str, list[float]]]:
    """{kind: [calls, ms]} of the chromadb ``Collection`` calls made by this thread in the block
    (the memory's background writers, the inclusion log's say, are left out)."""
    from chromadb.api.models.Collection import Collection

    found: dict[str, list[float]] = {}
    me = threading.get_ident()
    originals = {name: getattr(Collection, name) for name in COLLECTION_METHODS}

    def wrap(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() != me:
                return method(self, *args, **kwargs)
            start = time.perf_counter()
            try:
                return method(self, *args, **kwargs)
            finally:
                which = "meta" if self.name.endswith(".meta") else "records"
                kind = found.setdefault(f"{which}.{name}", [0.0, 0.0])
                kind[0] += 1
                kind[1] += (time.perf_counter() - start) * 1e3

        return timed

    for name, method in originals.items():
        setattr(Collection, name, wrap(name, method))
    try:
        yield found
    finally:
        for name, method in originals.items():
            setattr(Collection, name, method)


def _cpu_loop() -> float:
    start = time.perf_counter()
    x = 0
    for i in range(CPU_LOOP):
        x += i * i
    return (time.perf_counter() - start) * 1e3


# -- a worker (a process of its own) -------------------------------------------------------------
def work(index: int, spec: WorkerSpec, control: dict[str, Any]) -> None:
    """Loop turns while ``control["run"]`` is set, flush and report idle when it is cleared."""
    run, stop, idle, ready = (
        control["run"],
        control["stop"],
        control["idle"][index],
        control["ready"][index],
    )
    try:
        embedder: Embedder = (
            HashEmbedder(spec.dimension) if spec.embedder == "hash" else default_embedder()
        )
        store = ChromaStore(url=spec.url, embedder=embedder, collection=spec.collection)
        memory = ContextMemory(store=store, write_behind=Path(spec.journal) / f"worker-{index}")
        rng = random.Random(1_000 + index)
        memory.assemble(f"w{index}-warm", "warm up", budget=spec.budget, user_id=f"w{index}")
        ready.set()
        idle.set()
        conversations, left, user, session = 0, 0, "", ""
        while not stop.is_set():
            if not run.is_set():
                if not idle.is_set():
                    memory.flush()  # the alone blocks see no write of ours in flight
                    idle.set()
                run.wait(0.05)
                continue
            idle.clear()
            if left == 0:
                conversations += 1
                left = rng.randint(3, 10)
                if spec.existing and rng.random() < EXISTING_SHARE:
                    user = rng.choice(spec.existing)
                else:
                    user = f"w{index}-{conversations:05d}"
                session = f"{user}-s0"
            left -= 1
            start, used = time.perf_counter(), time.process_time()
            question = sentence(rng, 6, 20)
            memory.add_message(session, "user", question, user_id=user)
            memory.assemble(session, question, budget=spec.budget, user_id=user)
            memory.add_message(session, "assistant", sentence(rng, 10, 40), user_id=user)
            took = time.perf_counter() - start
            with control["turns"].get_lock():
                control["turns"].value += 1
                control["turn_seconds"].value += took
                control["turn_cpu"].value += time.process_time() - used
            time.sleep(took)  # busy at most half the time
        memory.close()
    except BaseException as exc:
        control["errors"].put(f"worker {index}: {exc!r}")
        raise


# -- the probe, alone and with the workers -------------------------------------------------------
def _timed_block(
    probe: ContextMemory,
    session: str,
    chunk: list[str],
    budget: int,
    into: Condition,
    server: Server,
    user: str | None,
) -> None:
    busy0, total0 = _cpu_times()
    server0, start0 = server.cpu(), time.perf_counter()
    for query in chunk:
        with _chroma_time() as calls:
            start, used = time.perf_counter(), time.process_time()
            probe.assemble(session, query, budget=budget, user_id=user)
            into.wall.append((time.perf_counter() - start) * 1e3)
            into.cpu.append((time.process_time() - used) * 1e3)
        probe.inclusion_log.flush()  # its background write weighs on no timed call
        for kind, (count, ms) in calls.items():
            into.chroma_calls += int(count)
            into.chroma_ms += ms
            mine = into.kinds.setdefault(kind, [0.0, 0.0])
            mine[0] += count
            mine[1] += ms
        into.loop.append(_cpu_loop())
        into.heartbeat.append(server.heartbeat())
    busy1, total1 = _cpu_times()
    into.busy.append((busy1 - busy0, total1 - total0))
    into.server.append((server.cpu() - server0, time.perf_counter() - start0))


def measure(
    records: int,
    probe: ContextMemory,
    session: str,
    asked: list[str],
    workers: int,
    specs: dict[str, WorkerSpec],
    blocks: int,
    server: Server,
    user: str | None = None,
) -> WorkersResult:
    """The probe's assembles of ``asked[1:]`` alone and with each set of workers, interleaved.

    ``user``: the probe names it (``assemble(..., user_id=user)``), as the workers do; None: the
    session's own user is taken.

    ``specs``: the workers' settings by condition name ("same server": on the probe's server;
    "other server": on a server of their own, so they weigh only on the machine). Each block
    runs the conditions in turn, the order rotated block by block.
    """
    ctx = multiprocessing.get_context("spawn")
    errors = ctx.Queue()
    controls: dict[str, dict[str, Any]] = {}
    processes: list[Any] = []
    for name, spec in specs.items():
        control = controls[name] = {
            "run": ctx.Event(),
            "stop": ctx.Event(),
            "idle": [ctx.Event() for _ in range(workers)],
            "ready": [ctx.Event() for _ in range(workers)],
            "turns": ctx.Value("i", 0),
            "turn_seconds": ctx.Value("d", 0.0),
            "turn_cpu": ctx.Value("d", 0.0),
            "errors": errors,
        }
        processes += [ctx.Process(target=work, args=(i, spec, control)) for i in range(workers)]
    for process in processes:
        process.start()
    conditions = {name: Condition() for name in ("alone", *specs)}
    names = list(conditions)
    budget = next(iter(specs.values())).budget
    try:
        for control in controls.values():
            _wait(control, "ready", processes, 600)
        probe.assemble(session, asked[0], budget=budget, user_id=user)  # not timed
        for number in range(blocks):
            chunk = asked[1 + number :: blocks]
            shift = number % len(names)
            for name in names[shift:] + names[:shift]:
                into = conditions[name]
                if name == "alone":
                    _timed_block(probe, session, chunk, budget, into, server, user)
                    continue
                control = controls[name]
                started = time.perf_counter()
                control["run"].set()
                time.sleep(RAMP)
                _timed_block(probe, session, chunk, budget, into, server, user)
                control["run"].clear()
                into.running += time.perf_counter() - started
                _wait(control, "idle", processes, 120)
        load = os.getloadavg()
    finally:
        for control in controls.values():
            control["stop"].set()
            control["run"].set()  # wake the waiting ones
        for process in processes:
            process.join(60)
            if process.is_alive():
                process.kill()
    for name, control in controls.items():
        conditions[name].turns = int(control["turns"].value)
        conditions[name].turn_seconds = float(control["turn_seconds"].value)
        conditions[name].turn_cpu = float(control["turn_cpu"].value)
    return WorkersResult(records, workers, conditions, load)


def _wait(control: dict[str, Any], which: str, processes: list[Any], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for event in control[which]:
        while not event.wait(0.5):
            if not control["errors"].empty():
                raise RuntimeError(control["errors"].get())
            if not all(p.is_alive() for p in processes):
                raise RuntimeError(f"a worker died while waiting for {which}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the workers were not {which} after {timeout:.0f} s")


# -- printing ------------------------------------------------------------------------------------
def _mean(samples: list[float]) -> float:
    return sum(samples) / len(samples)


def tables(results: list[WorkersResult]) -> str:
    n = results[0].workers
    out = [
        f"Probe assemble alone vs with {n} workers on the same server (same store, same "
        "queries, alternating blocks)",
        "",
        "| records | p50 alone ms | p50 with ms | p50 ratio | p95 alone ms | p95 with ms "
        "| p95 ratio | worker turns/s | worker turn ms (mean) | load avg (1, 5, 15 min) |",
        "|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|",
    ]
    for r in results:
        a, w = r.conditions["alone"], r.conditions["same server"]
        p50a, p50w = statistics.median(a.wall), statistics.median(w.wall)
        p95a, p95w = pct(a.wall, 0.95), pct(w.wall, 0.95)
        load = ", ".join(f"{x:.2f}" for x in r.load)
        out.append(
            f"| {r.records:,} | {p50a:.1f} | {p50w:.1f} | {p50w / p50a:.2f} | {p95a:.1f} "
            f"| {p95w:.1f} | {p95w / p95a:.2f} | {_rate(w)} | {_turn(w)} | {load} |"
        )
    out += [
        "",
        'Where the extra time goes, by condition ("other server": the same workers on a '
        "copy of the store served by a second server, so they weigh on the machine only). "
        f"Means per assemble; the CPU loop is {CPU_LOOP:,} additions in the probe process, "
        "the heartbeat a GET /api/v2/heartbeat of the probe's server after each assemble",
        "",
        "| records | condition | p50 ms | p50 / alone | p95 ms | Chroma calls | in Chroma ms "
        "| outside Chroma ms | probe CPU ms | CPU loop p50 ms | heartbeat p50 ms "
        "| server CPU (cores) | machine busy | worker turns/s | workers' CPU (cores) |",
        "|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in results:
        base = statistics.median(r.conditions["alone"].wall)
        for name, c in r.conditions.items():
            p50 = statistics.median(c.wall)
            inside = c.chroma_ms / len(c.wall)
            out.append(
                f"| {r.records:,} | {name} | {p50:.1f} | {p50 / base:.2f} | {pct(c.wall, 0.95):.1f} "
                f"| {c.chroma_calls / len(c.wall):.1f} | {inside:.1f} "
                f"| {_mean(c.wall) - inside:.1f} | {_mean(c.cpu):.1f} "
                f"| {statistics.median(c.loop):.1f} | {statistics.median(c.heartbeat):.1f} "
                f"| {c.server_cores():.2f} | {c.machine_busy():.0%} "
                f"| {_rate(c)} | {c.turn_cpu / c.running if c.running else 0:.2f} |"
            )
    last = results[-1]
    names = list(last.conditions)
    kinds = sorted({k for c in last.conditions.values() for k in c.kinds})
    out += [
        "",
        f"{last.records:,} records: the assembling thread's Chroma calls by kind, ms per call",
        "",
        "| call | calls per assemble | " + " | ".join(names) + " |",
        "|---|--:|" + "--:|" * len(names),
    ]
    alone = last.conditions["alone"]
    for kind in kinds:
        count = alone.kinds.get(kind, [0.0, 0.0])[0] / len(alone.wall)
        cells = []
        for c in last.conditions.values():
            made, ms = c.kinds.get(kind, [0.0, 0.0])
            cells.append(f"{ms / made:.1f}" if made else "-")
        out.append(f"| {kind} | {count:.1f} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def _rate(c: Condition) -> str:
    return f"{c.turns / c.running:.1f}" if c.running else "-"


def _turn(c: Condition) -> str:
    return f"{c.turn_seconds / c.turns * 1e3:.0f}" if c.turns else "-"
