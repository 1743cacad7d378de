"""`ContextMemory` on a real Chroma: ingest throughput and `assemble` latency, embedded and server.

For each backend (an embedded Chroma in a temporary folder; a ``chroma run`` server started by
this script on 127.0.0.1 on a free port, with its data in a temporary folder, stopped at the end)
the script stores:

- ``--messages`` chat messages: sessions of 200 messages (alternating user / assistant, 1-3
  sentences of `_common.sentence`), about 5 sessions per user (at most 10 users), with
  distinctive "needle" facts stated by the user early in half of the sessions (before the
  newest 40 messages, so only retrieval can find them);
- ``--chunks`` document chunks: synthetic documents cut by `ContextMemory.add_documents`
  (``--chunk-tokens``, ``--overlap``), generated so the chunking yields exactly that many chunks;

timing the whole of each import (embedding with the real all-MiniLM-L6-v2 on CPU included, wall
clock). Then it times ``assemble(session, query, budget=4096, format="messages")`` over
``--queries`` queries (half ask for a needle in its own session, half are generic), after two
untimed warm-up calls, and counts the needle queries whose needle message was included.

Embedding dominates ingest: the header prints the embedder alone on the same texts for
reference. Chunks default to 100 tokens (``add_documents`` defaults to 200): MiniLM's cost grows
with text length, and 10,000 chunks of 200 tokens would take most of an hour per backend on two
cores. On a shared machine torch's default thread count can be much slower than one thread
(busy-waiting threads): compare with ``--torch-threads 1``.

Run: .venv/bin/python benchmarks/bench_memory.py [--quick] [--backends embedded,server]
     [--messages 10000] [--chunks 10000] [--queries 50] [--torch-threads N]
``--quick`` (1,000 messages, 500 chunks, 20 queries) is a smoke run of about a minute on an idle
2-core machine.
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
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import WORDS, machine, pct, sentence

from ctxbudget import TokenCounter
from ctxbudget.embed.local import LocalEmbedder
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.writing.chunking import chunk_text
from ctxbudget.testing import chroma_server

SESSION_LENGTH = 200
USERS = 10
START = 1_700_000_000.0

# (the fact the user states, the question asking for it)
NEEDLES = [
    (
        "My locker code at the climbing gym is 7-3-9-1.",
        "What is my locker code at the climbing gym?",
    ),
    (
        "My cat Pimenta needs her thyroid pill at eight every morning.",
        "When does my cat need her thyroid pill?",
    ),
    (
        "The wifi password at my aunt Graca's house in Braga is heron-42.",
        "What's the wifi password at my aunt's house in Braga?",
    ),
    ("My passport expires in March 2031.", "When does my passport expire?"),
    (
        "I'm allergic to penicillin; it gave me hives as a kid.",
        "Which antibiotic am I allergic to?",
    ),
    (
        "My dentist, Dr. Okafor, moved her clinic to Rua das Flores 112.",
        "Where is my dentist's clinic now?",
    ),
    (
        "The spare key to the garage is taped under the blue flowerpot.",
        "Where did I hide the spare garage key?",
    ),
    (
        "My daughter's violin recital is on the 14th at the conservatory.",
        "When is my daughter's violin recital?",
    ),
    ("I drive a green 2012 Volvo V70 estate.", "What car do I drive?"),
    ("My blood type is O negative.", "What is my blood type?"),
    (
        "Our landlord, Mr. Teixeira, only answers text messages after 6 pm.",
        "When does our landlord answer text messages?",
    ),
    (
        "The sourdough starter is named Bubbles and lives on the top shelf of the fridge.",
        "What did I name the sourdough starter?",
    ),
    (
        "My grandmother's lasagna recipe puts nutmeg in the bechamel.",
        "Which spice goes in my grandmother's bechamel?",
    ),
    (
        "I lost my left earbud on the 28 tram last Thursday.",
        "Where did I lose my earbud?",
    ),
    (
        "The insurance claim reference for the flooded basement is CLM-20931.",
        "What's the insurance claim reference for the flooded basement?",
    ),
    (
        "My bike is a red Brompton with a squeaky rear brake.",
        "What is wrong with my bike?",
    ),
    (
        "Our book club is reading The Remains of the Day this month.",
        "Which novel is the book club reading?",
    ),
    ("I'm learning the cello and my teacher is called Ingrid.", "Who is my cello teacher?"),
    (
        "The plumber quoted 340 euros to replace the water heater.",
        "How much did the plumber quote for the water heater?",
    ),
    (
        "My mother's flight from Toronto lands at 23:40 on Friday.",
        "When does my mother's flight land?",
    ),
    (
        "The residents' parking permit for zone B expires on 30 September.",
        "When does the residents' parking permit run out?",
    ),
    (
        "I keep my tax documents in the grey folder behind the piano.",
        "Where do I keep my tax documents?",
    ),
    (
        "My favourite running shoes are Saucony Kinvara in size 43.",
        "What size are my running shoes?",
    ),
    (
        "The kids' pediatrician is Dr. Haddad at the Estrela health centre.",
        "Who is the kids' pediatrician?",
    ),
    (
        "We adopted a tortoise named Sebastiao who hibernates from November.",
        "When does our tortoise start hibernating?",
    ),
    (
        "My gym membership renews on the 3rd of each month for 39 euros.",
        "How much does my gym membership cost?",
    ),
    (
        "The broken dishwasher is a Bosch, still under warranty until June.",
        "Until when is the dishwasher under warranty?",
    ),
    (
        "My username on the city library website is reader_owl_77.",
        "What is my username on the library website?",
    ),
    (
        "I promised my neighbour Rosa to water her orchids while she is in Madeira.",
        "Whose orchids did I promise to water?",
    ),
    (
        "The router's admin password is on a sticker inside the hallway cupboard.",
        "Where can I find the router admin password?",
    ),
]

GENERIC = [
    "What did we decide about the {a} and the {b}?",
    "Can you remind me of the {a} plan for {b}?",
    "Summarize what we said about {a} so far.",
    "Is the {a} still on for {b}?",
    "What should I do next about the {a}?",
]

DOC_TOPICS = (
    "Travel policy",
    "Booking app handbook",
    "Design review guide",
    "Running club notes",
    "Language school FAQ",
    "Flat rental terms",
    "Meeting etiquette",
    "Budget guidelines",
)


@dataclass
class Needle:
    session: str
    message_id: str
    fact: str
    question: str


@dataclass
class Data:
    sessions: dict[str, tuple[str, list[dict[str, Any]]]]  # id -> (user, messages)
    needles: list[Needle]
    documents: list[tuple[str, str]]
    chunks: int
    chunk_tokens: int
    overlap: int
    queries: list[tuple[str, str, Needle | None]]  # (session, query, needle)


@dataclass
class Result:
    backend: str
    message_seconds: float = 0.0
    chunk_seconds: float = 0.0
    chunks_stored: int = 0
    latencies: list[float] = field(default_factory=list)
    packing: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    items: list[int] = field(default_factory=list)
    needle_asked: int = 0
    needle_included: int = 0
    needle_offered: int = 0
    stats: dict[str, Any] = field(default_factory=dict)


# -- synthetic data ----------------------------------------------------------------------------
def build_data(args: argparse.Namespace, counter: TokenCounter) -> Data:
    rng = random.Random(args.seed)
    n_sessions = max(1, -(-args.messages // SESSION_LENGTH))
    n_users = max(1, min(USERS, n_sessions // 5))  # about 5 sessions per user
    needle_sessions = list(range(0, n_sessions, 2))
    n_needles = min(len(NEEDLES), 2 * len(needle_sessions))
    planted: dict[int, list[int]] = {}  # session index -> needle indexes
    for index in range(n_needles):
        planted.setdefault(needle_sessions[index % len(needle_sessions)], []).append(index)

    sessions: dict[str, tuple[str, list[dict[str, Any]]]] = {}
    needles: list[Needle] = []
    left = args.messages
    for s in range(n_sessions):
        sid = f"s{s:03d}"
        length = min(SESSION_LENGTH, left)
        left -= length
        # Needles are user turns (even positions) early in the session.
        room = range(2, max(2, min(40, length // 2)))
        mine = planted.get(s, [])[: len(room)]
        slots = sorted(rng.sample(room, len(mine)))
        at = {2 * slot: needle for slot, needle in zip(slots, mine, strict=True)}
        messages = []
        for i in range(length):
            mid = f"{sid}:{i:03d}"
            if i in at:
                fact, question = NEEDLES[at[i]]
                text = fact
                needles.append(Needle(sid, mid, fact, question))
            else:
                text = " ".join(sentence(rng, 4, 24) for _ in range(rng.randint(1, 3)))
            messages.append(
                {
                    "id": mid,
                    "role": "user" if i % 2 == 0 else "assistant",
                    "text": text,
                    "timestamp": START + s * 86_400 + 60 * i,
                }
            )
        sessions[sid] = (f"u{s % n_users}", messages)

    documents, chunks = build_documents(rng, args, counter)

    queries: list[tuple[str, str, Needle | None]] = []
    ids = list(sessions)
    for q in range(args.queries):
        if q % 2 == 0 and needles:
            needle = needles[(q // 2) % len(needles)]
            queries.append((needle.session, needle.question, needle))
        else:
            a, b = rng.sample(WORDS[10:], 2)
            queries.append((rng.choice(ids), rng.choice(GENERIC).format(a=a, b=b), None))
    return Data(sessions, needles, documents, chunks, args.chunk_tokens, args.overlap, queries)


def build_documents(
    rng: random.Random, args: argparse.Namespace, counter: TokenCounter
) -> tuple[list[tuple[str, str]], int]:
    """Documents whose chunking yields exactly ``args.chunks`` chunks (about 10 per document)."""

    def chunks_of(sentences: list[str]) -> int:
        return len(
            chunk_text(
                " ".join(sentences),
                max_tokens=args.chunk_tokens,
                overlap=args.overlap,
                count=counter.count,
            )
        )

    per_sentence = 16.0  # tokens of a sentence(rng, 6, 24), roughly
    documents: list[tuple[str, str]] = []
    total = 0
    while total < args.chunks:
        want = min(rng.randint(6, 14), args.chunks - total)
        n = max(1, round(want * (args.chunk_tokens - args.overlap) / per_sentence))
        title = f"{rng.choice(DOC_TOPICS)}, part {len(documents) + 1}."
        sentences = [title] + [sentence(rng, 6, 24) for _ in range(n)]
        got = chunks_of(sentences)
        while got > args.chunks - total and len(sentences) > 1:
            sentences.pop()
            got = chunks_of(sentences)
        documents.append((f"doc{len(documents):05d}", " ".join(sentences)))
        total += got
    return documents, total


@contextmanager
def open_memory(backend: str, embedder: LocalEmbedder) -> Iterator[ContextMemory]:
    root = Path(tempfile.mkdtemp(prefix=f"ctxbudget-bench-{backend}-"))
    try:
        if backend == "embedded":
            with ContextMemory(path=root / "chroma", embedder=embedder) as memory:
                yield memory
        else:
            with chroma_server(root) as server:
                with ContextMemory(chroma_url=server.url, embedder=embedder) as memory:
                    yield memory
    finally:
        shutil.rmtree(root, ignore_errors=True)


# -- the measurements --------------------------------------------------------------------------
def run_backend(backend: str, data: Data, embedder: LocalEmbedder, budget: int) -> Result:
    result = Result(backend)
    with open_memory(backend, embedder) as memory:
        start = time.perf_counter()
        for sid, (user, messages) in data.sessions.items():
            memory.add_messages(sid, messages, user_id=user, progress=False)
        result.message_seconds = time.perf_counter() - start
        print(f"  [{backend}] messages stored in {result.message_seconds:.1f} s", flush=True)

        start = time.perf_counter()
        ids = memory.add_documents(
            data.documents, chunk_tokens=data.chunk_tokens, overlap=data.overlap, progress=False
        )
        result.chunk_seconds = time.perf_counter() - start
        result.chunks_stored = len(ids)
        print(f"  [{backend}] chunks stored in {result.chunk_seconds:.1f} s", flush=True)

        for sid, query, _ in data.queries[:2]:  # warm-up: counter caches, HNSW pages
            memory.assemble(sid, query, budget=budget, format="messages")
        for sid, query, needle in data.queries:
            start = time.perf_counter()
            ctx = memory.assemble(sid, query, budget=budget, format="messages")
            result.latencies.append((time.perf_counter() - start) * 1000.0)
            result.packing.append(ctx.timing_ms)
            result.tokens.append(ctx.tokens_used)
            result.items.append(len(ctx.included))
            if needle is not None:
                result.needle_asked += 1
                included = needle.message_id in ctx.included_ids
                offered = included or any(p.item.id == needle.message_id for p in ctx.pruned)
                result.needle_included += included
                result.needle_offered += offered
        result.stats = memory.stats()
    return result


def embed_rate(embedder: LocalEmbedder, texts: list[str]) -> float:
    start = time.perf_counter()
    embedder.embed_documents(texts)
    return len(texts) / (time.perf_counter() - start)


def table(result: Result, data: Data, budget: int) -> str:
    n_messages = sum(len(m) for _, m in data.sessions.values())
    users = len({u for u, _ in data.sessions.values()})
    lat = result.latencies
    needles = (
        f"{result.needle_included}/{result.needle_asked} "
        f"({result.needle_included / result.needle_asked:.0%}); offered "
        f"{result.needle_offered}/{result.needle_asked}"
        if result.needle_asked
        else "n/a"
    )
    rows = [
        (
            "messages stored",
            f"{n_messages:,} ({len(data.sessions)} sessions, "
            f"{users} user{'s' * (users != 1)}, {len(data.needles)} needles)",
        ),
        (
            "message ingest",
            f"{n_messages / result.message_seconds:,.1f} messages/s ({result.message_seconds:.1f} s)",
        ),
        (
            "document chunks stored",
            f"{result.chunks_stored:,} from {len(data.documents):,} documents "
            f"(chunk_tokens {data.chunk_tokens}, overlap {data.overlap})",
        ),
        (
            "chunk ingest",
            f"{result.chunks_stored / result.chunk_seconds:,.1f} chunks/s ({result.chunk_seconds:.1f} s)",
        ),
        (
            f"assemble, budget {budget:,}, messages",
            f"p50 {statistics.median(lat):.1f} ms, p95 {pct(lat, 0.95):.1f} ms, "
            f"max {max(lat):.1f} ms (n={len(lat)})",
        ),
        ("  of which packing (`timing_ms`)", f"p50 {statistics.median(result.packing):.1f} ms"),
        (
            "context",
            f"median {statistics.median(result.tokens):,.0f} tokens, "
            f"{statistics.median(result.items):.0f} items",
        ),
        ("needle queries: needle included", needles),
        ("store records", f"{result.stats.get('records', 0):,} {result.stats.get('by_kind', {})}"),
    ]
    lines = [f"### {result.backend}", "", "| | |", "|---|---|"]
    lines += [f"| {name} | {value} |" for name, value in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--budget", type=int, default=4096)
    parser.add_argument("--backends", default="embedded,server")
    parser.add_argument("--chunk-tokens", type=int, default=100)
    parser.add_argument("--overlap", type=int, default=20)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--torch-threads", type=int, default=0, help="torch.set_num_threads (0: torch's default)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: 1,000 messages, 500 chunks, 20 queries"
    )
    args = parser.parse_args()
    if args.quick:
        args.messages, args.chunks, args.queries = 1_000, 500, 20
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = sorted(set(backends) - {"embedded", "server"})
    if unknown or not backends:
        parser.error(f"--backends takes embedded and/or server, got {args.backends!r}")

    import torch

    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    counter = TokenCounter.for_model("gpt-4o")
    data = build_data(args, counter)
    embedder = LocalEmbedder()
    start = time.perf_counter()
    embedder.embed_query("warm up")
    load = time.perf_counter() - start
    messages = [m["text"] for _, ms in data.sessions.values() for m in ms]
    sample = 64 if args.quick else 512
    msg_rate = embed_rate(embedder, messages[:sample])
    chunk_texts = chunk_text(
        " ".join(text for _, text in data.documents[:60]),
        max_tokens=args.chunk_tokens,
        overlap=args.overlap,
        count=counter.count,
    )[:sample]
    chunk_rate = embed_rate(embedder, chunk_texts)
    msg_tokens = statistics.mean(counter.count(t) for t in messages)
    chunk_tokens = statistics.mean(counter.count(t) for t in chunk_texts)

    threads = torch.get_num_threads()
    print(
        f"machine: {machine()}, torch {torch.__version__} ({threads} thread{'s' * (threads != 1)})"
    )
    print(
        f"load average at start: {os.getloadavg()[0]:.2f}; embedder {embedder.name} on "
        f"{embedder.device}, loaded in {load:.1f} s"
    )
    print(
        f"embedder alone: {msg_rate:,.1f} messages/s (mean {msg_tokens:.0f} tokens), "
        f"{chunk_rate:,.1f} chunks/s (mean {chunk_tokens:.0f} tokens)"
    )
    print(
        f"data: {args.messages:,} messages, {data.chunks:,} chunks from "
        f"{len(data.documents):,} documents, {len(data.queries)} queries "
        f"({sum(n is not None for _, _, n in data.queries)} needle), budget {args.budget:,}",
        flush=True,
    )

    results = []
    for backend in backends:
        results.append(run_backend(backend, data, embedder, args.budget))
    print()
    for result in results:
        print(table(result, data, args.budget))
        print()
    if len(results) > 1:
        print("| backend | messages/s | chunks/s | assemble p50 | assemble p95 | needles |")
        print("|---|---:|---:|---:|---:|---:|")
        for r in results:
            n_messages = sum(len(m) for _, m in data.sessions.values())
            share = f"{r.needle_included}/{r.needle_asked}" if r.needle_asked else "n/a"
            print(
                f"| {r.backend} | {n_messages / r.message_seconds:,.1f} | "
                f"{r.chunks_stored / r.chunk_seconds:,.1f} | "
                f"{statistics.median(r.latencies):.1f} ms | {pct(r.latencies, 0.95):.1f} ms | "
                f"{share} |"
            )


if __name__ == "__main__":
    main()
