"""Bounded load on `ContextMemory`: writer and assembler threads on one store for a fixed time.

For each backend (an embedded Chroma in a temporary folder; a ``chroma run`` server started by
this script on 127.0.0.1 on a free port, with its data in a temporary folder, stopped at the end)
``--writers`` threads store chat messages (``add_message``, every fifth write a batch of three
with ``add_messages``) and ``--readers`` threads call ``assemble(session, query, budget=2048)``,
all on one `ContextMemory`, for ``--duration`` seconds. Writers alternate between their own
session and sessions shared by every writer; each message carries a unique marker.

It prints writes/s and assembles/s, p50/p95/p99 latency of each operation (wall clock, one
``add_message`` or ``add_messages`` call, one ``assemble``), the errors, and then what the store
holds, read back session by session: acknowledged messages missing (lost), messages stored
twice (duplicates, by id and by marker), sessions whose seqs are not 0..n-1 or do not follow
each writer's order, and messages stored though their write raised. Lost and duplicates must
be 0; the exit status is 1 otherwise, or when an operation failed or a thread was still running
``--grace`` seconds after the end (its stack is printed: a deadlock). It always stops by itself.

Embedding is the expensive part of a write and the embedder runs one text batch at a time, so
writers mostly queue for it; ``--torch-threads 1`` (the default here) is much faster than
torch's default on a shared 2-core machine (busy-waiting threads), 0 keeps torch's default.

Run: .venv/bin/python benchmarks/bench_load.py [--duration 30] [--writers 4] [--readers 2]
     [--backends embedded,server] [--shared-sessions 2] [--torch-threads 1] [--seed 7]
"""

from __future__ import annotations

import os

os.environ["ANONYMIZED_TELEMETRY"] = "False"
os.environ["ORT_DISABLE_TELEMETRY"] = "1"
os.environ["HF_HUB_OFFLINE"] = "1"

import argparse
import faulthandler
import random
import re
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from _common import machine, pct, sentence

from ctxbudget.embed.local import Embedder, LocalEmbedder
from ctxbudget.errors import CtxBudgetError
from ctxbudget.memory.context import ContextMemory
from ctxbudget.store.chroma_store import ChromaStore
from ctxbudget.testing import chroma_server

MARKER = re.compile(r"\[(w\d+n\d+)\]")
BATCH_EVERY = 5
BATCH_SIZE = 3
BUDGET = 2048


@dataclass
class LoadResult:
    """What one load run did and what the store held afterwards."""

    backend: str
    writers: int
    readers: int
    seconds: float = 0.0
    write_ms: list[float] = field(default_factory=list)
    assemble_ms: list[float] = field(default_factory=list)
    acknowledged: int = 0
    errors: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    seq_problems: list[str] = field(default_factory=list)
    unacknowledged_stored: int = 0
    stored: int = 0
    stuck: str = ""

    @property
    def ok(self) -> bool:
        """Nothing lost or doubled, every operation succeeded, every thread ended."""
        return not (self.errors or self.lost or self.duplicates or self.seq_problems or self.stuck)

    def report(self) -> str:
        """The figures, one block of lines."""
        lines = [
            f"{self.backend}: {self.writers} writer + {self.readers} assembler threads, "
            f"{self.seconds:.1f} s",
            _line("writes", self.write_ms, self.seconds)
            + f"; {self.acknowledged} messages acknowledged",
            _line("assembles", self.assemble_ms, self.seconds),
            f"  errors {len(self.errors)}, lost {len(self.lost)}, duplicates "
            f"{len(self.duplicates)}, seq problems {len(self.seq_problems)}, stored but not "
            f"acknowledged {self.unacknowledged_stored}, messages in the store {self.stored}",
        ]
        for title, problems in (
            ("errors", self.errors),
            ("lost", self.lost),
            ("duplicates", self.duplicates),
            ("seq problems", self.seq_problems),
        ):
            if problems:
                lines.append(f"  {title} (first 5): {problems[:5]}")
        if self.stuck:
            lines.append(f"  threads still running at the end (deadlock?):\n{self.stuck}")
        return "\n".join(lines)


def _line(name: str, samples: list[float], seconds: float) -> str:
    if not samples:
        return f"  {name}: none"
    rate = len(samples) / seconds if seconds > 0 else 0.0
    return (
        f"  {name}: {len(samples)} calls, {rate:.1f}/s; p50 {pct(samples, 0.5):.0f} ms, "
        f"p95 {pct(samples, 0.95):.0f} ms, p99 {pct(samples, 0.99):.0f} ms, "
        f"max {max(samples):.0f} ms"
    )


@dataclass
class _Written:
    """One writer's acknowledged messages: (session, id, marker) in the order acknowledged."""

    acks: list[tuple[str, str, str]] = field(default_factory=list)


def run_load(
    memory: ContextMemory,
    *,
    backend: str,
    writers: int = 4,
    readers: int = 2,
    duration: float = 30.0,
    shared_sessions: int = 2,
    seed: int = 7,
    grace: float = 120.0,
) -> LoadResult:
    """Write and assemble from threads for ``duration`` seconds, then read everything back.

    Never raises for a failed operation: failures are counted in `LoadResult.errors`.
    """
    result = LoadResult(backend, writers, readers)
    written = [_Written() for _ in range(writers)]
    guard = threading.Lock()
    stop_at = time.monotonic() + duration

    def own(w: int) -> str:
        return f"own{w}"

    sessions = [own(w) for w in range(writers)] + [f"shared{s}" for s in range(shared_sessions)]

    def fail(what: str, exc: BaseException) -> None:
        with guard:
            result.errors.append(f"{what}: {type(exc).__name__}: {exc}"[:300])

    def writer(w: int) -> None:
        rng = random.Random(seed * 1000 + w)
        number = 0
        op = 0
        while time.monotonic() < stop_at:
            session = (
                own(w) if op % 2 == 0 or not shared_sessions else f"shared{op % shared_sessions}"
            )
            size = BATCH_SIZE if op % BATCH_EVERY == BATCH_EVERY - 1 else 1
            markers = [f"w{w}n{number + i}" for i in range(size)]
            number += size
            messages = [
                {"role": ("user", "assistant")[(number + i) % 2], "text": f"{sentence(rng)} [{m}]"}
                for i, m in enumerate(markers)
            ]
            start = time.perf_counter()
            try:
                if size == 1:
                    ids = [
                        memory.add_message(
                            session, messages[0]["role"], messages[0]["text"], user_id=f"u{w}"
                        )
                    ]
                else:
                    ids = memory.add_messages(session, messages, user_id=f"u{w}")
            except CtxBudgetError as exc:
                fail(f"writer {w} add to {session}", exc)
            else:
                elapsed = (time.perf_counter() - start) * 1000.0
                with guard:
                    result.write_ms.append(elapsed)
                    written[w].acks += [(session, i, m) for i, m in zip(ids, markers, strict=True)]
            op += 1

    def reader(r: int) -> None:
        rng = random.Random(seed * 1000 + 500 + r)
        while time.monotonic() < stop_at:
            session = rng.choice(sessions)
            start = time.perf_counter()
            try:
                memory.assemble(session, sentence(rng, 4, 12), budget=BUDGET)
            except CtxBudgetError as exc:
                fail(f"reader {r} assemble {session}", exc)
            else:
                with guard:
                    result.assemble_ms.append((time.perf_counter() - start) * 1000.0)

    def guarded(job: Callable[[int], None], index: int) -> Callable[[], None]:
        def target() -> None:
            try:
                job(index)
            except Exception as exc:  # noqa: BLE001 - any failure is a figure of the run
                fail(f"{job.__name__} {index} crashed", exc)

        return target

    threads = [threading.Thread(target=guarded(writer, w), daemon=True) for w in range(writers)]
    threads += [threading.Thread(target=guarded(reader, r), daemon=True) for r in range(readers)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    end = stop_at + grace
    for thread in threads:
        thread.join(timeout=max(0.0, end - time.monotonic()))
    result.seconds = time.perf_counter() - began
    if any(thread.is_alive() for thread in threads):
        with tempfile.TemporaryFile("w+") as dump:
            faulthandler.dump_traceback(dump, all_threads=True)
            dump.seek(0)
            result.stuck = dump.read()
        return result  # the store is still being written: reading it back proves nothing
    _verify(memory, sessions, written, result)
    return result


def _verify(
    memory: ContextMemory, sessions: list[str], written: list[_Written], result: LoadResult
) -> None:
    """Read every session back and compare with what was acknowledged."""
    acked = {i: (session, marker) for w in written for session, i, marker in w.acks}
    result.acknowledged = len(acked)
    stored_ids: list[str] = []
    markers: list[str] = []
    seq_of: dict[str, int] = {}
    for session in sessions:
        messages = memory.history(session)
        stored_ids += [m.id for m in messages]
        markers += [x for m in messages for x in MARKER.findall(m.text)]
        seqs = [m.seq for m in messages]
        if seqs != list(range(len(messages))):
            result.seq_problems.append(f"{session}: seqs are not 0..{len(messages) - 1}")
        for m in messages:
            seq_of[m.id] = -1 if m.seq is None else m.seq
            if m.id in acked and acked[m.id][0] != session:
                result.seq_problems.append(f"{m.id} is in {session}, written to {acked[m.id][0]}")
    counts = Counter(stored_ids)
    result.duplicates = sorted({i for i, c in counts.items() if c > 1})
    result.duplicates += sorted({f"marker {x}" for x, c in Counter(markers).items() if c > 1})
    result.lost = sorted(set(acked) - set(counts))
    result.unacknowledged_stored = len(set(counts) - set(acked))
    result.stored = len(stored_ids)
    in_store = memory.store.count(namespace=memory.namespace)
    if in_store != len(stored_ids):
        result.seq_problems.append(f"count() says {in_store}, sessions hold {len(stored_ids)}")
    for w, mine in enumerate(written):  # each writer's messages keep its order in every session
        for session in {s for s, _, _ in mine.acks}:
            order = [seq_of.get(i, -1) for s, i, _ in mine.acks if s == session]
            if order != sorted(order):
                result.seq_problems.append(f"writer {w} in {session}: seqs {order[:10]}...")


@contextmanager
def backend_memory(backend: str, embedder: Embedder) -> Iterator[ContextMemory]:
    """A fresh `ContextMemory` on an embedded Chroma or on a server started for the run."""
    root = Path(tempfile.mkdtemp(prefix=f"ctxbudget-load-{backend}-"))
    collection = f"load-{uuid.uuid4().hex[:8]}"
    try:
        if backend == "server":
            with chroma_server(root) as server:
                store = ChromaStore(url=server.url, embedder=embedder, collection=collection)
                with ContextMemory(store=store, namespace="load") as memory:
                    yield memory
        else:
            store = ChromaStore(root / "chroma", embedder=embedder, collection=collection)
            with ContextMemory(store=store, namespace="load") as memory:
                yield memory
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of load per backend")
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--readers", type=int, default=2)
    parser.add_argument("--shared-sessions", type=int, default=2)
    parser.add_argument("--backends", default="embedded,server")
    parser.add_argument("--grace", type=float, default=120.0, help="seconds to wait for threads")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--torch-threads", type=int, default=1, help="torch.set_num_threads (0: torch's default)"
    )
    args = parser.parse_args()
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = sorted(set(backends) - {"embedded", "server"})
    if unknown or args.duration <= 0 or args.writers < 1 or args.readers < 0:
        parser.error(f"bad arguments (unknown backends {unknown}?)")

    embedder = LocalEmbedder(threads=args.torch_threads or None)
    embedder.embed_query("warm up")
    import torch

    print(f"machine: {machine()}, torch {torch.__version__} ({torch.get_num_threads()} threads)")
    print(
        f"load average at start: {os.getloadavg()[0]:.2f}; {args.writers} writers, "
        f"{args.readers} assemblers, {args.shared_sessions} shared sessions, "
        f"{args.duration:.0f} s per backend, assemble budget {BUDGET}"
    )
    failed = False
    for backend in backends:
        with backend_memory(backend, embedder) as memory:
            result = run_load(
                memory,
                backend=backend,
                writers=args.writers,
                readers=args.readers,
                duration=args.duration,
                shared_sessions=args.shared_sessions,
                seed=args.seed,
                grace=args.grace,
            )
        print(result.report(), flush=True)
        failed |= not result.ok
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
